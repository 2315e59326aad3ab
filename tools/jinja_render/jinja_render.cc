// jinja_render: reads JSON lines {"template": T, "context": {...}, "now": unix seconds} from
// stdin and writes one JSON line per case: {"ok": true, "text": ...} or
// {"ok": false, "code": "<StatusCode name>", "error": ...}. Lines with the same template parse it
// once. Used by tools/reference/jinja_sweep.py; not part of the ocular binary.
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja/template.h"

int main() {
  std::string line, last_source;
  std::optional<ocular::StatusOr<ocular::jinja::Template>> parsed;
  while (std::getline(std::cin, line)) {
    nlohmann::ordered_json out;
    const auto in = nlohmann::ordered_json::parse(line, nullptr, false);
    if (in.is_discarded() || !in.is_object() || !in.contains("template")) {
      std::cerr << "jinja_render: bad input line\n";
      return 2;
    }
    const std::string source = in["template"].get<std::string>();
    if (!parsed || source != last_source) {
      parsed.emplace(ocular::jinja::Template::Parse(source, in.value("name", "template")));
      last_source = source;
    }
    ocular::StatusOr<std::string> text =
        parsed->ok() ? (*parsed)->Render(in["context"], in.value("now", int64_t{0}))
                     : ocular::StatusOr<std::string>(parsed->status());
    if (text.ok()) {
      out["ok"] = true;
      out["text"] = *text;
    } else {
      out["ok"] = false;
      out["code"] = ocular::StatusCodeName(text.status().code());
      out["error"] = text.status().message();
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}

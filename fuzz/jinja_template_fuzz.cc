// libFuzzer target: the Jinja renderer (src/text/jinja) on arbitrary template text, rendered
// with a small chat context. Any outcome but a crash, a hang or an OK render past the output
// limit is fine; an error must carry a message naming the component.
// Seeds: testdata/chat/*.jinja (scripts/fuzz).
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "text/jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi"}]},
                 {"role": "assistant", "content": "Hello", "tool_calls": [
                   {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}],
    "tools": null, "documents": null, "add_generation_prompt": true,
    "bos_token": "<bos>", "eos_token": "<eos>"})");
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto t = ocular::jinja::Template::Parse(source, "fuzz");
  if (!t.ok()) {
    if (t.status().message().rfind("[jinja] ", 0) != 0) std::abort();
    return 0;
  }
  // 1/100 of the step limit: the limit is still reached, at 1/100 of the cost (templates that
  // loop up to it held this target at ~260 executions per second).
  auto r = t->Render(context, 0, ocular::jinja::Template::kMaxSteps / 100);
  if (r.ok() && r->size() > (16u << 20)) std::abort();
  if (!r.ok() && r.status().message().rfind("[jinja] ", 0) != 0) std::abort();
  return 0;
}

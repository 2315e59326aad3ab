// A Jinja2 renderer for chat templates, in the environment transformers 4.57's
// apply_chat_template gives them (utils/chat_template_utils.py): jinja2's
// ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the loopcontrols extension,
// transformers' `tojson` filter (ensure_ascii=False), `raise_exception`, `strftime_now`, and the
// `{% generation %}` block. The output is byte for byte what jinja2 3.1 renders
// (tools/reference/jinja_sweep.py measures it over llama.cpp's templates and ocular's
// families; docs/chat.md has the figure).
//
// What it refuses: jinja2 constructs this renderer does not implement ({% include %},
// {% call %}, recursive loops, filters such as wordwrap, ...) are kUnimplemented errors naming
// the construct and the template line, never a different prompt. Errors:
//   kDataLoss          the template is not valid Jinja (jinja2 would not compile it either)
//   kUnimplemented     a construct outside what is implemented
//   kInvalidArgument   the template raised (raise_exception) or failed on these messages
//                      (TypeError, undefined attribute, ...), as jinja2 would
//   kResourceExhausted output, loop or recursion limits
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ocular/status.h"

namespace ocular::jinja {

struct Node;

class Template {
 public:
  // Parses `source`; `where` names it in errors ("[jinja] <where>:3: ...").
  static StatusOr<Template> Parse(std::string_view source, std::string where);

  // Renders with the variables of `context` (a JSON object; null is Python's None).
  // `now` is the time strftime_now formats (local time). A render that takes more than
  // `max_steps` steps (statements, expressions, loop iterations) fails: hostile templates.
  static constexpr int64_t kMaxSteps = 5'000'000;
  StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                               std::time_t now = std::time(nullptr),
                               int64_t max_steps = kMaxSteps) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
  std::string where_;
};

}  // namespace ocular::jinja

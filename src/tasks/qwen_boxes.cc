#include "tasks/qwen_boxes.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace ocular {
namespace {

using Json = nlohmann::json;

// The text inside the first ```json (or ```) fence, to its closing fence or the end; else all.
std::string_view Unfenced(std::string_view text) {
  size_t open = text.find("```");
  if (open == std::string_view::npos) return text;
  size_t body = text.find('\n', open);
  body = body == std::string_view::npos ? text.size() : body + 1;
  const size_t close = text.find("```", body);
  return text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
}

// Every balanced {...} at nesting depth 0 of `text` (strings and escapes respected): the
// complete objects of a list that was cut short.
std::vector<std::string_view> TopLevelObjects(std::string_view text) {
  std::vector<std::string_view> out;
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      if (depth++ == 0) start = i;
    } else if (c == '}' && depth > 0 && --depth == 0) {
      out.push_back(text.substr(start, i - start + 1));
    }
  }
  return out;
}

// The objects a parsed answer holds: a list of objects, one object, or an object whose values
// include such a list ({"objects": [...]}).
void CollectObjects(const Json& j, std::vector<Json>* out) {
  if (j.is_array()) {
    for (const Json& e : j) {
      if (e.is_object()) out->push_back(e);
    }
  } else if (j.is_object()) {
    if (j.contains("bbox_2d")) {
      out->push_back(j);
      return;
    }
    for (const auto& [key, value] : j.items()) {
      if (value.is_array()) CollectObjects(value, out);
    }
  }
}

bool ToDetection(const Json& o, double sx, double sy, int image_w, int image_h, Detection* d) {
  const auto box = o.find("bbox_2d");
  if (box == o.end() || !box->is_array() || box->size() != 4) return false;
  double v[4];
  for (int k = 0; k < 4; ++k) {
    const Json& e = (*box)[k];
    if (!e.is_number()) return false;
    v[k] = e.get<double>();
    if (!std::isfinite(v[k])) return false;
  }
  auto clamp = [](double x, int hi) {
    return static_cast<float>(std::clamp(x, 0.0, static_cast<double>(hi)));
  };
  d->x0 = clamp(std::min(v[0], v[2]) * sx, image_w);
  d->x1 = clamp(std::max(v[0], v[2]) * sx, image_w);
  d->y0 = clamp(std::min(v[1], v[3]) * sy, image_h);
  d->y1 = clamp(std::max(v[1], v[3]) * sy, image_h);
  const auto label = o.find("label");
  d->label = label != o.end() && label->is_string() ? label->get<std::string>() : "";
  return true;
}

}  // namespace

std::vector<Detection> ParseQwenBoxes(std::string_view text, double frame_w, double frame_h,
                                      int image_w, int image_h) {
  std::vector<Detection> out;
  if (!(frame_w > 0) || !(frame_h > 0) || image_w <= 0 || image_h <= 0) return out;
  const std::string_view body = Unfenced(text);
  std::vector<Json> objects;
  const Json whole = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!whole.is_discarded()) {
    CollectObjects(whole, &objects);
  } else {  // cut short or malformed: the complete objects in it
    for (std::string_view piece : TopLevelObjects(body)) {
      const Json o = Json::parse(piece, nullptr, /*allow_exceptions=*/false);
      if (!o.is_discarded()) CollectObjects(o, &objects);
    }
  }
  const double sx = image_w / frame_w, sy = image_h / frame_h;
  for (const Json& o : objects) {
    Detection d;
    if (ToDetection(o, sx, sy, image_w, image_h, &d)) out.push_back(std::move(d));
  }
  return out;
}

}  // namespace ocular

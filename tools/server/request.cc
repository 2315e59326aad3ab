#include "request.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace ocular::server {

namespace {

using nlohmann::json;

ApiError Bad(std::string param, std::string message, std::string code = "") {
  ApiError e;
  e.http_status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

// The deepest nesting of arrays and objects in `body`, stopping early past `limit`. nlohmann
// parses iteratively, but a cheap pre-scan keeps pathological nesting from ever reaching it.
int JsonDepth(std::string_view body, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

const char* TypeName(const json& j) { return j.type_name(); }

// A number field: finite, in [lo, hi].
bool GetNumber(const json& body, const char* name, double lo, double hi, double* out,
               ApiError* err) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number()) {
    *err = Bad(name, StrCat(name, " must be a number, not ", TypeName(*it)));
    return false;
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    *err = Bad(name, StrCat(name, " must be a number in [", lo, ", ", hi, "]"));
    return false;
  }
  *out = v;
  return true;
}

// An integer field in [lo, hi] (a float with an integral value is accepted, as OpenAI does).
bool GetInteger(const json& body, const char* name, int64_t lo, int64_t hi, int64_t* out,
                ApiError* err) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return true;
  int64_t v = 0;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      *err = Bad(name, StrCat(name, " must be an integer in [", lo, ", ", hi, "]"));
      return false;
    }
    v = it->get<int64_t>();
  } else if (it->is_number_float()) {
    const double d = it->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
      *err = Bad(name, StrCat(name, " must be an integer"));
      return false;
    }
    v = static_cast<int64_t>(d);
  } else {
    *err = Bad(name, StrCat(name, " must be an integer, not ", TypeName(*it)));
    return false;
  }
  if (v < lo || v > hi) {
    *err = Bad(name, StrCat(name, " must be an integer in [", lo, ", ", hi, "], got ", v));
    return false;
  }
  *out = v;
  return true;
}

bool GetBool(const json& obj, const char* name, const std::string& param, bool* out,
             ApiError* err) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *err = Bad(param, StrCat(param, " must be a boolean, not ", TypeName(*it)));
    return false;
  }
  *out = it->get<bool>();
  return true;
}

// Decodes %XX escapes in place; false on a malformed escape.
bool PercentDecode(std::string* s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s->size());
  for (size_t i = 0; i < s->size(); ++i) {
    if ((*s)[i] != '%') {
      out += (*s)[i];
      continue;
    }
    if (i + 2 >= s->size()) return false;
    const int hi = hex((*s)[i + 1]), lo = hex((*s)[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  *s = std::move(out);
  return true;
}

// URL schemes are case-insensitive (RFC 3986 §3.1): "HTTP://" is "http://".
bool HasScheme(const std::string& url, std::string_view scheme) {
  return url.size() >= scheme.size() &&
         std::equal(scheme.begin(), scheme.end(), url.begin(), [](char a, char b) {
           return a == std::tolower(static_cast<unsigned char>(b));
         });
}

bool ReadLocalFile(const std::string& url, const std::string& param, const std::string& root,
                   const RequestLimits& limits, std::vector<uint8_t>* out, ApiError* err) {
  if (root.empty()) {
    *err = Bad(param,
               StrCat(param,
                      ": file:// URLs are disabled (start the server with "
                      "--allow-local-files DIR)"),
               "local_files_disabled");
    return false;
  }
  std::string path = url.substr(7);  // after "file://"
  if (path.rfind("localhost/", 0) == 0) path = path.substr(9);
  // The same answer for a file outside the folder and one that does not exist, so the
  // server is no oracle for what exists elsewhere on the machine.
  const std::string outside =
      StrCat(param, ": not a readable file inside the folder given to --allow-local-files");
  // RFC 8089: the path is percent-encoded ("my%20cat.png"); the decoded path is what
  // realpath checks against the root below, so "%2e%2e/" is no way out of it.
  if (!PercentDecode(&path) || path.empty() || path[0] != '/' ||
      path.find('\0') != std::string::npos) {
    *err = Bad(param, outside, "invalid_image_url");
    return false;
  }
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    *err = Bad(param, outside, "invalid_image_url");
    return false;
  }
  const std::string real = resolved;
  if (real.size() <= root.size() || real.compare(0, root.size(), root) != 0 ||
      (root.back() != '/' && real[root.size()] != '/')) {
    *err = Bad(param, outside, "invalid_image_url");
    return false;
  }
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *err = Bad(param, outside, "invalid_image_url");
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) > limits.max_image_bytes) {
    *err = Bad(param,
               StrCat(param, ": the image is ", st.st_size, " bytes, over the limit of ",
                      limits.max_image_bytes),
               "image_too_large");
    return false;
  }
  FILE* f = std::fopen(real.c_str(), "rb");
  if (f == nullptr) {
    *err = Bad(param, outside, "invalid_image_url");
    return false;
  }
  out->resize(static_cast<size_t>(st.st_size));
  const size_t n = out->empty() ? 0 : std::fread(out->data(), 1, out->size(), f);
  std::fclose(f);
  out->resize(n);
  return true;
}

// data:image/<fmt>;base64,<payload> → bytes.
bool ReadDataUrl(const std::string& url, const std::string& param, const RequestLimits& limits,
                 std::vector<uint8_t>* out, ApiError* err) {
  const size_t comma = url.find(',');
  if (comma == std::string::npos) {
    *err = Bad(param, StrCat(param, ": a data URL needs a ',' before its payload"),
               "invalid_image_url");
    return false;
  }
  std::string meta = url.substr(5, comma - 5);  // media types are case-insensitive too
  std::transform(meta.begin(), meta.end(), meta.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (meta.size() < 7 || meta.compare(meta.size() - 7, 7, ";base64") != 0) {
    *err = Bad(param,
               StrCat(param, ": only base64 data URLs are accepted (data:image/png;base64,...)"),
               "invalid_image_url");
    return false;
  }
  if (meta.rfind("image/", 0) != 0) {
    *err = Bad(param, StrCat(param, ": the data URL's media type must be image/*"),
               "invalid_image_url");
    return false;
  }
  std::string_view payload = std::string_view(url).substr(comma + 1);
  // MIME base64 is wrapped at 76 columns (RFC 2045) and many encoders keep the line breaks:
  // whitespace between the characters is dropped, as Python's b64decode and browsers do.
  std::string unwrapped;
  if (payload.find_first_of(" \t\r\n") != std::string_view::npos) {
    unwrapped.reserve(payload.size());
    for (char c : payload) {
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n') unwrapped += c;
    }
    payload = unwrapped;
  }
  if (payload.size() / 4 * 3 > limits.max_image_bytes) {
    *err = Bad(param,
               StrCat(param, ": the image is over the limit of ", limits.max_image_bytes, " bytes"),
               "image_too_large");
    return false;
  }
  if (!DecodeBase64(payload, out) || out->empty()) {
    *err = Bad(param, StrCat(param, ": invalid base64 in the data URL"), "invalid_image_url");
    return false;
  }
  return true;
}

// One image_url part → an ImageInput.
bool ReadImagePart(const json& part, const std::string& param, const RequestLimits& limits,
                   const std::string& root, ChatRequest* req, ApiError* err) {
  auto iu = part.find("image_url");
  if (iu == part.end()) {
    *err = Bad(param + ".image_url", StrCat(param, ".image_url is missing"));
    return false;
  }
  const json* url_field = nullptr;
  if (iu->is_string()) {
    url_field = &*iu;  // some clients send the URL directly
  } else if (iu->is_object()) {
    auto u = iu->find("url");
    if (u != iu->end()) url_field = &*u;
    auto detail = iu->find("detail");
    if (detail != iu->end() && !detail->is_null() && !detail->is_string()) {
      *err = Bad(param + ".image_url.detail", StrCat(param, ".image_url.detail must be a string"));
      return false;
    }
  } else {
    *err = Bad(param + ".image_url",
               StrCat(param, ".image_url must be an object, not ", TypeName(*iu)));
    return false;
  }
  const std::string uparam = param + ".image_url.url";
  if (url_field == nullptr || !url_field->is_string()) {
    *err = Bad(uparam, StrCat(uparam, " must be a string"));
    return false;
  }
  if (static_cast<int>(req->images.size()) >= limits.max_images) {
    *err = Bad(uparam, StrCat("too many images: at most ", limits.max_images, " per request"),
               "too_many_images");
    return false;
  }
  const std::string& url = url_field->get_ref<const std::string&>();
  std::vector<uint8_t> bytes;
  if (HasScheme(url, "data:")) {
    if (!ReadDataUrl(url, uparam, limits, &bytes, err)) return false;
  } else if (HasScheme(url, "file://")) {
    if (!ReadLocalFile(url, uparam, root, limits, &bytes, err)) return false;
  } else if (HasScheme(url, "http://") || HasScheme(url, "https://")) {
    *err = Bad(uparam,
               StrCat(uparam,
                      ": remote URLs are refused: the server never fetches; send the "
                      "image as a base64 data: URL"),
               "remote_url_refused");
    return false;
  } else {
    *err =
        Bad(uparam, StrCat(uparam, ": expected a data:image/...;base64, URL"), "invalid_image_url");
    return false;
  }
  if (bytes.size() > limits.max_image_bytes) {
    *err =
        Bad(uparam,
            StrCat(uparam, ": the image is over the limit of ", limits.max_image_bytes, " bytes"),
            "image_too_large");
    return false;
  }
  if (!LooksLikeImage(bytes)) {
    *err =
        Bad(uparam, StrCat(uparam, ": not a PNG, JPEG, WebP, GIF or BMP image"), "invalid_image");
    return false;
  }
  req->images.push_back(
      ImageInput::FromBytes(std::move(bytes), StrCat("image ", req->images.size() + 1)));
  return true;
}

// A message's content given as parts: text parts joined by "\n" into *text, image parts
// (user messages only) read into req->images.
bool ReadContentParts(const json& content, const std::string& mp, bool is_user,
                      const RequestLimits& limits, const std::string& root, ChatRequest* req,
                      std::string* text, ChatMessage* message, ApiError* err) {
  for (size_t k = 0; k < content.size(); ++k) {
    const json& part = content[k];
    const std::string pp = StrCat(mp, ".content[", k, "]");
    if (!part.is_object()) {
      *err = Bad(pp, StrCat(pp, " must be an object, not ", TypeName(part)));
      return false;
    }
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      *err = Bad(pp + ".type", StrCat(pp, ".type must be a string"));
      return false;
    }
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "text") {
      auto tx = part.find("text");
      if (tx == part.end() || !tx->is_string()) {
        *err = Bad(pp + ".text", StrCat(pp, ".text must be a string"));
        return false;
      }
      if (!text->empty()) *text += "\n";
      *text += tx->get<std::string>();
      message->content.push_back({false, tx->get<std::string>()});
    } else if (t == "image_url") {
      if (!is_user) {
        *err = Bad(pp, StrCat(pp, ": images are accepted in user messages only"));
        return false;
      }
      if (!ReadImagePart(part, pp, limits, root, req, err)) return false;
      message->content.push_back({true, ""});
    } else {
      *err =
          Bad(pp + ".type", StrCat(pp, ".type: unsupported content part type (text or image_url)"));
      return false;
    }
  }
  return true;
}

// messages[i]: its role and content; *text is the message's text (its text parts joined).
bool ReadMessage(const json& m, size_t i, const RequestLimits& limits, const std::string& root,
                 ChatRequest* req, ChatMessage* message, std::string* text, bool* is_user,
                 ApiError* err) {
  const std::string mp = StrCat("messages[", i, "]");
  if (!m.is_object()) {
    *err = Bad(mp, StrCat(mp, " must be an object, not ", TypeName(m)));
    return false;
  }
  auto role_it = m.find("role");
  if (role_it == m.end() || !role_it->is_string()) {
    *err = Bad(mp + ".role", StrCat(mp, ".role must be a string"));
    return false;
  }
  const std::string& role = role_it->get_ref<const std::string&>();
  *is_user = role == "user";
  if (!*is_user && role != "system" && role != "developer" && role != "assistant") {
    *err = Bad(mp + ".role", StrCat(mp,
                                    ".role: unknown role (user, system, developer or "
                                    "assistant)"));
    return false;
  }
  auto content = m.find("content");
  *message = ChatMessage{role == "developer" ? "system" : role, {}};
  if (content == m.end() || content->is_null()) {
    if (*is_user) {
      *err = Bad(mp + ".content", StrCat(mp, ".content is required for a user message"));
      return false;
    }
  } else if (content->is_string()) {
    *text = content->get<std::string>();
    message->content.push_back({false, *text});
  } else if (content->is_array()) {
    if (!ReadContentParts(*content, mp, *is_user, limits, root, req, text, message, err)) {
      return false;
    }
  } else {
    *err = Bad(mp + ".content",
               StrCat(mp, ".content must be a string or an array, not ", TypeName(*content)));
    return false;
  }
  return true;
}

// messages → prompt (last user message's text) + images (all user messages).
bool ReadMessages(const json& body, const RequestLimits& limits, const std::string& root,
                  ChatRequest* req, ApiError* err) {
  auto msgs = body.find("messages");
  if (msgs == body.end()) {
    *err = Bad("messages", "messages is required");
    return false;
  }
  if (!msgs->is_array()) {
    *err = Bad("messages", StrCat("messages must be an array, not ", TypeName(*msgs)));
    return false;
  }
  if (msgs->empty()) {
    *err = Bad("messages", "messages must not be empty");
    return false;
  }
  if (static_cast<int>(msgs->size()) > limits.max_messages) {
    *err = Bad("messages", StrCat("messages has ", msgs->size(), " entries, over the limit of ",
                                  limits.max_messages));
    return false;
  }
  int last_user = -1;
  std::string last_user_text;
  bool last_user_images = false;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    ChatMessage message;
    std::string text;
    bool is_user = false;
    if (!ReadMessage(m, i, limits, root, req, &message, &text, &is_user, err)) return false;
    if (is_user) {
      last_user = static_cast<int>(i);
      last_user_text = std::move(text);
      last_user_images = std::any_of(message.content.begin(), message.content.end(),
                                     [](const ChatPart& p) { return p.is_image; });
    }
    req->messages.push_back(std::move(message));
  }
  if (last_user < 0) {
    *err = Bad("messages", "messages has no user message (the prompt)");
    return false;
  }
  if (last_user_text.empty() && !last_user_images) {
    *err = Bad(StrCat("messages[", last_user, "].content"),
               StrCat("messages[", last_user, "].content: the prompt text is empty"));
    return false;
  }
  if (last_user_text.size() > limits.max_prompt_bytes) {
    *err = Bad(StrCat("messages[", last_user, "].content"),
               StrCat("the prompt is ", last_user_text.size(), " bytes, over the limit of ",
                      limits.max_prompt_bytes),
               "context_length_exceeded");
    return false;
  }
  req->prompt = std::move(last_user_text);
  return true;
}

bool ReadStop(const json& body, const RequestLimits& limits, ChatRequest* req, ApiError* err) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return true;
  std::vector<std::string> stops;
  if (it->is_string()) {
    stops.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) {
        *err = Bad(StrCat("stop[", i, "]"), StrCat("stop[", i, "] must be a string"));
        return false;
      }
      stops.push_back((*it)[i].get<std::string>());
    }
  } else {
    *err = Bad("stop", StrCat("stop must be a string or an array of strings, not ", TypeName(*it)));
    return false;
  }
  if (static_cast<int>(stops.size()) > limits.max_stop) {
    *err = Bad("stop", StrCat("stop has ", stops.size(), " strings, at most ", limits.max_stop));
    return false;
  }
  for (const std::string& s : stops) {
    if (s.size() > limits.max_stop_bytes) {
      *err = Bad("stop", StrCat("a stop string is over ", limits.max_stop_bytes, " bytes"));
      return false;
    }
  }
  req->options.stop = std::move(stops);
  return true;
}

// OpenAI's response_format: {"type": "text"}, {"type": "json_object"} or {"type":
// "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}. The answer is
// constrained whatever "strict" says. The schema is compiled here, so a refused one is a 400
// that names the keyword (docs/structured-output.md).
bool ReadResponseFormat(const json& body, ChatRequest* req, ApiError* err) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return true;
  auto type = it->is_object() ? it->find("type") : it->end();
  if (!it->is_object() || type == it->end() || !type->is_string()) {
    *err = Bad("response_format", "response_format must be an object with a string \"type\"");
    return false;
  }
  const std::string t = type->get<std::string>();
  if (t == "json_object") {
    req->options.json_object = true;
  } else if (t == "json_schema") {
    const json* schema = nullptr;
    if (auto js = it->find("json_schema"); js != it->end() && js->is_object()) {
      if (auto sc = js->find("schema"); sc != js->end()) schema = &*sc;
    }
    if (schema == nullptr || !(schema->is_object() || schema->is_boolean())) {
      *err = Bad("response_format.json_schema.schema",
                 "response_format json_schema needs json_schema.schema, a JSON Schema object");
      return false;
    }
    req->options.json_schema = schema->dump();
  } else if (t != "text") {
    *err = Bad("response_format.type", StrCat("response_format type must be \"text\", "
                                              "\"json_object\" or \"json_schema\", not \"",
                                              t, "\""));
    return false;
  }
  if (Status s = CheckStructuredOutput(req->options); !s.ok()) {
    *err = Bad("response_format", s.message(), "unsupported_schema");
    return false;
  }
  return true;
}

// max_tokens (or max_completion_tokens), temperature, top_p, seed and n.
bool ReadSampling(const json& body, const RequestLimits& limits, ChatRequest* req, ApiError* err) {
  int64_t max_tokens = limits.default_max_tokens;
  if (!GetInteger(body, "max_tokens", 1, limits.max_completion_tokens, &max_tokens, err))
    return false;
  if (!GetInteger(body, "max_completion_tokens", 1, limits.max_completion_tokens, &max_tokens,
                  err)) {
    return false;
  }
  req->options.max_tokens = static_cast<int>(max_tokens);
  double temperature = 0, top_p = 1;
  if (!GetNumber(body, "temperature", 0.0, 2.0, &temperature, err)) return false;
  if (!GetNumber(body, "top_p", 0.0, 1.0, &top_p, err)) return false;
  req->options.temperature = static_cast<float>(temperature);
  req->options.top_p = static_cast<float>(top_p);
  int64_t seed = 0;
  if (!GetInteger(body, "seed", INT64_MIN, INT64_MAX, &seed, err)) return false;
  req->options.seed = static_cast<uint64_t>(seed);
  int64_t n = 1;
  if (!GetInteger(body, "n", 1, 1, &n, err)) {
    err->message = "n must be 1 (one choice per request)";
    return false;
  }
  return true;
}

// vLLM's mm_processor_kwargs: {"min_pixels", "max_pixels"} (Qwen2VLImageProcessor's bounds,
// GenerateOptions::image_resize). Any other key is refused, never ignored.
bool ReadProcessorKwargs(const json& body, ChatRequest* req, ApiError* err) {
  auto it = body.find("mm_processor_kwargs");
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_object()) {
    *err = Bad("mm_processor_kwargs",
               StrCat("mm_processor_kwargs must be an object, not ", TypeName(*it)));
    return false;
  }
  for (const auto& [key, value] : it->items()) {
    if (key != "min_pixels" && key != "max_pixels") {
      *err = Bad("mm_processor_kwargs",
                 StrCat("mm_processor_kwargs: '", key.substr(0, 64),
                        "' is not supported (ocular takes min_pixels and max_pixels)"));
      return false;
    }
  }
  constexpr int64_t kMaxPixels = int64_t{1} << 28;
  ImageResize& r = req->options.image_resize;
  return GetInteger(*it, "min_pixels", 1, kMaxPixels, &r.min_pixels, err) &&
         GetInteger(*it, "max_pixels", 1, kMaxPixels, &r.max_pixels, err);
}

// The extensions of other servers ocular takes: pan_and_scan (ocular's, Gemma 3's crops),
// chat_template_kwargs (vLLM's and llama-server's) and mm_processor_kwargs (vLLM's).
bool ReadExtensions(const json& body, const RequestLimits& limits, ChatRequest* req,
                    ApiError* err) {
  if (!ReadProcessorKwargs(body, req, err)) return false;
  // ocular's extension: Gemma 3's pan-and-scan crops (GenerateOptions::pan_and_scan).
  if (auto it = body.find("pan_and_scan"); it != body.end() && !it->is_null()) {
    bool pan_and_scan = false;
    if (!GetBool(body, "pan_and_scan", "pan_and_scan", &pan_and_scan, err)) return false;
    req->options.pan_and_scan = pan_and_scan;
  }
  // vLLM's and llama-server's extension: extra chat template variables
  // (GenerateOptions::chat_template_kwargs), e.g. {"enable_thinking": false}.
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      *err = Bad("chat_template_kwargs",
                 StrCat("chat_template_kwargs must be an object, not ", TypeName(*it)));
      return false;
    }
    req->options.chat_template_kwargs = it->dump();
    if (req->options.chat_template_kwargs.size() > limits.max_prompt_bytes) {
      *err = Bad("chat_template_kwargs",
                 StrCat("chat_template_kwargs is over ", limits.max_prompt_bytes, " bytes"));
      return false;
    }
  }
  return true;
}

}  // namespace

std::string DefaultErrorCode(int http_status) {
  switch (http_status) {
    case 400:
      return "invalid_request";
    case 401:
      return "invalid_api_key";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 408:
      return "request_timeout";
    case 413:
      return "request_too_large";
    case 415:
      return "unsupported_media_type";
    case 429:
      return "rate_limited";
    case 503:
      return "unavailable";
    case 504:
      return "deadline_exceeded";
    default:
      return http_status >= 500 ? "internal_error" : "invalid_request";
  }
}

std::string ErrorJson(const ApiError& e) {
  json j = {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? DefaultErrorCode(e.http_status) : e.code}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool DecodeBase64(std::string_view in, std::vector<uint8_t>* out) {
  out->clear();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;
  out->reserve(in.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else {
      return false;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  return true;
}

std::string_view BearerToken(std::string_view h) {
  auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (!h.empty() && space(h.front())) h.remove_prefix(1);
  while (!h.empty() && space(h.back())) h.remove_suffix(1);
  constexpr std::string_view kScheme = "bearer";
  if (h.size() <= kScheme.size() || !space(h[kScheme.size()]) ||
      !std::equal(kScheme.begin(), kScheme.end(), h.begin(), [](char a, char b) {
        return a == std::tolower(static_cast<unsigned char>(b));
      })) {
    return {};
  }
  h.remove_prefix(kScheme.size());
  while (!h.empty() && space(h.front())) h.remove_prefix(1);
  return h;
}

bool SecretEquals(std::string_view presented, std::string_view expected) {
  // Every byte of `expected` is visited whatever `presented` is, so the time reveals neither
  // the matching prefix nor (beyond the comparison of sizes) the presented length.
  unsigned diff = presented.size() != expected.size() ? 1u : 0u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char p =
        presented.empty() ? 0 : static_cast<unsigned char>(presented[i % presented.size()]);
    diff |= p ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0 && !expected.empty();
}

bool LooksLikeImage(const std::vector<uint8_t>& b) {
  auto starts = [&](std::string_view magic, size_t at = 0) {
    return b.size() >= at + magic.size() &&
           std::equal(magic.begin(), magic.end(), b.begin() + static_cast<std::ptrdiff_t>(at),
                      [](char m, uint8_t x) { return static_cast<uint8_t>(m) == x; });
  };
  return starts("\x89PNG\r\n\x1a\n") || starts("\xff\xd8\xff") || starts("GIF87a") ||
         starts("GIF89a") || (starts("RIFF") && starts("WEBP", 8)) || starts("BM");
}

ParseResult ParseChatRequest(std::string_view body_text, const RequestLimits& limits,
                             const std::string& local_files_root) {
  ParseResult r;
  ApiError& err = r.error;
  ChatRequest& req = r.request;
  if (JsonDepth(body_text, limits.max_json_depth) > limits.max_json_depth) {
    err = Bad("", StrCat("the request body nests deeper than ", limits.max_json_depth, " levels"));
    return r;
  }
  json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    err = Bad("", "the request body is not valid JSON", "invalid_json");
    return r;
  }
  if (!body.is_object()) {
    err = Bad("", StrCat("the request body must be a JSON object, not ", TypeName(body)));
    return r;
  }
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) {
      err = Bad("model", StrCat("model must be a string, not ", TypeName(*m)));
      return r;
    }
    req.model = m->get<std::string>();
    if (req.model.empty()) {
      err = Bad("model", "model must not be empty (leave it out, or name the served model)",
                "invalid_value");
      return r;
    }
  }
  if (!ReadMessages(body, limits, local_files_root, &req, &err)) return r;

  if (!ReadSampling(body, limits, &req, &err)) return r;
  if (!ReadStop(body, limits, &req, &err)) return r;
  if (!ReadResponseFormat(body, &req, &err)) return r;
  if (!ReadExtensions(body, limits, &req, &err)) return r;
  if (!GetBool(body, "stream", "stream", &req.stream, &err)) return r;
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) {
      err = Bad("stream_options", "stream_options must be an object");
      return r;
    }
    if (!GetBool(*so, "include_usage", "stream_options.include_usage", &req.include_usage, &err)) {
      return r;
    }
  }
  // Features ocular does not have: refused rather than silently ignored.
  for (const char* name : {"tools", "functions", "logprobs", "top_logprobs"}) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) continue;
    err = Bad(name, StrCat(name, " is not supported by ocular serve"), "unsupported_parameter");
    return r;
  }
  return r;
}

}  // namespace ocular::server

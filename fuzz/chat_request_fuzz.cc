// libFuzzer target: ParseChatRequest (tools/server/request.h) on arbitrary request bodies. An
// accepted request must satisfy the limits; a refused one must be a 4xx whose error JSON
// parses.
// Seeds: written by scripts/fuzz.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ocular::server::RequestLimits limits;
  limits.max_image_bytes = 1 << 16;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const ocular::server::ParseResult r = ocular::server::ParseChatRequest(body, limits, "");
  if (r.ok()) {
    const ocular::server::ChatRequest& q = r.request;
    if (q.prompt.empty() || q.prompt.size() > limits.max_prompt_bytes) std::abort();
    if (static_cast<int>(q.images.size()) > limits.max_images) std::abort();
    for (const ocular::ImageInput& in : q.images) {
      if (!in.from_bytes || in.bytes.size() > limits.max_image_bytes) std::abort();
      if (!ocular::server::LooksLikeImage(in.bytes)) std::abort();
    }
    const ocular::GenerateOptions& o = q.options;
    if (o.max_tokens < 1 || o.max_tokens > limits.max_completion_tokens) std::abort();
    if (!std::isfinite(o.temperature) || o.temperature < 0 || o.temperature > 2) std::abort();
    if (!std::isfinite(o.top_p) || o.top_p < 0 || o.top_p > 1) std::abort();
    if (static_cast<int>(o.stop.size()) > limits.max_stop) std::abort();
  } else {
    if (r.error.http_status < 400 || r.error.http_status > 499) std::abort();
    const auto j = nlohmann::json::parse(ocular::server::ErrorJson(r.error), nullptr, false);
    if (j.is_discarded() || !j["error"]["message"].is_string()) std::abort();
  }
  return 0;
}

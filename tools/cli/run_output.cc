#include "run_output.h"

namespace ocular::cli {

namespace {

using json = nlohmann::ordered_json;

double PerSecond(int64_t n, double ms) { return ms > 0 ? n / (ms / 1000.0) : 0.0; }

// Invalid UTF-8 (a model may emit any bytes) becomes U+FFFD rather than an exception.
std::string Dump(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace

json RunJson(const RunContext& c, const std::string& prompt, const GenerateResult& r,
             const std::vector<Detection>& boxes, size_t peak_rss_bytes) {
  json images = json::array();
  for (size_t i = 0; i < r.image_sizes.size(); ++i) {
    images.push_back({{"source", i < c.image_sources.size() ? c.image_sources[i] : ""},
                      {"width", r.image_sizes[i].width},
                      {"height", r.image_sizes[i].height}});
  }
  const Timings& t = r.timings;
  return {
      {"schema", kRunSchema},
      {"model",
       {{"path", c.model_path},
        {"architecture", c.info.architecture},
        {"weight_dtype", c.info.weight_dtype},
        {"threads", c.info.threads},
        {"isa", c.info.isa},
        {"precision", c.info.precision},
        {"kv_cache", c.info.kv_cache},
        {"quant_activations", c.info.quant_activations}}},
      {"prompt", prompt},
      {"images", images},
      {"answer", r.text},
      {"raw", r.raw_text},
      {"finish_reason", r.finish_reason},
      // Boxes in pixels of images[0] (docs/models.md §3); goes through DetectionsJson so task
      // outputs have one writer.
      {"detections", json::parse(DetectionsJson(boxes))},
      {"prompt_ids", r.prompt_ids},
      {"output_ids", r.output_ids},
      {"timings",
       {{"load_ms", c.load_ms},
        {"image_ms", t.image_ms},
        {"prefill_ms", t.prefill_ms},
        {"decode_ms", t.decode_ms},
        {"prefill_tokens", t.prefill_tokens},
        {"decode_tokens", t.decode_tokens},
        {"prefill_tok_s", PerSecond(t.prefill_tokens, t.prefill_ms)},
        {"decode_tok_s", PerSecond(t.decode_tokens, t.decode_ms)},
        {"constraint_ms", t.constraint_ms}}},
      {"peak_rss_bytes", peak_rss_bytes},
  };
}

std::string FormatRunJson(const json& j) {
  std::string out = "{";
  for (const auto& [key, value] : j.items()) {
    out += (out.size() > 1 ? ",\n  " : "\n  ") + Dump(json(key)) + ": " + Dump(value);
  }
  return out + "\n}";
}

std::string StartEvent(const std::string& prompt) {
  return Dump({{"event", "start"}, {"schema", kRunSchema}, {"prompt", prompt}});
}

std::string TokenEvent(int index, const std::string& text) {
  return Dump({{"event", "token"}, {"index", index}, {"text", text}});
}

std::string DoneEvent(json result) {
  json event = {{"event", "done"}};
  event.update(result);
  return Dump(event);
}

std::string ErrorEvent(const Status& s, int exit_code) {
  return Dump({{"event", "error"}, {"exit_code", exit_code}, {"message", s.message()}});
}

}  // namespace ocular::cli

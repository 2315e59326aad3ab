#include "runtime/generator.h"

#include <chrono>

#include "core/thread_pool.h"

namespace ocular {

namespace {
double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

StatusOr<GenerationOutput> Generate(ThreadPool& pool, const PaliGemma& model,
                                    const GenerationRequest& req, Tracer* tracer,
                                    const TokenSink& on_token) {
  const PaliGemmaConfig& cfg = model.config();
  const int64_t T = static_cast<int64_t>(req.ids.size());
  if (T == 0) return Error(StatusCode::kInvalidArgument, "generate", "empty prompt");
  if (req.max_new_tokens < 0) {
    return Error(StatusCode::kInvalidArgument, "generate", "max_new_tokens must be >= 0");
  }
  const int64_t capacity = T + req.max_new_tokens;
  if (capacity > cfg.text.max_position_embeddings) {
    return Error(StatusCode::kResourceExhausted, "generate", "prompt (", T, " tokens) + ",
                 req.max_new_tokens, " new tokens exceed the context length ",
                 cfg.text.max_position_embeddings);
  }
  GenerationOutput out;
  auto t0 = std::chrono::steady_clock::now();
  Tensor features;
  if (req.pixel_values) {
    features = model.EncodeImages(pool, *req.pixel_values, tracer);
    out.image_ms = MsSince(t0);
  }
  t0 = std::chrono::steady_clock::now();
  OCULAR_ASSIGN_OR_RETURN(Tensor x, model.Embed(req.ids, req.pixel_values ? &features : nullptr, tracer));
  KvCache cache = model.NewCache(capacity);
  Tensor hidden = model.Decode(pool, std::move(x), Span{0, T, T}, cache, tracer);
  const int64_t first_row = req.record_prompt_logits ? 0 : T - 1;
  Tensor logits = model.Logits(pool, hidden.row(first_row), T - first_row);
  const int64_t V = logits.dim(1);
  if (req.record_prompt_logits) {
    TapIf(tracer, "logits", logits.data.data(), logits.shape);
  }
  out.prefill_ms = MsSince(t0);

  t0 = std::chrono::steady_clock::now();
  Sampler sampler(req.sampling);
  std::vector<float> last(logits.row(logits.dim(0) - 1), logits.row(logits.dim(0) - 1) + V);
  std::vector<float> decode_logits;
  for (int step = 0; step < req.max_new_tokens; ++step) {
    if (req.record_decode_logits) decode_logits.insert(decode_logits.end(), last.begin(), last.end());
    const int32_t id = sampler.Next(last.data(), static_cast<int32_t>(V));
    out.generated.push_back(id);
    if (on_token && !on_token(id)) break;
    if (id == req.eos_id || step + 1 == req.max_new_tokens) break;
    OCULAR_ASSIGN_OR_RETURN(Tensor e, model.Embed({id}, nullptr, nullptr));
    const int64_t pos = T + step;
    Tensor h = model.Decode(pool, std::move(e), Span{pos, 1, T}, cache, nullptr);
    Tensor l = model.Logits(pool, h.row(0), 1);
    last.assign(l.data.begin(), l.data.end());
  }
  out.decode_ms = MsSince(t0);
  if (req.record_prompt_logits) out.prompt_logits = std::move(logits);
  if (req.record_decode_logits) {
    const int64_t steps = static_cast<int64_t>(decode_logits.size()) / V;
    out.decode_logits = Tensor({steps, V});
    out.decode_logits.data = std::move(decode_logits);
  }
  return out;
}

}  // namespace ocular

#include "runtime/generator.h"

#include <chrono>

namespace ocular {

namespace {
double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Reports one stage's progress if anyone listens (no allocation: Progress is plain data).
void Report(const ProgressCallback* progress, Stage stage, int64_t done, int64_t total,
            std::chrono::steady_clock::time_point begin) {
  if (progress != nullptr && *progress) (*progress)({stage, done, total, MsSince(begin)});
}
}  // namespace

StatusOr<GenerationOutput> Generate(Runner& runner, KvPool& kv, const GenerationRequest& req,
                                    Tracer* tracer, const TokenSink& on_token) {
  const ModelSpec& spec = runner.model().spec();
  const int64_t T = static_cast<int64_t>(req.ids.size());
  if (T == 0) return Error(StatusCode::kInvalidArgument, "generate", "empty prompt");
  if (req.max_new_tokens < 0) {
    return Error(StatusCode::kInvalidArgument, "generate", "max_new_tokens must be >= 0");
  }
  const int64_t capacity = T + req.max_new_tokens;
  if (capacity > spec.max_positions) {
    return Error(StatusCode::kResourceExhausted, "generate", "prompt (", T, " tokens) + ",
                 req.max_new_tokens, " new tokens exceed the context length ", spec.max_positions);
  }
  GenerationOutput out;
  auto t0 = std::chrono::steady_clock::now();
  const float* features = nullptr;
  int64_t feature_rows = 0;
  std::vector<float> encoded;
  if (req.features != nullptr) {
    features = req.features->data.data();
    feature_rows = req.features->numel() / spec.hidden_size;
  } else if (req.pixel_values != nullptr) {
    const int64_t n = req.pixel_values->dim(0);
    feature_rows = n * spec.image_tokens;
    encoded.resize(static_cast<size_t>(feature_rows * spec.hidden_size));
    Report(req.progress, Stage::kEncode, 0, n, t0);
    runner.EncodeImages(req.pixel_values->data.data(), n, encoded.data(), tracer);
    features = encoded.data();
    out.image_ms = MsSince(t0);
    Report(req.progress, Stage::kEncode, n, n, t0);
  }

  t0 = std::chrono::steady_clock::now();
  SequenceParams p;
  p.prompt = req.ids;
  p.prefix_len = req.prefix_len >= 0 ? req.prefix_len : T;
  p.max_new_tokens = req.max_new_tokens;
  p.sampling = req.sampling;
  p.eos_ids = req.eos_ids;
  p.constraint = req.constraint;
  const int64_t images = spec.image_tokens > 0 ? feature_rows / spec.image_tokens : 0;
  OCULAR_ASSIGN_OR_RETURN(KvHandle cache, kv.Acquire(capacity, images));
  Sequence seq(std::move(p), std::move(cache), runner.vocab());
  std::vector<float> prompt_logits;
  // The prefix is bidirectional, so it runs as one pass: begin and end are all there is.
  Report(req.progress, Stage::kPrefill, 0, T, t0);
  OCULAR_RETURN_IF_ERROR(runner.Prefill(seq, features, feature_rows, tracer,
                                        req.record_prompt_logits ? &prompt_logits : nullptr));
  out.prefill_ms = MsSince(t0);
  Report(req.progress, Stage::kPrefill, T, T, t0);

  t0 = std::chrono::steady_clock::now();
  const int64_t V = runner.vocab();
  std::vector<float> decode_logits;
  Sequence* batch[] = {&seq};
  // Each iteration hands out the latest token; a failed step adds none.
  Report(req.progress, Stage::kDecode, 0, req.max_new_tokens, t0);
  size_t reported = 0;  // a sequence whose constraint allows nothing more ends without a token
  while (seq.generated().size() > reported && seq.finish_reason() != FinishReason::kFailed) {
    reported = seq.generated().size();
    if (req.record_decode_logits) {
      decode_logits.insert(decode_logits.end(), runner.last_logits(0), runner.last_logits(0) + V);
    }
    Report(req.progress, Stage::kDecode, static_cast<int64_t>(seq.generated().size()),
           req.max_new_tokens, t0);
    if (on_token && !on_token(seq.last_token())) seq.Cancel();
    if (seq.done()) break;
    runner.DecodeStep(batch);
  }
  out.decode_ms = MsSince(t0);
  if (seq.finish_reason() == FinishReason::kFailed) {
    return Error(StatusCode::kInternal, "generate", "the model produced NaN logits after ",
                 seq.generated().size(),
                 " generated tokens (NaN or infinite weights, or an "
                 "invalid eps / rope_theta in config.json?)");
  }
  out.generated = seq.generated();
  out.finish = seq.finish_reason();
  if (req.record_prompt_logits) {
    out.prompt_logits = Tensor({T, V});
    out.prompt_logits.data = std::move(prompt_logits);
  }
  if (req.record_decode_logits) {
    const int64_t steps = static_cast<int64_t>(decode_logits.size()) / V;
    out.decode_logits = Tensor({steps, V});
    out.decode_logits.data = std::move(decode_logits);
  }
  return out;
}

}  // namespace ocular

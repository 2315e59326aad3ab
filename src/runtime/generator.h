// A generation request over a typed prompt (no text, no files: models/prompt.h), and Generate:
// one request run to its end through a Scheduler of its own (runtime/scheduler.h) — the same
// generation path the Engine's concurrent requests take, for tests and tools that hold a
// Runner.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "models/prompt.h"
#include "ocular/engine.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"

namespace ocular {

// The sequence's parameters (SequenceParams: the typed prompt — ids with image tokens,
// positions, attention spans, the images and their pixel values —, max_new_tokens, sampling,
// eos_ids, and a constraint of its own, never shared), then how the run is fed and recorded.
struct GenerationRequest : SequenceParams {
  // The images' features computed before ([prompt->feature_rows(), feature_floats()]), or null:
  // the images are encoded.
  const Tensor* features = nullptr;
  bool record_prompt_logits = false;  // logits of every prompt position (tracing)
  bool record_decode_logits = false;  // the logits row that chose each generated token
  // Records the encode's and the prefill's taps (the prefill then runs in one step). Null: none.
  Tracer* tracer = nullptr;
  // Told when the encode, prefill and decode stages begin and end, and after each generated
  // token (ProgressCallback's contract; called allocation-free). Null: no reports.
  const ProgressCallback* progress = nullptr;
};

struct GenerationOutput {
  std::vector<int32_t> generated;
  FinishReason finish = FinishReason::kNone;
  Tensor prompt_logits;  // [T, V] if requested
  Tensor decode_logits;  // [steps, V] if requested
  double image_ms = 0, prefill_ms = 0, decode_ms = 0;
};

// on_token(id) is called after each generated token; returning false cancels generation.
using TokenSink = std::function<bool(int32_t)>;

// Runs `req` alone on `runner` (a Scheduler of one, for this call). `tracer` overrides
// req.tracer when set. Errors: empty prompt, prompt + new tokens over the context length, bad
// ids, NaN logits.
StatusOr<GenerationOutput> Generate(Runner& runner, KvPool& kv, const GenerationRequest& req,
                                    Tracer* tracer, const TokenSink& on_token = nullptr);

}  // namespace ocular

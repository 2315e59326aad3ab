// Generation of one sequence over token ids and pixel values (no text, no files): encode the
// images, prefill the bidirectional image + prompt block, then decode step by step.
// Reference: modeling_paligemma.py (_update_causal_mask, forward).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "ocular/engine.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"
#include "runtime/sampler.h"

namespace ocular {

struct GenerationRequest {
  std::vector<int32_t> ids;              // the whole prompt (image tokens included)
  int64_t prefix_len = -1;               // bidirectional block; -1: the whole prompt
  const Tensor* pixel_values = nullptr;  // [n_images, 3, R, R] (or [n, pixel_floats]), or null
  const Tensor* features = nullptr;      // or image features computed before (a cache)
  int max_new_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> eos_ids;  // stop after emitting any of these; empty: never early
  // Constrained decoding (SequenceParams::constraint); one per request, never shared.
  std::shared_ptr<TokenConstraint> constraint;
  bool record_prompt_logits = false;  // logits of every prompt position (tracing)
  bool record_decode_logits = false;  // the logits row that chose each generated token
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

// Errors: empty prompt, prompt + new tokens over the context length, bad ids.
StatusOr<GenerationOutput> Generate(Runner& runner, KvPool& kv, const GenerationRequest& req,
                                    Tracer* tracer, const TokenSink& on_token = nullptr);

}  // namespace ocular

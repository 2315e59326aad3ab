// The prefix-LM generation loop over token ids and pixel values (no text, no files):
// one bidirectional prefill of the image + prompt block, then causal decode with a KV cache.
// MODELS.md §1.5; reference: modeling_paligemma.py (_update_causal_mask, forward).
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"
#include "models/paligemma.h"
#include "runtime/sampler.h"

namespace ocular {

class ThreadPool;

struct GenerationRequest {
  std::vector<int32_t> ids;            // the whole prefix block (image tokens included)
  const Tensor* pixel_values = nullptr;  // [n_images, 3, R, R], or null for text-only
  int max_new_tokens = 16;
  SamplingParams sampling;
  int32_t eos_id = -1;                 // stop after emitting this id; -1: never stop early
  bool record_prompt_logits = false;   // logits of every prefix position (tracing)
  bool record_decode_logits = false;   // the logits row that chose each generated token
};

struct GenerationOutput {
  std::vector<int32_t> generated;
  Tensor prompt_logits;  // [T, V] if requested
  Tensor decode_logits;  // [steps, V] if requested
  double image_ms = 0, prefill_ms = 0, decode_ms = 0;
};

// on_token(id) is called after each generated token; returning false stops generation.
using TokenSink = std::function<bool(int32_t)>;

StatusOr<GenerationOutput> Generate(ThreadPool& pool, const PaliGemma& model,
                                    const GenerationRequest& req, Tracer* tracer,
                                    const TokenSink& on_token = nullptr);

}  // namespace ocular

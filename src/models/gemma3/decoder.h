// The Gemma 3 text decoder layer over a batch of sequences.
// Reference: transformers 4.57 models/gemma3/modeling_gemma3.py (Gemma3DecoderLayer,
// Gemma3Attention) and masking_utils.py (create_causal_mask, create_sliding_window_causal_mask).
#pragma once

#include <cstdint>

#include "kernels/exec.h"
#include "models/gemma3/config.h"
#include "models/model.h"
#include "models/weights.h"

namespace ocular::gemma3 {

struct Gemma3LayerWeights {
  GemmaLayerWeights gemma;  // input_norm, q/k/v/o, the post-attention, pre- and post-FFW norms,
                            // gate/up/down: as Gemma 2 (shapes in models/weights.h)
  TensorView q_norm;        // [d] RMSNorm (1 + w) over each query head
  TensorView k_norm;        // [d] RMSNorm (1 + w) over each key head
};

// What one layer attends with: its window (0 = global), RoPE base and linear-scaling divisor,
// and the image token whose runs attend bidirectionally (-1: none).
struct LayerAttention {
  int window = 0;
  float rope_theta = 0;
  float rope_divisor = 1;
  int32_t image_token_id = -1;
};

// Per-query key ranges [begin, end) for rows start..start+count-1 of one sequence, as HF's
// masks allow them (masking_utils.py; modeling_gemma3.py Gemma3Model.forward):
//   causal:           keys [0, i]; a sliding layer only the last `window` of them (i - W, i]
//   image block:      a query inside a run of image tokens [bs, be) (token_type_ids == 1,
//                     one group per run) also sees the whole run: the or_mask_function
//                     token_type_ids_mask_function is OR-ed with the causal and the sliding
//                     mask alike, so a block longer than the window still sees all of itself.
// `ids` are the chunk's token ids (null: no image blocks, e.g. a decode step, where HF passes
// no or_mask either: is_prefill is false).
void KeyRanges(const SeqChunk& s, const LayerAttention& a, int32_t* begin, int32_t* end);

// One decoder layer in place on x[batch.rows, H]:
//   x = x + post_attention_layernorm(self_attn(input_layernorm(x)))
//   x = x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))
// with q_norm/k_norm before RoPE at 0-indexed positions (position_ids = cache_position).
void Gemma3Layer(const Exec& ex, const Gemma3TextConfig& c, const Gemma3LayerWeights& l,
                 const LayerAttention& a, int layer, const Batch& batch, float* x);

}  // namespace ocular::gemma3

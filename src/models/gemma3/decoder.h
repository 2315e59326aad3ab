// The Gemma 3 text decoder layer over a batch of sequences.
// Reference: transformers 4.57 models/gemma3/modeling_gemma3.py (Gemma3DecoderLayer,
// Gemma3Attention) and masking_utils.py (create_causal_mask, create_sliding_window_causal_mask).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/exec.h"
#include "models/gemma3/config.h"
#include "models/model.h"
#include "models/tracer.h"
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

// One decoder layer in place on x[batch.rows, H], the Gemma 2 layer of models/layers.h with
//   q_norm/k_norm (Gemma RMSNorm per head) before RoPE, at 0-indexed positions
//   (position_ids = cache_position, Gemma3TextModel.forward);
//   the layer's RoPE base and linear-scaling divisor;
//   the mask of masking_utils.py: causal (sliding on sliding layers), OR-ed with each run of
//   image tokens attending to all of itself (token_type_ids_mask_function; ids are null on a
//   decode step, where HF passes no or_mask either).
// Sub-taps "decoder.layers.{layer}.*" (blocks/decoder_layer.h).
void Gemma3Layer(const Exec& ex, const Gemma3TextConfig& c, const Gemma3LayerWeights& l,
                 const LayerAttention& a, int layer, const Batch& batch, float* x, Tracer* tracer);

// Arena bytes the largest of the layers `attention` describes takes for `rows` rows and
// `context` keys.
size_t Gemma3LayersBytes(const Gemma3TextConfig& c, std::span<const LayerAttention> attention,
                         int64_t rows, int64_t context, int threads);

}  // namespace ocular::gemma3

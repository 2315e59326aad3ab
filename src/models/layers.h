// The Gemma decoder layers (Gemma 1 and 2 for PaliGemma; Gemma 3 builds on the same
// declaration, gemma3/decoder.h) as declarations over the block kit (models/blocks/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/exec.h"
#include "models/blocks/decoder_layer.h"
#include "models/config.h"
#include "models/model.h"
#include "models/tracer.h"
#include "models/weights.h"

namespace ocular {

// A Gemma layer as data (modeling_gemma.py GemmaDecoderLayer, modeling_gemma2.py
// Gemma2DecoderLayer): Gemma RMSNorm (1 + w), GeGLU MLP, GQA attention with split-half RoPE
// at the layer's base, scale attention_scale(), attn_logit_softcapping, the layer's sliding
// window; Gemma 2 adds the sandwich norms. PaliGemma's prefix block attends bidirectionally
// (HF applies no sliding window there: its 4-D prefix mask replaces the sliding mask,
// modeling_paligemma.py _update_causal_mask) and positions are 1-indexed.
blocks::DecoderLayerSpec GemmaLayerSpec(const GemmaTextConfig& c, const LayerSpec& layer);
// The kit's view of a Gemma layer's weights for a layer of spec s (q_norm/k_norm: Gemma 3's,
// or null).
blocks::DecoderLayerWeights GemmaLayerView(const blocks::DecoderLayerSpec& s,
                                           const GemmaLayerWeights& l,
                                           const TensorView* q_norm = nullptr,
                                           const TensorView* k_norm = nullptr);

// One PaliGemma decoder layer (Gemma 1 or 2 by c.model_type) in place on x[batch.rows, H];
// sub-taps "decoder.layers.{layer}.*" (blocks/decoder_layer.h).
void GemmaLayer(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                const LayerSpec& spec, int layer, const Batch& batch, float* x, Tracer* tracer);

// Arena bytes the largest of `layers` takes for `rows` rows and `context` keys.
size_t GemmaLayersBytes(const GemmaTextConfig& c, std::span<const LayerSpec> layers, int64_t rows,
                        int64_t context, int threads);

}  // namespace ocular

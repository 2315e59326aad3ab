// Blocks shared by the Gemma-family decoders (gemma.cc, gemma2.cc), over a batch of sequences.
// Weights are read once per call for every row of the batch; attention runs per sequence
// against that sequence's own cache.
#pragma once

#include <cstdint>

#include "kernels/exec.h"
#include "models/config.h"
#include "models/model.h"
#include "models/weights.h"

namespace ocular {

// Per-query key ranges [begin, end) for cache positions start..start+count-1 of one sequence:
// inside the prefix block: the whole block (HF applies no sliding window there — its 4D
// prefix mask replaces the sliding mask, modeling_paligemma.py _update_causal_mask);
// after it: causal, limited to the last `window` keys when window > 0 (HF's sliding cache
// keeps window-1 past tokens, cache_utils.py DynamicSlidingWindowLayer).
void KeyRanges(const SeqChunk& s, int window, int32_t* begin, int32_t* end);

// Self-attention of one decoder layer on normed input x[rows, H] (modeling_gemma2.py
// Gemma2Attention): q/k/v projections, split-half RoPE at positions cache position + 1 (HF
// PaliGemma is 1-indexed), K/V stored in each sequence's cache, GQA attention with scale and
// optional softcap, o_proj. A sequence starting at position 0 attends to its fresh K/V (so a
// prefix longer than a sliding window still sees all of itself); later chunks read the cache.
// Writes out[rows, H].
void SelfAttention(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                   const LayerSpec& spec, int layer, const Batch& batch, const float* x,
                   float* out);

// GeGLU MLP: down(act(gate(x)) * up(x)); x[rows, H] -> out[rows, H].
void GeGluMlp(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l, const float* x,
              int64_t rows, float* out);

// One decoder layer in place on x[batch.rows, H].
void GemmaLayer(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                const LayerSpec& spec, int layer, const Batch& batch, float* x);
void Gemma2Layer(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                 const LayerSpec& spec, int layer, const Batch& batch, float* x);

// Arena bytes one decoder layer takes for `rows` rows and `context` keys.
size_t DecoderLayerBytes(const GemmaTextConfig& c, int64_t rows, int64_t context, int threads);

}  // namespace ocular

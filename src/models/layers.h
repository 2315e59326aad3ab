// Blocks shared by the Gemma-family decoders (gemma.cc, gemma2.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/config.h"
#include "models/kv_cache.h"
#include "models/weights.h"

namespace ocular {

class ThreadPool;

// How activations are rounded. A bf16 checkpoint runs in bf16 in the reference (HF loads
// it as torch.bfloat16), so ocular rounds every activation torch would store in bf16 at the
// same point (kernels/bf16_emulation.h); f32 checkpoints keep f32 activations.
struct Numerics {
  bool bf16 = false;
  // Rounds x[0, n) to bf16 when emulating bf16; no-op otherwise.
  void Round(float* x, int64_t n) const;
};

// Which tokens one forward call covers, and the attention pattern (MODELS.md §1.5).
struct Span {
  int64_t start;       // cache index of the first token of this call
  int64_t count;       // tokens in this call
  int64_t prefix_len;  // cache indices [0, prefix_len) form one bidirectional block
};

// Per-query key ranges [begin, end) for cache indices start..start+count-1:
// inside the prefix block: the whole block (HF applies no sliding window there — its 4D
// prefix mask replaces the sliding mask, modeling_paligemma.py _update_causal_mask);
// after it: causal, limited to the last `window` keys when window > 0 (HF's sliding cache
// keeps window-1 past tokens, cache_utils.py DynamicSlidingWindowLayer).
void KeyRanges(const Span& span, int window, std::vector<int32_t>* begin,
               std::vector<int32_t>* end);

// Self-attention of one decoder layer on normed input x[count, H] (modeling_gemma2.py
// Gemma2Attention): q/k/v projections, split-half RoPE at positions cache index + 1 (HF
// PaliGemma is 1-indexed), K/V appended to `cache` layer `layer`, GQA attention with scale
// and optional softcap, o_proj. Writes out[count, H].
void SelfAttention(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                   const Numerics& nx, const float* x, const Span& span, bool sliding,
                   KvCache& cache, int layer, float* out);

// GeGLU MLP: down(act(gate(x)) * up(x)); x[rows, H] -> out[rows, H].
void GeGluMlp(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
              const Numerics& nx, const float* x, int64_t rows, float* out);

// One decoder layer in place on x[count, H].
void GemmaLayer(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                const Numerics& nx, float* x, const Span& span, KvCache& cache, int layer);
void Gemma2Layer(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                 const Numerics& nx, float* x, const Span& span, KvCache& cache, int layer);

}  // namespace ocular

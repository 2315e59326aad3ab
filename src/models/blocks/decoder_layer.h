// The pre-norm decoder layer, configured by data: Gemma 1 (plain), Gemma 2 and Gemma 3
// (sandwich norms), Llama (mllama's self-attention layers):
//   plain:     x = x + attn(attn_norm(x));               x = x + mlp(ffn_norm(x))
//   sandwich:  x = x + attn_post_norm(attn(attn_norm(x)));
//              x = x + ffn_post_norm(mlp(ffn_norm(x)))
// References: modeling_gemma.py GemmaDecoderLayer, modeling_gemma2.py Gemma2DecoderLayer,
// modeling_gemma3.py Gemma3DecoderLayer, modeling_mllama.py MllamaSelfAttentionDecoderLayer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/exec.h"
#include "models/blocks/attention.h"
#include "models/blocks/mlp.h"
#include "models/blocks/norm.h"
#include "models/blocks/taps.h"
#include "models/model.h"

namespace ocular::blocks {

struct DecoderLayerSpec {
  AttentionSpec attn;
  MlpSpec mlp;
  NormKind norm = NormKind::kGemmaRms;  // of the four layer norms
  float eps = 1e-6f;
  bool sandwich = false;        // post-attention and post-feedforward norms (Gemma 2, 3)
  int64_t position_offset = 0;  // position of cache row i: i + offset (PaliGemma: 1-indexed)
};

struct DecoderLayerWeights {
  AttentionWeights attn;
  MlpWeights mlp;
  const TensorView* attn_norm = nullptr;       // input_layernorm
  const TensorView* attn_post_norm = nullptr;  // post_attention_layernorm (sandwich)
  const TensorView* ffn_norm = nullptr;        // pre_feedforward_layernorm (Gemma 1, Llama: HF's
                                               // post_attention_layernorm)
  const TensorView* ffn_post_norm = nullptr;   // post_feedforward_layernorm (sandwich)
};

// One layer in place on x[batch.rows, hidden]. Taps (below taps' prefix and index):
// attn_norm, attn.q/.k/.v/.ctx, attn_out, [attn_post_norm], ffn_norm, ffn_out,
// [ffn_post_norm].
void DecoderLayer(const Exec& ex, const DecoderLayerSpec& s, const DecoderLayerWeights& w,
                  int layer, const Batch& batch, float* x, const Taps& taps);
// Arena bytes DecoderLayer takes for `rows` rows and `context` keys.
size_t DecoderLayerBytes(const DecoderLayerSpec& s, int64_t rows, int64_t context, int threads);

}  // namespace ocular::blocks

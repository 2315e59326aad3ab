// The pre-norm decoder layer, configured by data: Gemma 1 (plain), Gemma 2 and Gemma 3
// (sandwich norms), Llama (mllama's self-attention layers):
//   plain:     x = x + attn(attn_norm(x));               x = x + mlp(ffn_norm(x))
//   sandwich:  x = x + attn_post_norm(attn(attn_norm(x)));
//              x = x + ffn_post_norm(mlp(ffn_norm(x)))
// References: modeling_gemma.py GemmaDecoderLayer, modeling_gemma2.py Gemma2DecoderLayer,
// modeling_gemma3.py Gemma3DecoderLayer, modeling_mllama.py MllamaSelfAttentionDecoderLayer.
#pragma once

#include <cmath>
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

// LlamaDecoderLayer (transformers models/llama/modeling_llama.py) from a Llama-style text
// config (hidden_size, num_attention_heads, num_key_value_heads, head_dim(),
// intermediate_size, rms_norm_eps): Llama's RMSNorm, GQA attention scaled head_dim^-0.5
// (self.scaling), SwiGLU MLP down(silu(gate(x)) * up(x)). The caller adds its RoPE and
// anything else its family changes.
template <typename TextConfig>
DecoderLayerSpec LlamaLayerSpec(const TextConfig& c) {
  DecoderLayerSpec s;
  s.norm = NormKind::kLlamaRms;
  s.eps = c.rms_norm_eps;
  AttentionSpec& a = s.attn;
  a.hidden = c.hidden_size;
  a.heads = c.num_attention_heads;
  a.kv_heads = c.num_key_value_heads;
  a.head_dim = c.head_dim();
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
  s.mlp = {c.hidden_size, c.intermediate_size, MlpAct::kSilu, /*gated=*/true};
  return s;
}

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

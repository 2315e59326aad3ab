#include "models/layers.h"

#include <algorithm>

namespace ocular {

blocks::DecoderLayerSpec GemmaLayerSpec(const GemmaTextConfig& c, const LayerSpec& layer) {
  blocks::DecoderLayerSpec s;
  s.norm = blocks::NormKind::kGemmaRms;  // x * rsqrt(mean(x^2) + eps) * (1 + w)
  s.eps = c.rms_norm_eps;
  s.sandwich = c.is_gemma2();  // Gemma 2: post_attention_ and pre/post_feedforward_layernorm
  s.position_offset = 1;       // position_ids = cache_position + 1 (modeling_paligemma.py)
  blocks::AttentionSpec& a = s.attn;
  a.hidden = c.hidden_size;
  a.heads = c.num_attention_heads;
  a.kv_heads = c.num_key_value_heads;
  a.head_dim = c.head_dim;
  a.scale = c.attention_scale();  // query_pre_attn_scalar^-0.5 (Gemma 1: head_dim^-0.5)
  a.softcap = c.attn_logit_softcapping;
  a.rope.theta = layer.rope_theta;
  a.window = layer.window;
  a.bidirectional = blocks::Bidirectional::kPrefix;
  a.prompt_reads_fresh = true;
  s.mlp = {c.hidden_size, c.intermediate_size, blocks::ToMlpAct(c.hidden_act), /*gated=*/true};
  return s;
}

blocks::DecoderLayerWeights GemmaLayerView(const blocks::DecoderLayerSpec& s,
                                           const GemmaLayerWeights& l, const TensorView* q_norm,
                                           const TensorView* k_norm) {
  blocks::DecoderLayerWeights w;
  w.attn = {&l.q_w, &l.k_w, &l.v_w, &l.o_w, nullptr, nullptr, nullptr, nullptr, q_norm, k_norm};
  w.mlp = {&l.gate_w, nullptr, &l.up_w, &l.down_w, nullptr};
  w.attn_norm = &l.input_norm;
  if (s.sandwich) {  // Gemma 2, 3
    w.attn_post_norm = &l.post_attn_norm;
    w.ffn_norm = &l.pre_ffw_norm;
    w.ffn_post_norm = &l.post_ffw_norm;
  } else {  // Gemma 1: HF's post_attention_layernorm is the pre-FFW norm
    w.ffn_norm = &l.post_attn_norm;
  }
  return w;
}

void GemmaLayer(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                const LayerSpec& spec, int layer, const Batch& batch, float* x, Tracer* tracer) {
  const blocks::DecoderLayerSpec s = GemmaLayerSpec(c, spec);
  blocks::DecoderLayer(ex, s, GemmaLayerView(s, l), layer, batch, x,
                       {tracer, "decoder.layers.", layer});
}

size_t GemmaLayersBytes(const GemmaTextConfig& c, std::span<const LayerSpec> layers, int64_t rows,
                        int64_t context, int threads) {
  size_t most = 0;
  for (const LayerSpec& l : layers) {
    most = std::max(most, blocks::DecoderLayerBytes(GemmaLayerSpec(c, l), rows, context, threads));
  }
  return most;
}

}  // namespace ocular

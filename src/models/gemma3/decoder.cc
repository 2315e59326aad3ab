#include "models/gemma3/decoder.h"

#include <algorithm>

#include "models/layers.h"

namespace ocular::gemma3 {

namespace {

// Gemma3DecoderLayer: Gemma2DecoderLayer's sandwich with Gemma3Attention.
blocks::DecoderLayerSpec LayerSpecOf(const Gemma3TextConfig& c, const LayerAttention& a) {
  blocks::DecoderLayerSpec s =
      GemmaLayerSpec(c.gemma, {LayerKind::kSelfAttention, a.window, a.rope_theta});
  s.sandwich = true;
  s.position_offset = 0;               // position_ids = cache_position
  s.attn.scale = c.attention_scale();  // query_pre_attn_scalar ** -0.5
  // No softcap: Gemma3Attention keeps attn_logit_softcapping but passes no softcap to the
  // attention function (modeling_gemma3.py Gemma3Attention.forward, transformers 4.57.1).
  s.attn.softcap = 0;
  s.attn.rope.divisor = a.rope_divisor;  // rope_scaling "linear": inv_freq / factor
  s.attn.qk_norm = {blocks::NormKind::kGemmaRms, nullptr, nullptr, c.gemma.rms_norm_eps};
  s.attn.bidirectional = blocks::Bidirectional::kImageRuns;  // token_type_ids == 1 runs
  s.attn.image_token = a.image_token_id;
  return s;
}

}  // namespace

void Gemma3Layer(const Exec& ex, const Gemma3TextConfig& c, const Gemma3LayerWeights& l,
                 const LayerAttention& a, int layer, const Batch& batch, float* x, Tracer* tracer) {
  const blocks::DecoderLayerSpec s = LayerSpecOf(c, a);
  blocks::DecoderLayer(ex, s, GemmaLayerView(s, l.gemma, &l.q_norm, &l.k_norm), layer, batch, x,
                       {tracer, "decoder.layers.", layer});
}

size_t Gemma3LayersBytes(const Gemma3TextConfig& c, std::span<const LayerAttention> attention,
                         int64_t rows, int64_t context, int threads) {
  size_t most = 0;
  for (const LayerAttention& a : attention) {
    most = std::max(most, blocks::DecoderLayerBytes(LayerSpecOf(c, a), rows, context, threads));
  }
  return most;
}

}  // namespace ocular::gemma3

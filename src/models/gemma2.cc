// Gemma 2 decoder layer (PaliGemma 2): sandwich norms, softcapped attention, sliding window
// on the layers config.layer_types marks.
// Reference: transformers/models/gemma2/modeling_gemma2.py Gemma2DecoderLayer.forward.
#include "core/arena.h"
#include "kernels/ops.h"
#include "models/layers.h"

namespace ocular {

void Gemma2Layer(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                 const LayerSpec& spec, int layer, const Batch& b, float* x) {
  const int64_t H = c.hidden_size, n = b.rows * H;
  const float eps = c.rms_norm_eps;
  ArenaScope scope(ex.arena);
  float* h = ex.arena.Floats(n);
  float* o = ex.arena.Floats(n);
  // x = x + post_attention_layernorm(self_attn(input_layernorm(x)))
  ops::RmsNorm(ex, x, b.rows, H, l.input_norm, eps, /*add_one=*/true, h);
  SelfAttention(ex, c, l, spec, layer, b, h, o);
  ops::RmsNorm(ex, o, b.rows, H, l.post_attn_norm, eps, true, h);
  ops::Add(ex, x, h, x, n);
  // x = x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))
  ops::RmsNorm(ex, x, b.rows, H, l.pre_ffw_norm, eps, true, h);
  GeGluMlp(ex, c, l, h, b.rows, o);
  ops::RmsNorm(ex, o, b.rows, H, l.post_ffw_norm, eps, true, h);
  ops::Add(ex, x, h, x, n);
}

}  // namespace ocular

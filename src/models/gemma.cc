// Gemma 1 decoder layer (PaliGemma 1).
// Reference: transformers/models/gemma/modeling_gemma.py GemmaDecoderLayer.forward.
#include "core/arena.h"
#include "kernels/ops.h"
#include "models/layers.h"

namespace ocular {

void GemmaLayer(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                const LayerSpec& spec, int layer, const Batch& b, float* x) {
  const int64_t H = c.hidden_size, n = b.rows * H;
  ArenaScope scope(ex.arena);
  float* h = ex.arena.Floats(n);
  float* o = ex.arena.Floats(n);
  // x = x + self_attn(input_layernorm(x))
  ops::RmsNorm(ex, x, b.rows, H, l.input_norm, c.rms_norm_eps, /*add_one=*/true, h);
  SelfAttention(ex, c, l, spec, layer, b, h, o);
  ops::Add(ex, x, o, x, n);
  // x = x + mlp(post_attention_layernorm(x))   (HF's name for the pre-FFW norm)
  ops::RmsNorm(ex, x, b.rows, H, l.post_attn_norm, c.rms_norm_eps, true, h);
  GeGluMlp(ex, c, l, h, b.rows, o);
  ops::Add(ex, x, o, x, n);
}

}  // namespace ocular

// Gemma 1 decoder layer (PaliGemma 1).
// Reference: transformers/models/gemma/modeling_gemma.py GemmaDecoderLayer.forward.
#include <vector>

#include "kernels/ops.h"
#include "models/layers.h"

namespace ocular {

void GemmaLayer(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                const Numerics& nx, float* x, const Span& s, KvCache& cache, int layer) {
  const int64_t H = c.hidden_size, n = s.count * H;
  std::vector<float> h(n), o(n);
  // x = x + self_attn(input_layernorm(x))
  ops::RmsNorm(x, s.count, H, l.input_norm, c.rms_norm_eps, /*add_one=*/true, h.data());
  nx.Round(h.data(), n);
  SelfAttention(pool, c, l, nx, h.data(), s, /*sliding=*/false, cache, layer, o.data());
  ops::Add(x, o.data(), x, n);
  nx.Round(x, n);
  // x = x + mlp(post_attention_layernorm(x))   (HF's name for the pre-FFW norm)
  ops::RmsNorm(x, s.count, H, l.post_attn_norm, c.rms_norm_eps, true, h.data());
  nx.Round(h.data(), n);
  GeGluMlp(pool, c, l, nx, h.data(), s.count, o.data());
  ops::Add(x, o.data(), x, n);
  nx.Round(x, n);
}

}  // namespace ocular

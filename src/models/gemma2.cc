// Gemma 2 decoder layer (PaliGemma 2): sandwich norms, softcapped attention, sliding window
// on the layers config.layer_types marks.
// Reference: transformers/models/gemma2/modeling_gemma2.py Gemma2DecoderLayer.forward.
#include <vector>

#include "kernels/ops.h"
#include "models/layers.h"

namespace ocular {

void Gemma2Layer(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                 const Numerics& nx, float* x, const Span& s, KvCache& cache, int layer) {
  const int64_t H = c.hidden_size, n = s.count * H;
  const float eps = c.rms_norm_eps;
  std::vector<float> h(n), o(n);
  // x = x + post_attention_layernorm(self_attn(input_layernorm(x)))
  ops::RmsNorm(x, s.count, H, l.input_norm, eps, /*add_one=*/true, h.data());
  nx.Round(h.data(), n);
  SelfAttention(pool, c, l, nx, h.data(), s, c.layer_is_sliding[layer], cache, layer, o.data());
  ops::RmsNorm(o.data(), s.count, H, l.post_attn_norm, eps, true, h.data());
  nx.Round(h.data(), n);
  ops::Add(x, h.data(), x, n);
  nx.Round(x, n);
  // x = x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))
  ops::RmsNorm(x, s.count, H, l.pre_ffw_norm, eps, true, h.data());
  nx.Round(h.data(), n);
  GeGluMlp(pool, c, l, nx, h.data(), s.count, o.data());
  ops::RmsNorm(o.data(), s.count, H, l.post_ffw_norm, eps, true, h.data());
  nx.Round(h.data(), n);
  ops::Add(x, h.data(), x, n);
  nx.Round(x, n);
}

}  // namespace ocular

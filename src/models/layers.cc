#include "models/layers.h"

#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/bf16_emulation.h"
#include "kernels/ops.h"

namespace ocular {

void Numerics::Round(float* x, int64_t n) const {
  if (bf16) ops::RoundToBF16(x, n);
}

void KeyRanges(const Span& s, int window, std::vector<int32_t>* begin, std::vector<int32_t>* end) {
  begin->resize(s.count);
  end->resize(s.count);
  for (int64_t t = 0; t < s.count; ++t) {
    const int64_t i = s.start + t;
    if (i < s.prefix_len) {
      (*begin)[t] = 0;
      (*end)[t] = static_cast<int32_t>(s.prefix_len);
    } else {
      (*begin)[t] = static_cast<int32_t>(window > 0 ? std::max<int64_t>(0, i - window + 1) : 0);
      (*end)[t] = static_cast<int32_t>(i + 1);
    }
  }
}

void SelfAttention(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                   const Numerics& nx, const float* x, const Span& s, bool sliding,
                   KvCache& cache, int layer, float* out) {
  const int64_t H = c.hidden_size, d = c.head_dim, hq = c.num_attention_heads;
  const int64_t hkv = c.num_key_value_heads, qdim = hq * d, kvdim = hkv * d;
  OCULAR_CHECK(s.start + s.count <= cache.capacity && cache.kv_dim == kvdim);
  // The whole prefix block must be in the cache before any of it attends (no causal chunks).
  OCULAR_CHECK(s.start >= s.prefix_len || s.start + s.count >= s.prefix_len);
  std::vector<float> q(s.count * qdim), ctx(s.count * qdim);
  float* kc = cache.k[layer].data();
  float* vc = cache.v[layer].data();
  ops::MatMul(pool, x, s.count, H, H, l.q_w, nullptr, q.data(), qdim);
  ops::MatMul(pool, x, s.count, H, H, l.k_w, nullptr, kc + s.start * kvdim, kvdim);
  ops::MatMul(pool, x, s.count, H, H, l.v_w, nullptr, vc + s.start * kvdim, kvdim);
  nx.Round(q.data(), s.count * qdim);
  nx.Round(kc + s.start * kvdim, s.count * kvdim);
  nx.Round(vc + s.start * kvdim, s.count * kvdim);
  std::vector<int64_t> pos(s.count);
  for (int64_t t = 0; t < s.count; ++t) pos[t] = s.start + t + 1;  // 1-indexed (modeling_paligemma.py)
  auto rope = nx.bf16 ? ops::RopeSplitHalfBF16 : ops::RopeSplitHalf;
  rope(q.data(), s.count, hq, d, qdim, pos.data(), c.rope_theta);
  rope(kc + s.start * kvdim, s.count, hkv, d, kvdim, pos.data(), c.rope_theta);
  std::vector<int32_t> begin, end;
  KeyRanges(s, sliding ? c.sliding_window : 0, &begin, &end);
  auto attention = nx.bf16 ? ops::AttentionBF16 : ops::Attention;
  attention(pool, q.data(), s.count, hq, qdim, kc, vc, s.start + s.count, hkv, kvdim, kvdim, d,
            c.attention_scale(), c.attn_logit_softcapping, begin.data(), end.data(), ctx.data(),
            qdim);
  ops::MatMul(pool, ctx.data(), s.count, qdim, qdim, l.o_w, nullptr, out, H);
  nx.Round(out, s.count * H);
}

void GeGluMlp(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
              const Numerics& nx, const float* x, int64_t rows, float* out) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, n = rows * I;
  std::vector<float> gate(n), up(n);
  ops::MatMul(pool, x, rows, H, H, l.gate_w, nullptr, gate.data(), I);
  ops::MatMul(pool, x, rows, H, H, l.up_w, nullptr, up.data(), I);
  nx.Round(gate.data(), n);
  nx.Round(up.data(), n);
  if (c.hidden_act == Activation::kGeluTanh) {
    ops::GeluTanh(gate.data(), n);
  } else {
    ops::GeluErf(gate.data(), n);
  }
  nx.Round(gate.data(), n);
  ops::Mul(gate.data(), up.data(), gate.data(), n);
  nx.Round(gate.data(), n);
  ops::MatMul(pool, gate.data(), rows, I, I, l.down_w, nullptr, out, H);
  nx.Round(out, rows * H);
}

}  // namespace ocular

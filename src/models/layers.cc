#include "models/layers.h"

#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace ocular {

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
                   const float* x, const Span& s, bool sliding, KvCache& cache, int layer,
                   float* out) {
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
  std::vector<int64_t> pos(s.count);
  for (int64_t t = 0; t < s.count; ++t) pos[t] = s.start + t + 1;  // 1-indexed (modeling_paligemma.py)
  ops::RopeSplitHalf(q.data(), s.count, hq, d, qdim, pos.data(), c.rope_theta);
  ops::RopeSplitHalf(kc + s.start * kvdim, s.count, hkv, d, kvdim, pos.data(), c.rope_theta);
  std::vector<int32_t> begin, end;
  KeyRanges(s, sliding ? c.sliding_window : 0, &begin, &end);
  ops::Attention(pool, q.data(), s.count, hq, qdim, kc, vc, s.start + s.count, hkv, kvdim, kvdim,
                 d, c.attention_scale(), c.attn_logit_softcapping, begin.data(), end.data(),
                 ctx.data(), qdim);
  ops::MatMul(pool, ctx.data(), s.count, qdim, qdim, l.o_w, nullptr, out, H);
}

void GeGluMlp(ThreadPool& pool, const GemmaTextConfig& c, const GemmaLayerWeights& l,
              const float* x, int64_t rows, float* out) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  std::vector<float> gate(rows * I), up(rows * I);
  ops::MatMul(pool, x, rows, H, H, l.gate_w, nullptr, gate.data(), I);
  ops::MatMul(pool, x, rows, H, H, l.up_w, nullptr, up.data(), I);
  if (c.hidden_act == Activation::kGeluTanh) {
    ops::GeluTanh(gate.data(), rows * I);
  } else {
    ops::GeluErf(gate.data(), rows * I);
  }
  ops::Mul(gate.data(), up.data(), gate.data(), rows * I);
  ops::MatMul(pool, gate.data(), rows, I, I, l.down_w, nullptr, out, H);
}

}  // namespace ocular

#include "models/layers.h"

#include <algorithm>

#include "core/arena.h"
#include "core/check.h"
#include "kernels/ops.h"

namespace ocular {

void KeyRanges(const SeqChunk& s, int window, int32_t* begin, int32_t* end) {
  for (int64_t t = 0; t < s.count; ++t) {
    const int64_t i = s.start + t;
    if (i < s.prefix_len) {
      begin[t] = 0;
      end[t] = static_cast<int32_t>(s.prefix_len);
    } else {
      begin[t] = static_cast<int32_t>(window > 0 ? std::max<int64_t>(0, i - window + 1) : 0);
      end[t] = static_cast<int32_t>(i + 1);
    }
  }
}

namespace {
size_t Floats(int64_t n) { return Arena::Rounded(static_cast<size_t>(n) * sizeof(float)); }
}  // namespace

size_t DecoderLayerBytes(const GemmaTextConfig& c, int64_t rows, int64_t context, int threads) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t qdim = int64_t{c.num_attention_heads} * c.head_dim;
  const int64_t kvdim = int64_t{c.num_key_value_heads} * c.head_dim;
  const size_t layer = 2 * Floats(rows * H);  // h, o
  const size_t attention = 2 * Floats(rows * qdim) + 2 * Floats(rows * kvdim) +
                           Arena::Rounded(rows * sizeof(int64_t)) +
                           2 * Arena::Rounded(rows * sizeof(int32_t));
  const size_t mlp = 2 * Floats(rows * I);
  // The scratch of the op running innermost (never two at once).
  const size_t op = std::max(
      {Floats(ops::AttentionArenaFloats(threads, context, c.num_key_value_heads, c.head_dim)),
       Floats(ops::RopeArenaFloats(c.head_dim)),
       Floats(ops::MatMulArenaFloats(threads, rows, std::max({H, qdim, I})))});
  return layer + std::max(attention, mlp) + op;
}

void SelfAttention(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l,
                   const LayerSpec& spec, int layer, const Batch& batch, const float* x,
                   float* out) {
  const int64_t H = c.hidden_size, d = c.head_dim, hq = c.num_attention_heads;
  const int64_t hkv = c.num_key_value_heads, qdim = hq * d, kvdim = hkv * d;
  const int64_t rows = batch.rows;
  ArenaScope scope(ex.arena);
  float* q = ex.arena.Floats(rows * qdim);
  float* k = ex.arena.Floats(rows * kvdim);
  float* v = ex.arena.Floats(rows * kvdim);
  float* ctx = ex.arena.Floats(rows * qdim);
  int64_t* pos = ex.arena.Alloc<int64_t>(rows);
  int32_t* begin = ex.arena.Alloc<int32_t>(rows);
  int32_t* end = ex.arena.Alloc<int32_t>(rows);
  ops::MatMuls(
      ex, x, rows, H, H,
      {{&l.q_w, nullptr, q, qdim}, {&l.k_w, nullptr, k, kvdim}, {&l.v_w, nullptr, v, kvdim}});
  int64_t r = 0;
  for (const SeqChunk& s : batch.seqs) {
    for (int64_t t = 0; t < s.count; ++t)
      pos[r + t] = s.start + t + 1;  // 1-indexed (modeling_paligemma.py)
    r += s.count;
  }
  OCULAR_CHECK(r == rows);
  ops::Rope(ex, q, rows, hq, d, qdim, pos, spec.rope_theta);
  ops::Rope(ex, k, rows, hkv, d, kvdim, pos, spec.rope_theta);
  r = 0;
  for (const SeqChunk& s : batch.seqs) {
    // The whole prefix block must be in one pass before any of it attends (no causal chunks).
    OCULAR_CHECK(s.start >= s.prefix_len || s.start + s.count >= s.prefix_len);
    s.cache->Store(layer, s.start, s.count, k + r * kvdim, v + r * kvdim, kvdim);
    KeyRanges(s, spec.window, begin + r, end + r);
    const ops::KvRows kv =
        s.start == 0 ? ops::KvRows{k + r * kvdim, v + r * kvdim, false, 0, s.count, kvdim, kvdim}
                     : s.cache->Rows(layer, s.start + s.count);
    ops::Attention(ex, q + r * qdim, s.count, hq, qdim, kv, hkv, d, c.attention_scale(),
                   c.attn_logit_softcapping, begin + r, end + r, ctx + r * qdim, qdim);
    r += s.count;
  }
  ops::MatMul(ex, ctx, rows, qdim, qdim, l.o_w, nullptr, out, H);
}

void GeGluMlp(const Exec& ex, const GemmaTextConfig& c, const GemmaLayerWeights& l, const float* x,
              int64_t rows, float* out) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, n = rows * I;
  ArenaScope scope(ex.arena);
  float* gate = ex.arena.Floats(n);
  float* up = ex.arena.Floats(n);
  ops::MatMuls(ex, x, rows, H, H, {{&l.gate_w, nullptr, gate, I}, {&l.up_w, nullptr, up, I}});
  if (c.hidden_act == Activation::kGeluTanh) {
    ops::GeluTanh(ex, gate, n);
  } else {
    ops::GeluErf(ex, gate, n);
  }
  ops::Mul(ex, gate, up, gate, n);
  ops::MatMul(ex, gate, rows, I, I, l.down_w, nullptr, out, H);
}

}  // namespace ocular

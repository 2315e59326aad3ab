#include "kernels/bf16_emulation.h"

#include <cmath>
#include <vector>

#include "core/half.h"
#include "kernels/ref/ref_ops.h"

namespace ocular::ops {

namespace {
inline float R(float x) { return BF16ToF32(F32ToBF16(x)); }

// f32 dot product with 8 independent partial sums (vectorizable; torch's bf16 matmul also
// accumulates in f32 in blocks, so no single order is "the" reference order).
inline float Dot(const float* a, const float* b, int64_t n) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) part[k] += a[j + k] * b[j + k];
  float tail = 0;
  for (; j < n; ++j) tail += a[j] * b[j];
  return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7])) +
         tail;
}
}  // namespace

void RoundToBF16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = R(x[i]);
}

void RopeSplitHalfBF16(float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
                       const int64_t* pos, float theta) {
  const int64_t half = head_dim / 2;
  std::vector<float> cos(half), sin(half);
  for (int64_t r = 0; r < rows; ++r) {
    ref::RopeCosSin(pos[r], head_dim, theta, cos.data(), sin.data());
    for (int64_t k = 0; k < half; ++k) {
      cos[k] = R(cos[k]);
      sin[k] = R(sin[k]);
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* xh = x + r * ld + h * head_dim;
      for (int64_t k = 0; k < half; ++k) {
        const float x1 = xh[k], x2 = xh[k + half];
        // q_embed = (q * cos) + (rotate_half(q) * sin), rotate_half(q) = cat(-x2, x1)
        xh[k] = R(R(x1 * cos[k]) + R(-x2 * sin[k]));
        xh[k + half] = R(R(x2 * cos[k]) + R(x1 * sin[k]));
      }
    }
  }
}

void AttentionBF16(ThreadPool& pool, const float* q, int64_t Tq, int64_t Hq, int64_t ldq,
                   const float* k, const float* v, int64_t /*Tk*/, int64_t Hkv, int64_t ldk,
                   int64_t ldv, int64_t d, float scale, float softcap, const int32_t* key_begin,
                   const int32_t* key_end, float* out, int64_t ldo) {
  const int64_t group = Hq / Hkv;
  pool.ParallelFor(Tq * Hq, [&](int64_t begin, int64_t end) {
    std::vector<float> p;
    std::vector<float> acc(d);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i = item / Hq, h = item % Hq, kvh = h / group;
      const float* qi = q + i * ldq + h * d;
      float* oi = out + i * ldo + h * d;
      const int64_t t0 = key_begin[i], t1 = key_end[i];
      p.assign(t1 - t0, 0.0f);
      float mx = -INFINITY;
      for (int64_t t = t0; t < t1; ++t) {
        float s = R(R(Dot(qi, k + t * ldk + kvh * d, d)) * scale);
        if (softcap > 0) s = R(R(std::tanh(R(s / softcap))) * softcap);
        p[t - t0] = s;
        mx = std::max(mx, s);
      }
      float sum = 0;
      for (float& e : p) {
        e = std::exp(e - mx);
        sum += e;
      }
      const float inv = 1.0f / sum;
      for (float& e : p) e = R(e * inv);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t t = t0; t < t1; ++t) {
        const float* vt = v + t * ldv + kvh * d;
        const float pt = p[t - t0];
        for (int64_t j = 0; j < d; ++j) acc[j] += pt * vt[j];
      }
      for (int64_t j = 0; j < d; ++j) oi[j] = t1 > t0 ? R(acc[j]) : 0.0f;
    }
  });
}

}  // namespace ocular::ops

#include "kernels/quant/activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "kernels/quant/blocks.h"

namespace ocular::quant {

namespace {
// Round half to even for |v| <= 2^22 through the 1.5·2^23 trick: two f32 additions, which
// vectorize at any ISA level (std::nearbyint does not before SSE4.1).
inline float RoundEven(float v) { return (v + 12582912.0f) - 12582912.0f; }
}  // namespace

float ActScale(WFormat f, float amax) {
  if (!(amax > 0.0f)) return 0.0f;
  // ggml's block_q8_K: d = 1 / iscale, iscale = -127 / max (max the signed value of largest |x|;
  // the sign cancels against q's, so d·q is the same as with 127 / amax).
  if (ActBlock(f) == 256) return 1.0f / (127.0f / amax);
  return F16ToF32(F32ToF16(amax / 127.0f));  // ggml's block_q8_0: d in f16
}

int64_t ActRowBytes(WFormat f, int64_t K) {
  const int64_t blocks = K / ActBlock(f);
  const int64_t bytes = K + 4 * blocks + (ActBlock(f) == 256 ? 2 * (K / 16) : 4 * (K / 32));
  return (bytes + 63) / 64 * 64;
}

void QuantizeActRow(WFormat f, const float* x, int64_t K, std::byte* dst) {
  const int64_t block = ActBlock(f);
  OCULAR_CHECK(K % block == 0, "HINT: K is a multiple of the weight format's block");
  int8_t* q = reinterpret_cast<int8_t*>(dst);
  float* d = reinterpret_cast<float*>(dst + K);
  std::byte* sums = dst + K + 4 * (K / block);
  for (int64_t b = 0; b < K / block; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = q + b * block;
    float amax = 0.0f;
    for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    d[b] = ActScale(f, amax);
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    // Clamped as floats (|x·id| may exceed 127 by an ulp; NaN becomes -127), then rounded:
    // a form compilers vectorize at baseline x86-64.
    for (int64_t i = 0; i < block; ++i) {
      const float v = std::min(std::max(xb[i] * id, -127.0f), 127.0f);
      qb[i] = static_cast<int8_t>(static_cast<int>(RoundEven(v)));
    }
  }
  if (ActBlock(f) == 256) {
    for (int64_t g = 0; g < K / 16; ++g) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += q[16 * g + i];
      const int16_t s16 = static_cast<int16_t>(s);
      std::memcpy(sums + 2 * g, &s16, 2);
    }
  } else {
    for (int64_t b = 0; b < K / 32; ++b) {
      int32_t s = 0;
      for (int i = 0; i < 32; ++i) s += q[32 * b + i];
      std::memcpy(sums + 4 * b, &s, 4);
    }
  }
}

void ForEachActChunk(WFormat f, const float* a, int64_t M, int64_t K, int64_t lda,
                     std::byte* scratch, int64_t scratch_bytes, QuantizeActRowFn quantize,
                     FunctionRef<void(const std::byte*, int64_t, int64_t, int64_t)> chunk) {
  const int64_t row_bytes = ActRowBytes(f, K);
  const int64_t per_chunk = std::min<int64_t>(64, scratch_bytes / row_bytes);
  OCULAR_CHECK(per_chunk >= 1, "HINT: scratch holds at least one quantized row");
  for (int64_t m0 = 0; m0 < M; m0 += per_chunk) {
    const int64_t count = std::min(per_chunk, M - m0);
    for (int64_t i = 0; i < count; ++i) {
      quantize(f, a + (m0 + i) * lda, K, scratch + i * row_bytes);
    }
    chunk(scratch, m0, count, row_bytes);
  }
}

}  // namespace ocular::quant

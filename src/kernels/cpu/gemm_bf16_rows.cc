// Up to 8 activation rows × bf16 weights in the packed GEMM's order (cpu/gemm_bf16.h,
// MatMulBf16Rows): batch-invariant decode under Precision::kBF16.
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized inside its masked-load and set1
// intrinsics (an intentionally undefined pass-through operand); nothing here is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/transpose16.h"

namespace ocular::cpu {

#define OCULAR_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace {

constexpr int kLanes = 16;  // weight rows per strip: one output per lane

// ap[p] = the bf16 pair (x[2p], x[2p + 1]) of one row, rounded to nearest even as PackBf16Rows
// rounds (exact for bf16 values).
OCULAR_BF16_TARGET void PairRow(const float* x, int64_t K2, uint32_t* ap) {
  for (int64_t p = 0; p < K2; p += 16) {
    const int64_t count = std::min<int64_t>(16, K2 - p);
    const __mmask16 lo = static_cast<__mmask16>(count >= 8 ? 0xFFFF : (1u << (2 * count)) - 1);
    const __mmask16 hi = static_cast<__mmask16>(count <= 8    ? 0
                                                : count >= 16 ? 0xFFFF
                                                              : (1u << (2 * (count - 8))) - 1);
    const __m512 x0 = _mm512_maskz_loadu_ps(lo, x + 2 * p);
    const __m512 x1 = _mm512_maskz_loadu_ps(hi, x + 2 * p + 16);
    _mm512_mask_storeu_epi32(ap + p, static_cast<__mmask16>((1u << count) - 1),
                             (__m512i)_mm512_cvtne2ps_pbh(x1, x0));
  }
}

// out[m][0, 16) (lanes under `mask`) = kM rows of pairs (ap, K2 words apart) × the 16 weight
// rows at w (rows ldw elements apart; rows past `rows` repeat the last one and are not stored).
// Per output and depth block: acc = 0, then acc = vdpbf16ps(acc, w pair, a pair) over the
// block's pairs in order — GemmBf16's tile chain — and out = acc, or out + acc after the first.
template <int kM>
OCULAR_BF16_TARGET void Strip(const uint32_t* ap, int64_t K2, int64_t block_pairs,
                              const uint16_t* w, int64_t ldw, int rows, const char* next,
                              int64_t next_bytes, float* out, int64_t ldo, __mmask16 mask) {
  const uint16_t* row[kLanes];
  for (int r = 0; r < kLanes; ++r) row[r] = w + std::min(r, rows - 1) * ldw;
  for (int64_t p0 = 0; p0 < K2; p0 += block_pairs) {
    const int64_t p1 = std::min(K2, p0 + block_pairs);
    __m512 acc[kM];
    for (int m = 0; m < kM; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t c = p0; c < p1; c += 16) {
      // The next strip (one contiguous range) into L2 as one linear stream.
      for (int64_t off = next_bytes * c / K2; off < next_bytes * std::min(K2, c + 16) / K2;
           off += 64) {
        _mm_prefetch(next + off, _MM_HINT_T1);
      }
      const int count = static_cast<int>(std::min<int64_t>(16, p1 - c));
      const __mmask16 words = static_cast<__mmask16>((1u << count) - 1);
      __m512i v[16];
      for (int r = 0; r < kLanes; ++r) v[r] = _mm512_maskz_loadu_epi32(words, row[r] + 2 * c);
      Transpose16(v);  // v[j] lane r: pair c + j of row r
      for (int j = 0; j < count; ++j) {
        for (int m = 0; m < kM; ++m) {
          const __m512i a = _mm512_set1_epi32(static_cast<int>(ap[m * K2 + c + j]));
          acc[m] = _mm512_dpbf16_ps(acc[m], (__m512bh)v[j], (__m512bh)a);
        }
      }
    }
    for (int m = 0; m < kM; ++m) {
      float* o = out + m * ldo;
      const __m512 sum = p0 == 0 ? acc[m] : _mm512_add_ps(_mm512_maskz_loadu_ps(mask, o), acc[m]);
      _mm512_mask_storeu_ps(o, mask, sum);
    }
  }
}

using StripFn = void (*)(const uint32_t*, int64_t, int64_t, const uint16_t*, int64_t, int,
                         const char*, int64_t, float*, int64_t, __mmask16);
template <int... kM>
constexpr StripFn kStrips[] = {Strip<kM>...};

}  // namespace

void MatMulBf16Rows(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                    int64_t n1, float* out, int64_t ldo, float* scratch) {
  OCULAR_CHECK(w.format == WFormat::kBF16 && w.cols == K && K % 2 == 0 && w.row_bytes % 4 == 0 &&
               M >= 1 && M <= 8);
  const int64_t K2 = K / 2;
  uint32_t* ap = reinterpret_cast<uint32_t*>(scratch);
  for (int64_t m = 0; m < M; ++m) PairRow(a + m * lda, K2, ap + m * K2);
  const int64_t block_pairs = Bf16BlockShape(1, K2).pairs;
  const int64_t ldw = static_cast<int64_t>(w.row_bytes / 2);
  const uint16_t* wb = reinterpret_cast<const uint16_t*>(w.data);
  for (int64_t n = n0; n < n1; n += kLanes) {
    const int rows = static_cast<int>(std::min<int64_t>(kLanes, n1 - n));
    const int64_t next_rows = std::min<int64_t>(kLanes, n1 - n - rows);
    kStrips<1, 2, 3, 4, 5, 6, 7, 8>[M - 1](ap, K2, block_pairs, wb + n * ldw, ldw, rows,
                                           reinterpret_cast<const char*>(wb + (n + rows) * ldw),
                                           next_rows * static_cast<int64_t>(w.row_bytes), out + n,
                                           ldo, static_cast<__mmask16>((1u << rows) - 1));
  }
}

}  // namespace ocular::cpu

// 512-bit variant of the quantized-weight × f32-activation matmuls (cpu/quant_matmul.h,
// body in quant_f32_inl.h): 16 floats per vector (a 32-value chunk is two), prefill tiles of
// 4 rows × 3 panel rows (12 outputs, two accumulators each: 24 + 4 operands in 32
// registers).
// GCC 12's avx512fintrin.h trips -Wuninitialized inside its extract and convert intrinsics (an
// intentionally undefined pass-through operand); nothing here is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/quant_dispatch.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/blocks.h"

// After the other includes: only this file's own functions take its target.
#include "kernels/cpu/target_avx512.h"  // IWYU pragma: keep

namespace ocular::cpu::quant_f32_avx512 {

struct Isa {
  using V = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kTileM = 4, kTileN = 3;
  // Small-value formats through tables: t[j] = the value of integer j (computed with
  // DequantizeRow's operations), looked up by vpermps / vpermt2ps.
  static constexpr bool kTables = true;
  static V Iota(int start) {
    return _mm512_cvtepi32_ps(
        _mm512_add_epi32(_mm512_set1_epi32(start),
                         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)));
  }
  static V Lookup16(__m128i index, V table) {
    return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(index), table);
  }
  // 32 entries: index | 16 where bit i of `high` is set.
  static V Lookup32(__m128i index, uint32_t high, V lo, V hi) {
    __m512i i = _mm512_cvtepu8_epi32(index);
    i = _mm512_mask_or_epi32(i, static_cast<__mmask16>(high), i, _mm512_set1_epi32(16));
    return _mm512_permutex2var_ps(lo, i, hi);
  }
  static V Set1(float x) { return _mm512_set1_ps(x); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float HSum(V v) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static void I8ToF32(__m128i x, V* out) { out[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x)); }
  static void U8ToF32(__m128i x, V* out) { out[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(x)); }
};

#include "kernels/cpu/quant_f32_inl.h"

}  // namespace ocular::cpu::quant_f32_avx512

#include "kernels/cpu/target_pop.h"  // IWYU pragma: keep

namespace ocular::cpu {

bool QuantF32Avx512Supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
}

}  // namespace ocular::cpu

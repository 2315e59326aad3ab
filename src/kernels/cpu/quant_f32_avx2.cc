// 256-bit variant of the quantized-weight × f32-activation matmuls (cpu/quant_matmul.h,
// body in quant_f32_inl.h): 8 floats per vector, prefill tiles of 3 rows × 2 panel rows
// (6 outputs, two accumulators each: 12 + 3 operands in 16 registers).
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
#include "kernels/cpu/target_avx2.h"  // IWYU pragma: keep

namespace ocular::cpu::quant_f32_avx2 {

struct Isa {
  using V = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kTileM = 3, kTileN = 2;
  static constexpr bool kTables = false;  // (8-entry vpermps only; the stubs are never called)
  static V Iota(int) { return V{}; }
  static V Lookup16(__m128i, V table) { return table; }
  static V Lookup32(__m128i, uint32_t, V lo, V) { return lo; }
  static V Set1(float x) { return _mm256_set1_ps(x); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float HSum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static void I8ToF32(__m128i x, V* out) {
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(x, 8)));
  }
  static void U8ToF32(__m128i x, V* out) {
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(x, 8)));
  }
};

#include "kernels/cpu/quant_f32_inl.h"

}  // namespace ocular::cpu::quant_f32_avx2

#include "kernels/cpu/target_pop.h"  // IWYU pragma: keep

// AVX2 variant of the quantized matmuls (cpu/quant_matmul.h): vpmaddubsw multiplies unsigned
// weight bytes by signed activation bytes into int16 pairs (no saturation: |pair| <= 2·63·127,
// or 2·128·127 for Q8_0 through the sign trick), vpmaddwd widens to int32.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/quant_dispatch.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/activations.h"
#include "kernels/quant/blocks.h"

// After the other includes: only this file's own functions take its target.
#include "kernels/cpu/target_avx2.h"  // IWYU pragma: keep

namespace ocular::cpu::quant_avx2 {

struct Isa {
  static constexpr bool kWideTiles = false;
  static constexpr int kQ8Offset = 0;
  static __m256i DotU8(__m256i acc, __m256i w, __m256i a) {
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)));
  }
  static __m256i PrepQ8(__m256i w) { return w; }
  // Σ w·a = Σ |w|·(a with w's sign): unsigned × signed for vpmaddubsw.
  static __m256i DotQ8(__m256i acc, __m256i w, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  static __m256i DotScaled(__m256i acc, __m256i w, __m256i a, __m256i sc16) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), sc16));
  }
};

#include "kernels/cpu/quant_matmul_inl.h"

}  // namespace ocular::cpu::quant_avx2

#include "kernels/cpu/target_pop.h"  // IWYU pragma: keep

namespace ocular::cpu {

void MatMulQuantAvx2(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                     int64_t n1, float* out, int64_t ldo, float* scratch) {
  quant_avx2::MatMulQuant(a, M, K, lda, w, n0, n1, out, ldo, scratch);
}

void QuantizeActRowAvx2(WFormat f, const float* x, int64_t K, std::byte* dst) {
  quant_avx2::detail::QuantizeActRowSimd(f, x, K, dst);
}

}  // namespace ocular::cpu

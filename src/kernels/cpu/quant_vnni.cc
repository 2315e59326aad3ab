// AVX512-VNNI variant of the quantized matmuls (cpu/quant_matmul.h): vpdpbusd accumulates
// four unsigned×signed byte products per int32 lane without intermediate saturation (Q8_0's
// signed weights are offset by 128, the offset's Σa folded into the accumulator's start);
// vpdpwssd applies the K formats' int16 sub-block scales. 256-bit vectors (AVX512VL).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/activations.h"
#include "kernels/quant/blocks.h"

// Every function below is compiled for these features (GCC: target pragma; clang, which
// ignores it, e.g. in the fuzz build: an attribute applied to each function).
#if defined(__clang__)
#pragma clang attribute push(                                                      \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
#endif

namespace ocular::cpu::quant_vnni {

struct Isa {
  static constexpr bool kWideTiles = true;
  static constexpr int kQ8Offset = 128;
  static __m256i DotU8(__m256i acc, __m256i w, __m256i a) { return _mm256_dpbusd_epi32(acc, w, a); }
  static __m256i PrepQ8(__m256i w) { return _mm256_xor_si256(w, _mm256_set1_epi8(-128)); }
  static __m256i DotQ8(__m256i acc, __m256i w, __m256i a) { return _mm256_dpbusd_epi32(acc, w, a); }
  static __m256i DotScaled(__m256i acc, __m256i w, __m256i a, __m256i sc16) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(w, a), sc16);
  }
};

#include "kernels/cpu/quant_matmul_inl.h"

void QuantizeActRowVnni(WFormat f, const float* x, int64_t K, std::byte* dst) {
  quant_vnni::detail::QuantizeActRowSimd(f, x, K, dst);
}

}  // namespace ocular::cpu::quant_vnni

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace ocular::cpu {

bool QuantVnniSupported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni") &&
         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void MatMulQuantVnni(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                     int64_t n1, float* out, int64_t ldo, float* scratch) {
  quant_vnni::MatMulQuant(a, M, K, lda, w, n0, n1, out, ldo, scratch);
}

void QuantizeActRowVnni(WFormat f, const float* x, int64_t K, std::byte* dst) {
  quant_vnni::detail::QuantizeActRowSimd(f, x, K, dst);
}

}  // namespace ocular::cpu

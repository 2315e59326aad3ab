// bf16 × bf16 dot products with f32 accumulation (AVX512_BF16 `vdpbf16ps`): the decode
// matmul of Precision::kBF16Fast on CPUs that have it (AMD Zen 4, Intel Cooper Lake and
// later). Activations are rounded to bf16 once per call; every product of two bf16 values is
// exact in f32, and the sums accumulate in f32 — 32 multiply-adds per instruction, twice the
// f32 FMA rate.
#pragma once

#include <cstdint>

#include "core/matrix.h"

namespace ocular::cpu {

// Whether this CPU and OS run AVX512_BF16 (CPUID; the AVX-512 state is checked with the avx512
// table this kernel joins).
bool Bf16DotSupported();

// The MatMulFn contract (kernels/kernel_table.h) for bf16 weights and M <= 8 rows; the
// activations are rounded to bf16 (round to nearest even) in `scratch`.
// REQUIRES: Bf16DotSupported(), w.format == kBF16, 1 <= M <= 8.
void MatMulBF16Dot(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                   int64_t n1, float* out, int64_t ldo, float* scratch);

}  // namespace ocular::cpu

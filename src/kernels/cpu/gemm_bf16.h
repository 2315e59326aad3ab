// bf16 × bf16 GEMM with f32 accumulation (AVX512_BF16 `vdpbf16ps`) for matmuls with more than
// 8 activation rows (prefill, the vision tower) on bf16 weights.
//
// The activations are packed once per call into 16-row groups, one 512-bit vector per pair
// of columns: lane i of vector (g, p) holds a[16g + i][2p] (low half) and a[16g + i][2p + 1]
// (high half) as bf16; rows past M are zero. The micro-kernel keeps a tile of 4 groups (64
// rows) × 6 weight rows in 24 registers and, per column pair, loads 4 activation vectors,
// broadcasts one 32-bit pair of each weight row (read in place from the HF [N, K] layout: the
// weights are never copied or repacked) and issues 24 dot-product instructions, prefetching
// the next 6 weight rows a cache line per 16 pairs (it overlaps their memory reads with this
// tile's arithmetic: +3-8 % at prefill shapes). Cache
// blocking: a block of packed activations (up to 640 KiB: depth blocks of at most 1280 columns,
// fixed by K, and all rows when they fit) stays in L2 while the weight rows
// stream through L1.
//
// Every product of two bf16 values is exact in f32; sums accumulate in f32 (denormal inputs
// and outputs of the instruction are flushed to zero). Under Precision::kBF16 the activations
// are already bf16 values, so the only difference from the f32-FMA kernel is the summation
// order.
#pragma once

#include <cstdint>

#include "core/matrix.h"

namespace ocular::cpu {

// The cache blocking of a product of `groups` packed 16-row groups by K2 column pairs: pairs per
// depth block (equal depths of at most 640 pairs, from K2 alone: the order in which an output
// sums them never depends on M) and groups per L2 block.
struct Bf16Blocking {
  int64_t groups, pairs;
};
Bf16Blocking Bf16BlockShape(int64_t groups, int64_t K2);

// uint32 words of the packed activations of an [M, K] matrix (K even).
int64_t PackedBf16Words(int64_t M, int64_t K);

// Packs the 16-row groups [g0, g1) of a[M, K] (row stride lda) into `packed` (laid out for all
// ceil(M / 16) groups). exact_only: the activations must already be bf16 values — returns false
// as soon as one is not (the caller then uses the f32 kernel); otherwise they are rounded to
// nearest even and the result is true. REQUIRES: Bf16DotSupported(), K even.
bool PackBf16Rows(const float* a, int64_t M, int64_t K, int64_t lda, int64_t g0, int64_t g1,
                  bool exact_only, uint32_t* packed);

// The same packing from bf16 rows (all ceil(M / 16) groups; no rounding). REQUIRES: K even.
void PackBf16Rows(const uint16_t* a, int64_t M, int64_t K, int64_t lda, uint32_t* packed);

// Packs the columns of x[T, cols] (row stride ldx; bf16 values, as f32 or as bf16) as the rows
// of the product's left operand: `cols` rows in ceil(cols / 16) groups of `pairs` pairs (pairs
// >= ceil(T / 2); rows of x past T read as zero), i.e. lane i of vector (g, p) holds
// (x[2p][16g + i], x[2p + 1][16g + i]). Attention's V, whose columns are the rows of Vᵀ.
void PackBf16Columns(const float* x, int64_t T, int64_t cols, int64_t ldx, int64_t pairs,
                     uint32_t* packed);
void PackBf16Columns(const uint16_t* x, int64_t T, int64_t cols, int64_t ldx, int64_t pairs,
                     uint32_t* packed);

// out[m, n] = sum_k a[m, k] * w[n, k] for m < M, n in [n0, n1), from the packed activations.
// w's rows may be strided (row_bytes, a multiple of 4: K/V rows of attention).
// REQUIRES: Bf16DotSupported(), w.format == kBF16 with w.cols == K (even).
void GemmBf16(const uint32_t* packed, int64_t M, int64_t K, const Matrix& w, int64_t n0, int64_t n1,
              float* out, int64_t ldo);

// 1-8 activation rows in GemmBf16's order (the MatMulFn contract, kernels/kernel_table.h): per
// output and depth block (Bf16BlockShape's, fixed by K) the same vdpbf16ps chain over the column
// pairs, the blocks' sums added in order — so a row's result equals GemmBf16's bit for bit at
// any M (decode rows batch-invariant with prefill rows). The weights are read in place, 16 rows ×
// 16 pairs at a time turned by Transpose16 (one output per lane); the activations are rounded to
// bf16 pairs in `scratch` (K / 2 words per row; exact for bf16 values, which Precision::kBF16's
// caller checks). REQUIRES: Bf16DotSupported(), w.format == kBF16 with w.cols == K (even),
// 1 <= M <= 8.
void MatMulBf16Rows(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                    int64_t n1, float* out, int64_t ldo, float* scratch);

// The transposed product with vector stores: out[n * ldo + m] = sum_k a[m, k] * w[n, k] for
// m < M, n in [n0, n1). packed: the M rows' groups `group_stride` words apart, at the first of
// their K / 2 pairs; w: bf16 rows ldw elements apart (ldw even). Attention's scores (keys ×
// queries, stored per query) and outputs (Vᵀ × probabilities, stored per query).
void GemmBf16T(const uint32_t* packed, int64_t group_stride, int64_t M, int64_t K,
               const uint16_t* w, int64_t ldw, int64_t n0, int64_t n1, float* out, int64_t ldo);

}  // namespace ocular::cpu

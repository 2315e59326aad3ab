// f32 activation rows quantized to int8 blocks for the integer dot products of the quantized
// matmuls (llama.cpp's approach: its block_q8_0 / block_q8_K, in our own layout).
//
// One row of K values (K a multiple of the weight format's block) is split into blocks of
// ActBlock(f) values: 32 for Q8_0/Q4_0/Q5_0 weights, 256 for the K formats. Per block:
//   q[i] = round_half_even(x[i] · (127 / amax))  in [-127, 127],  d = ActScale(f, amax)
// (d = 0 and q = 0 for an all-zero block), so |x[i] − d·q[i]| <= d/2 (plus the rounding of d):
// the activation error the quantized matmuls add on top of the weights' own.
// q and d are ggml's (llama.cpp's CPU backend) bit for bit: its block_q8_0 (quantize_row_q8_0,
// ggml-cpu/arch/x86/quants.c) stores d = amax / 127 as f16, its block_q8_K
// (quantize_row_q8_K_ref, ggml-quants.c, and the repacked kernels' quantize_mat_q8_K) stores
// d = 1 / iscale with iscale = ±127 / amax in f32; so ocular and llama.cpp multiply the same
// integers by the same scales and differ only in the order of the f32 sums.
// Row layout in a scratch buffer (ActRowBytes(f, K) bytes, a multiple of 64; pass a 64-byte
// aligned base): q int8[K] | d f32[K / block] | sums: int32 Σq per 32-block (Q8_0/Q4_0) or
// int16 Σq per 16 values (K formats: Q4_K's mins and Q6_K's offset of 32 need them).
// Every ISA uses this one scalar definition (it costs O(M·K) against the matmul's O(M·N·K)),
// so all kernels multiply exactly the same integers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/function_ref.h"
#include "core/matrix.h"

namespace ocular::quant {

struct ActRow {
  const int8_t* q;       // [K]
  const float* d;        // [K / block]
  const int32_t* sum32;  // [K / 32]: Σq per 32-block (Q8_0 / Q4_0 weights), else null
  const int16_t* sum16;  // [K / 16]: Σq per 16 values (K formats), else null
};

// Values per activation block for weights of format f: 32 (q8_0, q4_0, q5_0) or 256 (q4_k, q6_k).
inline int64_t ActBlock(WFormat f) { return f == WFormat::kQ4_K || f == WFormat::kQ6_K ? 256 : 32; }
// The scale d of an activation block whose largest |x| is amax >= 0: the f32 value of the f16
// nearest amax / 127 for 32-value blocks (ggml's block_q8_0), 1 / (127 / amax) for 256-value
// blocks (ggml's block_q8_K); 0 for amax == 0.
float ActScale(WFormat f, float amax);
// Bytes of one quantized activation row (a multiple of 64).
int64_t ActRowBytes(WFormat f, int64_t K);
// Quantizes x[0, K) into dst (ActRowBytes(f, K) bytes). REQUIRES: K % ActBlock(f) == 0.
void QuantizeActRow(WFormat f, const float* x, int64_t K, std::byte* dst);
// The row written at `p` by QuantizeActRow (inline: the kernels take it per register tile).
inline ActRow ActRowAt(WFormat f, const std::byte* p, int64_t K) {
  const bool k_format = ActBlock(f) == 256;
  const std::byte* sums = p + K + 4 * (K / ActBlock(f));
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const float*>(p + K),
          k_format ? nullptr : reinterpret_cast<const int32_t*>(sums),
          k_format ? reinterpret_cast<const int16_t*>(sums) : nullptr};
}

// The quantized matmuls' outer loop: quantizes rows of a[M, K] (row stride lda) with
// `quantize` (QuantizeActRow or a vectorized twin that writes the same bytes) in chunks of at
// most 64 that fit in `scratch_bytes` of `scratch`, and calls
// chunk(rows, m0, count, row_bytes) for each: quantized row m0 + i is at rows + i·row_bytes.
// REQUIRES: scratch_bytes >= ActRowBytes(f, K) (MatMulScratchFloats(K) floats are enough
// for 64 rows).
using QuantizeActRowFn = void (*)(WFormat f, const float* x, int64_t K, std::byte* dst);
void ForEachActChunk(WFormat f, const float* a, int64_t M, int64_t K, int64_t lda,
                     std::byte* scratch, int64_t scratch_bytes, QuantizeActRowFn quantize,
                     FunctionRef<void(const std::byte*, int64_t, int64_t, int64_t)> chunk);

}  // namespace ocular::quant

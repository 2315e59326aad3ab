// Quantized-weight matmuls (q8_0, q4_0, q5_0, q4_k, q6_k): the activations are quantized to int8
// blocks once per call (quant/activations.h) and every weight block is an integer dot
// product, llama.cpp's approach. Two kernels, joined to the Highway tables by ops.cc:
//   AVX2          vpmaddubsw / vpmaddwd, one output per register (quant_avx2.cc with the body
//                 quant_matmul_inl.h; the avx2 table, and avx512 without VNNI)
//   AVX512-VNNI   vpdpbusd on 16-row panels, one output per 32-bit lane (quant_gemm_vnni.cc;
//                 the avx512 table)
// Both compute exactly the integers of the scalar reference (ref/ref_quant.cc) and differ from
// it only in f32 accumulation order; each gives a row the same result whatever M.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/matrix.h"

namespace ocular::cpu {

// The MatMulFn contract (kernels/kernel_table.h) for quantized weights; scratch:
// MatMulScratchFloats(K) floats (up to 64 quantized activation rows at a time).
// REQUIRES: w.format is q8_0, q4_0, q5_0, q4_k or q6_k; the CPU runs AVX2, FMA and F16C.
void MatMulQuantAvx2(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                     int64_t n1, float* out, int64_t ldo, float* scratch);

// Whether this CPU runs AVX512-VNNI with AVX512VL/BW (CPUID; the OS's AVX-512 state is
// checked with the avx512 table these kernels join).
bool QuantVnniSupported();
// As MatMulQuantAvx2, on panels of 16 weight rows × 512 values unpacked to bytes in the scratch
// (the rest of it holds the quantized activation rows). Per output and weight block, the block's
// integer sum is converted to f32 and accumulated in one FMA chain in block order: the same ops
// for every M (decode or prefill), tile and thread split. REQUIRES: QuantVnniSupported().
void MatMulQuantVnni(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                     int64_t n1, float* out, int64_t ldo, float* scratch);
// The same on M activation rows already quantized (QuantizeActRowAvx2, row_bytes apart): the
// kernel_table.h MatMulQuantRowsFn contract. Prefill quantizes its rows once per call for all
// threads this way; each 16-row weight strip's panels then pass over every row, the running sums
// in `out` staying in cache. Bit-identical to MatMulQuantVnni. REQUIRES: QuantVnniSupported().
void MatMulQuantRowsVnni(const std::byte* act, int64_t row_bytes, int64_t M, int64_t K,
                         const Matrix& w, int64_t n0, int64_t n1, float* out, int64_t ldo,
                         float* scratch);

// Q8_0 weights in the layout the VNNI kernels read without packing panels per call: strips of
// 16 rows (the last one zero-padded), block by block the panel's 8 vectors of q + 128 and then
// the 16 rows' f16 d (as many bytes as the GGUF rows of whole strips). A Matrix whose `packed`
// holds it (Matrix::packed_bytes) runs MatMulQuantVnni / MatMulQuantRowsVnni on it, with the
// same results bit for bit and each strip one stream of bytes. Bytes: 0 unless w is q8_0.
size_t PackedQ8_0VnniBytes(const Matrix& w);
// REQUIRES: w is q8_0; out holds PackedQ8_0VnniBytes(w) bytes. The CPU runs AVX-512 (F, BW).
void PackQ8_0Vnni(const Matrix& w, std::byte* out);

// The vectorized activation quantizer of both kernels: byte-identical to quant::QuantizeActRow.
// REQUIRES: AVX2/FMA/F16C.
void QuantizeActRowAvx2(WFormat f, const float* x, int64_t K, std::byte* dst);

// Quantized weights × f32 activations (QuantActivations::kF32; quant_f32_inl.h): every weight
// block is dequantized in registers to exactly quant::DequantizeRow's values and multiplied
// with the f32 activations by f32 FMAs. Decode (M <= 8) streams the quantized rows; more rows
// dequantize strips of 24 weight rows into an f32 panel (the scratch) and run register tiles
// over it. Each output sums in the same order on both paths, so a row's result depends neither
// on M nor on the thread split. 256-bit (AVX2, FMA, F16C) and 512-bit (AVX-512 F/BW/VL) vectors.
// quant_f32_avx2 (256-bit) and quant_f32_avx512 (512-bit) each define, from quant_f32_inl.h:
//   MatMulQuantF32     the MatMulFn above;
//   DequantizeRowSimd  the in-register dequantization written out (for tests): equal to
//                      quant::DequantizeRow bit for bit. REQUIRES: a quantized format, cols a
//                      multiple of its block.
namespace quant_f32_avx2 {
void MatMulQuantF32(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                    int64_t n1, float* out, int64_t ldo, float* scratch);
void DequantizeRowSimd(WFormat f, const std::byte* row, int64_t cols, float* out);
}  // namespace quant_f32_avx2
namespace quant_f32_avx512 {
void MatMulQuantF32(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                    int64_t n1, float* out, int64_t ldo, float* scratch);
void DequantizeRowSimd(WFormat f, const std::byte* row, int64_t cols, float* out);
}  // namespace quant_f32_avx512
inline constexpr auto* MatMulQuantF32Avx2 = quant_f32_avx2::MatMulQuantF32;
inline constexpr auto* MatMulQuantF32Avx512 = quant_f32_avx512::MatMulQuantF32;
inline constexpr auto* DequantizeRowAvx2 = quant_f32_avx2::DequantizeRowSimd;
inline constexpr auto* DequantizeRowAvx512 = quant_f32_avx512::DequantizeRowSimd;
// Whether this CPU runs AVX512F/BW/VL (CPUID; the avx512 table it joins checks the OS state).
bool QuantF32Avx512Supported();

}  // namespace ocular::cpu

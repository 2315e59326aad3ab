// Scalar reference kernels: the readable definition of every op and the oracle that the SIMD
// kernels are tested against. Always built; also the "scalar" ISA.
//
// Reductions accumulate in double, so the reference is closer to the exact result than any
// f32 accumulation order (torch's included); elementwise arithmetic follows torch's f32
// operation order (cited per function in ref_ops.cc).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/kernel_table.h"

namespace ocular::ref {

// Element i of a F32/BF16/F16 array as f32.
float ElementAsF32(const void* data, DType dtype, int64_t i);

void MatMulBlock(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                 int64_t n1, float* out, int64_t ldo, float* scratch = nullptr);
void RowToF32(const Matrix& w, int64_t r, float* out);
// Quantized weights (q8_0, q4_0, q4_k, q6_k; ref_quant.cc): int8-quantized activations
// (quant/activations.h) times the weight blocks in exact integers, block sums in double.
// scratch: MatMulScratchFloats(K) floats, 64-byte aligned (the activations' int8 blocks).
void MatMulQuant(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                 int64_t n1, float* out, int64_t ldo, float* scratch);
// Quantized weights with f32 activations (QuantActivations::kF32): each row dequantized
// exactly (quant::DequantizeRow), the products summed in double.
// scratch: MatMulScratchFloats(K) floats (one dequantized row).
void MatMulQuantF32(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                    int64_t n1, float* out, int64_t ldo, float* scratch);
// The row dequantized exactly (quant::DequantizeRow), for every format.
void RowToF32Quant(const Matrix& w, int64_t r, float* out);
void RoundBF16(float* x, int64_t n);
void RopeRowBF16(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin);
void RmsNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, float eps,
             bool add_one, float* y);
void LayerNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, const TensorView& b,
               float eps, float* y);
void GeluTanh(float* x, int64_t n);
void GeluErf(float* x, int64_t n);
void Mul(const float* a, const float* b, float* out, int64_t n);
void Add(const float* a, const float* b, float* out, int64_t n);
void Scale(float* x, int64_t n, float s);
void SoftCap(float* x, int64_t n, float cap);
void RopeRow(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin);
void AttentionItems(const kernels::AttentionArgs& args, int64_t begin, int64_t end, float* scratch);
void ToF32(const void* data, DType dtype, int64_t n, float* out);

// cos/sin[head_dim / 2] of the RoPE angles at `pos`, computed in f32 exactly as HF
// (shared by every ISA: it is O(head_dim) per row).
// inv_freq_divisor: linear RoPE scaling (inv_freq / factor); 1 leaves inv_freq unchanged.
void RopeCosSin(int64_t pos, int64_t head_dim, float theta, float* cos, float* sin,
                float inv_freq_divisor = 1.0f);

// The "scalar" dispatch table.
const kernels::KernelTable& Table();

}  // namespace ocular::ref

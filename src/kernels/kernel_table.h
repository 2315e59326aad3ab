// The per-ISA function table behind ops.h (internal to kernels/).
//
// ops.cc validates arguments, splits work over the thread pool, applies the precision's
// epilogue (bf16 rounding) and calls one entry of the backend's table per op or per row
// block. ref/ fills the "scalar" table; cpu/ fills one table per Highway target.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/matrix.h"
#include "core/tensor.h"

namespace ocular::kernels {

// Arguments of ops::Attention, passed to the per-ISA kernel as one struct.
struct AttentionArgs {
  const float* q;
  int64_t Tq, Hq, ldq;
  // K/V rows: f32, or bf16 when kv_bf16. Logical key t lives in row t % kv_ring when
  // kv_ring > 0 (a sliding-window ring buffer), else in row t. Row strides in elements.
  const void* k;
  const void* v;
  bool kv_bf16;
  int64_t kv_ring;
  int64_t Tk, Hkv, ldk, ldv, d;
  float scale, softcap;
  const int32_t* key_begin;
  const int32_t* key_end;
  float* out;
  int64_t ldo;
  // torch's bf16 eager order: scores, scaled scores, each softcap step, probabilities and
  // outputs rounded to bf16 (ref/ documents each point).
  bool round_bf16;
};

// Attention work item: one head × a block of up to kAttentionQueryBlock consecutive queries
// (item = head * ceil(Tq / kAttentionQueryBlock) + block), so a kernel can share each K/V
// row it loads among the block's queries. With grouped-query attention and fewer queries
// than query heads per KV head (decode: one query), an item is instead one query × the
// heads of one KV head (item = kv_head * Tq + query), whose K/V rows it loads once for all of
// them (one head at a time read a long context's K/V once per head, from memory). Either way
// each output is the same sums in the same order.
inline constexpr int64_t kAttentionQueryBlock = 32;
struct AttentionItem {
  int64_t i_begin, i_end, h_begin, h_end;  // queries [i_begin, i_end) × heads [h_begin, h_end)
};
inline bool AttentionGroupsHeads(int64_t Tq, int64_t Hq, int64_t Hkv) {
  const int64_t group = Hq / Hkv;
  return group > 1 && Tq < group && group <= kAttentionQueryBlock;
}
inline int64_t AttentionItemCount(int64_t Tq, int64_t Hq, int64_t Hkv) {
  if (AttentionGroupsHeads(Tq, Hq, Hkv)) return Tq * Hkv;
  return Hq * ((Tq + kAttentionQueryBlock - 1) / kAttentionQueryBlock);
}
inline AttentionItem AttentionItemAt(int64_t Tq, int64_t Hq, int64_t Hkv, int64_t item) {
  if (AttentionGroupsHeads(Tq, Hq, Hkv)) {
    const int64_t group = Hq / Hkv, i = item % Tq, h = item / Tq * group;
    return {i, i + 1, h, h + group};
  }
  const int64_t blocks = (Tq + kAttentionQueryBlock - 1) / kAttentionQueryBlock;
  const int64_t i = item % blocks * kAttentionQueryBlock, h = item / blocks;
  return {i, i + kAttentionQueryBlock < Tq ? i + kAttentionQueryBlock : Tq, h, h + 1};
}
// Floats of scratch one attention_items call needs.
inline int64_t AttentionScratchFloats(int64_t Tk, int64_t d) {
  return kAttentionQueryBlock * (Tk > 0 ? Tk : 1) + kAttentionQueryBlock * d;
}

// The bf16 dot-product attention (Precision::kBF16 on AVX512_BF16, many queries): besides
// AttentionArgs, K and V packed once per call for the products of cpu/gemm_bf16.h and shared
// by the call's work items (one head × up to kAttentionDotQueries consecutive queries):
// keys: each KV head's K rows [Tk, d], packed rows (ceil(Tk / 16) groups, zero past Tk);
// values: each KV head's V columns packed (PackBf16Columns, `value_pairs` = padded keys / 2).
// The products' kernel (cpu/gemm_bf16.h GemmBf16T, or GemmBf16TAmx under amx).
using GemmBf16TFn = void (*)(const uint32_t* packed, int64_t group_stride, int64_t M, int64_t K,
                             const uint16_t* w, int64_t ldw, int64_t n0, int64_t n1, float* out,
                             int64_t ldo);
struct AttentionDotArgs {
  const uint32_t* keys;
  int64_t keys_head_stride;  // words
  const uint32_t* values;
  int64_t values_head_stride;  // words
  int64_t value_pairs;
  GemmBf16TFn gemm;  // the table's gemm_bf16_t
};
inline constexpr int64_t kAttentionDotQueries = 64;
inline int64_t AttentionDotItemCount(int64_t Tq, int64_t Hq) {
  return Hq * ((Tq + kAttentionDotQueries - 1) / kAttentionDotQueries);
}
// Keys rounded up to whole 16-row groups: the width of a block's scores.
inline int64_t AttentionDotKeys(int64_t Tk) { return (Tk + 15) / 16 * 16; }
// Floats of scratch one attention_dot_items call needs: a block's scores [64][keys], its
// probabilities and queries as bf16 rows.
inline int64_t AttentionDotScratchFloats(int64_t Tk, int64_t d) {
  const int64_t keys = AttentionDotKeys(Tk);
  return kAttentionDotQueries * keys + kAttentionDotQueries * keys / 2 +
         kAttentionDotQueries * (d + 1) / 2 + 64;
}

// out[m, n] = dot(a[m, 0:K], row n of w) for m in [0, M), n in [n0, n1). No bias.
// scratch: MatMulScratchFloats(K) floats owned by the calling thread (permuted activations,
// converted weight panels), so kernels never allocate.
using MatMulFn = void (*)(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w,
                          int64_t n0, int64_t n1, float* out, int64_t ldo, float* scratch);
inline int64_t MatMulScratchFloats(int64_t K) { return 24 * (K > 0 ? K : 1); }
// The same product on activation rows quantized once per call (quant/activations.h: M rows of
// ActRowBytes(w.format, K) = row_bytes bytes at `act`), quantized weights only.
using MatMulQuantRowsFn = void (*)(const std::byte* act, int64_t row_bytes, int64_t M, int64_t K,
                                   const Matrix& w, int64_t n0, int64_t n1, float* out, int64_t ldo,
                                   float* scratch);
// out[0, cols) = f32(row `r` of w) (embedding lookup, dequantization).
using RowToF32Fn = void (*)(const Matrix& w, int64_t r, float* out);

struct KernelTable {
  const char* name;
  // One entry per weight format (index: WFormat); null where this table has no kernel.
  MatMulFn matmul[kNumWFormats];
  RowToF32Fn row_to_f32[kNumWFormats];
  // Quantized weights with f32 activations (QuantActivations::kF32): each weight block
  // dequantized in registers to exactly quant::DequantizeRow's values and multiplied with the
  // f32 activations by f32 FMAs; matmul[] (the default) multiplies int8-quantized activations.
  // Null for the float formats.
  MatMulFn matmul_f32_act[kNumWFormats];
  // Precision::kBF16Fast batched decode (2 <= M <= 8) on bf16 weights: bf16 × bf16 dot
  // products with f32 accumulation. Null where the CPU has no bf16 dot-product instruction.
  MatMulFn matmul_bf16_dot;
  void (*rms_norm)(const float* x, int64_t rows, int64_t dim, const TensorView& w, float eps,
                   bool add_one, float* y);
  void (*layer_norm)(const float* x, int64_t rows, int64_t dim, const TensorView& w,
                     const TensorView& b, float eps, float* y);
  void (*gelu_tanh)(float* x, int64_t n);
  void (*gelu_erf)(float* x, int64_t n);
  void (*mul)(const float* a, const float* b, float* out, int64_t n);
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  void (*scale)(float* x, int64_t n, float s);
  void (*soft_cap)(float* x, int64_t n, float cap);
  // In place: x = bf16(x), round to nearest even (the bf16 precision's epilogue).
  void (*round_bf16)(float* x, int64_t n);
  // Rotates x[n_heads, head_dim] of one row with precomputed cos/sin[head_dim / 2]: in f32,
  // or (rope_row_bf16) as torch on bf16 tensors, with cos/sin already rounded to bf16.
  void (*rope_row)(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin);
  void (*rope_row_bf16)(float* x, int64_t n_heads, int64_t head_dim, const float* cos,
                        const float* sin);
  // Attention outputs for work items [begin, end) (see kAttentionQueryBlock).
  // scratch: at least AttentionScratchFloats(Tk, d) floats.
  void (*attention_items)(const AttentionArgs& args, int64_t begin, int64_t end, float* scratch);
  // out[0, n) = f32(data[0, n)) for dtype F32/BF16/F16.
  void (*to_f32)(const void* data, DType dtype, int64_t n, float* out);
  // GEMM on bf16 weights with bf16 dot products, for more than 8 activation rows (cpu/
  // gemm_bf16.h): pack_bf16 packs 16-row groups [g0, g1) of the activations (false if
  // exact_only and one is not a bf16 value), gemm_bf16 multiplies the packed rows by weight rows
  // [n0, n1). Null where the CPU has no bf16 dot-product instruction.
  bool (*pack_bf16)(const float* a, int64_t M, int64_t K, int64_t lda, int64_t g0, int64_t g1,
                    bool exact_only, uint32_t* packed);
  void (*gemm_bf16)(const uint32_t* packed, int64_t M, int64_t K, const Matrix& w, int64_t n0,
                    int64_t n1, float* out, int64_t ldo);
  // Attention's transposed products (cpu/gemm_bf16.h GemmBf16T; on AMX tiles under amx).
  GemmBf16TFn gemm_bf16_t;
  // Attention outputs for bf16 dot-product work items [begin, end) (AttentionDotArgs), with
  // torch's bf16 rounding points; needs gemm_bf16. scratch: AttentionDotScratchFloats floats.
  void (*attention_dot_items)(const AttentionArgs& args, const AttentionDotArgs& dot, int64_t begin,
                              int64_t end, float* scratch);
  // Precision::kBF16 rows 1-8 on bf16 weights and bf16-valued activations (K even) in the order
  // of gemm_bf16 above (cpu/gemm_bf16.h MatMulBf16Rows), so decode and prefill rows agree bit
  // for bit (Exec::batch_invariant). Null where the CPU has no bf16 dot-product instruction,
  // and under amx (whose GEMM sums in another order).
  MatMulFn matmul_bf16_rows;
  // Quantized weights, int8 activations, more than 8 rows: the rows quantized once per call by
  // quantize_act_row (byte-identical to quant::QuantizeActRow) and shared by the threads, then
  // multiplied by matmul_quant_rows — equal to matmul[] bit for bit. Null where matmul[]
  // quantizes its own rows (AVX2, scalar).
  void (*quantize_act_row)(WFormat f, const float* x, int64_t K, std::byte* dst);
  MatMulQuantRowsFn matmul_quant_rows;
  // Weights in a layout matmul[] reads faster than the stored one, made once at load
  // (ops::PackWeights; the result goes in Matrix::packed): the bytes it takes for w (0: none
  // for this format), and the packing. Same results bit for bit. Null where no kernel has one.
  size_t (*packed_weight_bytes)(const Matrix& w);
  void (*pack_weights)(const Matrix& w, std::byte* out);
};

}  // namespace ocular::kernels

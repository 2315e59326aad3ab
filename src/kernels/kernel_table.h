// The per-ISA function table behind ops.h (internal to kernels/).
//
// ops.cc validates arguments, splits work over the thread pool and calls one entry of the
// active table per op or per row block. ref/ fills the "scalar" table; cpu/ fills one table
// per Highway target.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ocular::kernels {

// Arguments of ops::Attention, passed to the per-ISA kernel as one struct.
struct AttentionArgs {
  const float* q;
  int64_t Tq, Hq, ldq;
  const float* k;
  const float* v;
  int64_t Tk, Hkv, ldk, ldv, d;
  float scale, softcap;
  const int32_t* key_begin;
  const int32_t* key_end;
  float* out;
  int64_t ldo;
};

// Attention work item: one head × a block of up to kAttentionQueryBlock consecutive queries
// (item = head * ceil(Tq / kAttentionQueryBlock) + block), so a kernel can share each K/V
// row it loads among the block's queries.
inline constexpr int64_t kAttentionQueryBlock = 4;
inline int64_t AttentionItemCount(int64_t Tq, int64_t Hq) {
  return Hq * ((Tq + kAttentionQueryBlock - 1) / kAttentionQueryBlock);
}

struct KernelTable {
  const char* name;
  // out[m, n] = dot(a[m, 0:K], w[n, 0:K]) for m in [0, M), n in [n0, n1). No bias.
  void (*matmul_block)(const float* a, int64_t M, int64_t K, int64_t lda, const void* w,
                       DType w_dtype, int64_t n0, int64_t n1, float* out, int64_t ldo);
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
  // Rotates x[n_heads, head_dim] of one row with precomputed cos/sin[head_dim / 2].
  void (*rope_row)(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin);
  // Attention outputs for work items [begin, end) (see kAttentionQueryBlock).
  // scratch: at least kAttentionQueryBlock * Tk floats.
  void (*attention_items)(const AttentionArgs& args, int64_t begin, int64_t end, float* scratch);
  // out[0, n) = f32(data[0, n)) for dtype F32/BF16/F16.
  void (*to_f32)(const void* data, DType dtype, int64_t n, float* out);
};

}  // namespace ocular::kernels

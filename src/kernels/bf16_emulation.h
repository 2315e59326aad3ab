// Reproduces PyTorch's eager bf16 arithmetic on f32 buffers, for bit-level parity with a
// reference run in bfloat16 (HF `torch_dtype=bfloat16`): every tensor torch would store in
// bf16 is rounded to bf16 (round-to-nearest-even) at the same point torch rounds it, while
// reductions accumulate in f32 as torch's CPU kernels do. Used when a checkpoint is stored
// in bf16 (models/layers.h Numerics); the f32 paths in ops.h stay unchanged.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace ocular::ops {

// In place: x = bf16(x).
void RoundToBF16(float* x, int64_t n);

// rotate_half RoPE as HF computes it on bf16 q/k (modeling_gemma.py apply_rotary_pos_emb):
// cos/sin in f32 then cast to bf16; x*cos and rotate_half(x)*sin each rounded, then the sum.
// Same layout and angles as RopeSplitHalf.
void RopeSplitHalfBF16(float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
                       const int64_t* pos, float theta);

// HF eager attention on bf16 tensors (eager_attention_forward): scores = bf16(q·k) then
// bf16(scores * scale); softcap as three rounded ops (/cap, tanh, *cap); softmax in f32 then
// bf16; out = bf16(p·v). Arguments as ops::Attention.
void AttentionBF16(ThreadPool& pool, const float* q, int64_t Tq, int64_t Hq, int64_t ldq,
                   const float* k, const float* v, int64_t Tk, int64_t Hkv, int64_t ldk,
                   int64_t ldv, int64_t d, float scale, float softcap, const int32_t* key_begin,
                   const int32_t* key_end, float* out, int64_t ldo);

}  // namespace ocular::ops

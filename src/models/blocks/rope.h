// Rotary position embeddings as data: the positions of a pass's rows (a typed view: one axis
// today; M-RoPE's three axes, temporal/height/width, extend it) and a layer's frequencies.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/exec.h"

namespace ocular::blocks {

// Positions of a pass's rows: pos[axis * rows + r] for row r (axes = 1: plain RoPE).
struct Positions {
  const int64_t* pos = nullptr;
  int64_t rows = 0;
  int axes = 1;
};

// A layer's RoPE (split-half, HF rotate_half):
//   inv_freq given (llama3 scaling, RopeInvFreq): angle = pos * inv_freq[k];
//   else inv_freq_k = 1 / theta^(2k/d) / divisor (HF "linear" rope_scaling when divisor > 1).
// theta == 0 and no inv_freq: no RoPE (a vision encoder).
struct RopeSpec {
  float theta = 0;
  float divisor = 1;
  const float* inv_freq = nullptr;  // [head_dim / 2], owned by the model
  bool enabled() const { return theta > 0 || inv_freq != nullptr; }
};

// rope_scaling {"rope_type": "llama3"} (modeling_rope_utils.py _compute_llama3_parameters);
// factor 0: none (_compute_default_rope_parameters).
struct Llama3RopeScaling {
  float factor = 0, low_freq_factor = 1, high_freq_factor = 4;
  int original_max_position_embeddings = 8192;
};

// inv_freq [head_dim / 2] in f32, as HF computes it.
std::vector<float> RopeInvFreq(int64_t head_dim, float theta, const Llama3RopeScaling& scaling);

// RoPE in place on x[rows, heads, head_dim] (row stride ld) at positions p (1-D).
// REQUIRES: p.axes == 1, p.rows == rows.
void ApplyRope(const Exec& ex, const RopeSpec& r, const Positions& p, float* x, int64_t rows,
               int64_t heads, int64_t head_dim, int64_t ld);

}  // namespace ocular::blocks

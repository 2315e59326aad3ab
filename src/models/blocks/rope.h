// Rotary position embeddings as data: the positions of a pass's rows (a typed view: one axis,
// or several — Qwen2-VL's M-RoPE reads temporal/height/width positions, its ViT rows/columns)
// and a layer's frequencies.
#pragma once

#include <cstdint>
#include <span>
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
// Multi-axis (axes > 1, with inv_freq and axis_of): frequency k turns by the position of axis
// axis_of[k] (ops::RopeAxes); the rows' Positions then hold `axes` axes.
struct RopeSpec {
  float theta = 0;
  float divisor = 1;
  const float* inv_freq = nullptr;   // [head_dim / 2], owned by the model
  const uint8_t* axis_of = nullptr;  // [head_dim / 2] (multi-axis), owned by the model
  int axes = 1;
  bool f32_rotation = false;  // multi-axis: rotate in f32, round once (ops::RopeAxes)
  bool enabled() const { return theta > 0 || inv_freq != nullptr; }
};

// The tables of a multi-axis RoPE, owned by a model; spec() views them.
struct AxesRope {
  std::vector<float> inv_freq;   // [head_dim / 2]
  std::vector<uint8_t> axis_of;  // [head_dim / 2]
  int axes = 1;
  RopeSpec spec() const { return {0, 1, inv_freq.data(), axis_of.data(), axes}; }
};

// M-RoPE (modeling_qwen2_vl.py apply_multimodal_rotary_pos_emb): the default inv_freq of
// head_dim and theta; frequency k (and k + head_dim/2, which shares its cos/sin) reads the axis
// of the mrope_section it falls in: [0, s0) temporal, [s0, s0+s1) height, the rest width.
// REQUIRES: the sections are positive and sum to head_dim / 2 (the config checks it).
AxesRope MultimodalRope(int64_t head_dim, float theta, std::span<const int> mrope_section);

// The 2-D rotary of Qwen2-VL's ViT (VisionRotaryEmbedding(head_dim / 2) and rot_pos_emb):
// frequencies [0, d/4) turn by the patch row, [d/4, d/2) by the patch column, both with
// inv_freq_j = 1 / theta^(2j / (d/2)). Positions: axis 0 rows, axis 1 columns.
// REQUIRES: head_dim % 4 == 0.
AxesRope VisionRope2d(int64_t head_dim, float theta);

// rope_scaling {"rope_type": "llama3"} (modeling_rope_utils.py _compute_llama3_parameters);
// factor 0: none (_compute_default_rope_parameters).
struct Llama3RopeScaling {
  float factor = 0, low_freq_factor = 1, high_freq_factor = 4;
  int original_max_position_embeddings = 8192;
};

// inv_freq [head_dim / 2] in f32, as HF computes it.
std::vector<float> RopeInvFreq(int64_t head_dim, float theta, const Llama3RopeScaling& scaling);

// RoPE in place on x[rows, heads, head_dim] (row stride ld) at positions p.
// REQUIRES: p.axes == r.axes, p.rows == rows.
void ApplyRope(const Exec& ex, const RopeSpec& r, const Positions& p, float* x, int64_t rows,
               int64_t heads, int64_t head_dim, int64_t ld);

}  // namespace ocular::blocks

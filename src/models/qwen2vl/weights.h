// Qwen2-VL's and Qwen2.5-VL's weights in HF layout and stored format. Shapes: D vision
// embed_dim, Iv its MLP, K = 3 * temporal_patch_size * patch_size^2, Dm = D * merge^2,
// H text hidden, I text MLP, V vocab, Hq/Hkv heads, d head_dim.
#pragma once

#include <vector>

#include "core/matrix.h"
#include "core/tensor.h"
#include "models/qwen2vl/text.h"

namespace ocular::qwen2vl {

struct VisionBlockWeights {
  TensorView norm1_w, norm1_b;  // [D] (Qwen2.5-VL: RMSNorm, no bias)
  Matrix qkv_w;                 // [3D, D]  attn.qkv (q, k, v rows one after the other)
  TensorView qkv_b;             // [3D]
  Matrix proj_w;                // [D, D]   attn.proj
  TensorView proj_b;            // [D]
  TensorView norm2_w, norm2_b;  // [D]
  Matrix fc1_w;                 // [Iv, D]  Qwen2-VL: mlp.fc1; Qwen2.5-VL: mlp.gate_proj
  TensorView fc1_b;             // [Iv]
  Matrix up_w;                  // [Iv, D]  Qwen2.5-VL: mlp.up_proj
  TensorView up_b;              // [Iv]
  Matrix fc2_w;                 // [D, Iv]  Qwen2-VL: mlp.fc2; Qwen2.5-VL: mlp.down_proj
  TensorView fc2_b;             // [D]
  // Views of qkv_w / qkv_b's thirds (set after binding; not visited).
  Matrix q_w, k_w, v_w;
  TensorView q_b, k_b, v_b;
};

// Sets each block's q/k/v views to the thirds of its qkv_w / qkv_b rows, D each:
// qkv(x).reshape(seq, 3, heads, -1).
inline void SplitQkv(int64_t D, std::vector<VisionBlockWeights>* blocks) {
  for (VisionBlockWeights& b : *blocks) {
    b.q_w = Rows(b.qkv_w, 0, D);
    b.k_w = Rows(b.qkv_w, D, D);
    b.v_w = Rows(b.qkv_w, 2 * D, D);
    b.q_b = Slice(b.qkv_b, 0, D);
    b.k_b = Slice(b.qkv_b, D, D);
    b.v_b = Slice(b.qkv_b, 2 * D, D);
  }
}

struct VisionWeights {
  Matrix patch_w;  // [D, 3, tp, p, p] (Conv3d, no bias) as the matrix [D, K]
  std::vector<VisionBlockWeights> blocks;
  TensorView ln_q_w, ln_q_b;  // [D]   merger.ln_q (Qwen2.5-VL: RMSNorm, no bias)
  Matrix mlp0_w;              // [Dm, Dm] merger.mlp.0
  TensorView mlp0_b;          // [Dm]
  Matrix mlp2_w;              // [H, Dm]  merger.mlp.2
  TensorView mlp2_b;          // [H]
};

// The decoder's weights (text.h) and the vision tower's.
struct Weights : TextWeights {
  VisionWeights vision;
};

}  // namespace ocular::qwen2vl

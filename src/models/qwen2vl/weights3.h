// Qwen3-VL's weights in HF layout and stored format. Shapes: D vision hidden_size, Iv its MLP,
// K = 3 * temporal_patch_size * patch_size^2, Dm = D * merge^2, P num_position_embeddings,
// H text hidden, I text MLP, V vocab, Hq/Hkv heads, d head_dim.
#pragma once

#include <vector>

#include "core/matrix.h"
#include "core/tensor.h"
#include "models/qwen2vl/weights.h"

namespace ocular::qwen2vl {

// Qwen3VLVisionPatchMerger: norm is LayerNorm(D) before the merge-window reshape, or
// LayerNorm(Dm) after it (use_postshuffle_norm: the DeepStack mergers).
struct Merger3Weights {
  TensorView norm_w, norm_b;  // [D] or [Dm]
  Matrix fc1_w;               // [Dm, Dm] linear_fc1
  TensorView fc1_b;           // [Dm]
  Matrix fc2_w;               // [H, Dm]  linear_fc2
  TensorView fc2_b;           // [H]
};

struct Vision3Weights {
  Matrix patch_w;      // [D, 3, tp, p, p] (Conv3d) as the matrix [D, K]
  TensorView patch_b;  // [D]
  Matrix pos_embed;    // [P, D] pos_embed (nn.Embedding)
  // Qwen3VLVisionBlock: norm1/norm2 LayerNorm, attn.qkv/proj, mlp.linear_fc1/linear_fc2 (in
  // VisionBlockWeights' fc1/fc2; up_w unused).
  std::vector<VisionBlockWeights> blocks;
  Merger3Weights merger;
  std::vector<Merger3Weights> deepstack;  // deepstack_merger_list
};

// The decoder's weights (text.h) and the vision tower's.
struct Weights3 : TextWeights {
  Vision3Weights vision;
};

}  // namespace ocular::qwen2vl

// Llama 3.2 Vision weights in HF layout and the checkpoint's stored format. Shapes use: D vision
// hidden, Iv vision MLP, p patch, P = (tile/p)^2 + 1 rows per tile, T max tiles, R aspect
// ratios, Dv = vision_output_dim, H text hidden, I text MLP, V vocab, Hq/Hkv heads, d head_dim.
#pragma once

#include <vector>

#include "core/matrix.h"
#include "core/tensor.h"
#include "io/tensor_source.h"
#include "models/mllama/config.h"
#include "models/weights.h"

namespace ocular::mllama {

struct VisionLayerWeights {
  TensorView ln1_w, ln1_b;         // [D] input_layernorm
  Matrix q_w, k_w, v_w, o_w;       // [D, D], no biases
  TensorView ln2_w, ln2_b;         // [D] post_attention_layernorm
  Matrix fc1_w;                    // [Iv, D]
  TensorView fc1_b;                // [Iv]
  Matrix fc2_w;                    // [D, Iv]
  TensorView fc2_b;                // [D]
  TensorView gate_attn, gate_ffn;  // [1] global layers only (tanh gates)
};

struct VisionWeights {
  Matrix patch_w;                 // [D, 3, p, p] Conv2d without bias, as [D, 3*p*p]
  TensorView class_embedding;     // [D]
  TensorView pos_embedding;       // [P, D] gated_positional_embedding.embedding
  TensorView pos_gate;            // [1]
  TensorView tile_pos_embedding;  // [R + 1, T*P*D] gated_positional_embedding.tile_embedding
  TensorView pre_tile_embedding, post_tile_embedding;   // [R + 1, T*D]
  TensorView pre_tile_gate, post_tile_gate;             // [1]
  TensorView ln_pre_w, ln_pre_b, ln_post_w, ln_post_b;  // [D]
  std::vector<VisionLayerWeights> layers;               // local encoder
  std::vector<VisionLayerWeights> global_layers;        // gated global encoder
};

struct TextLayerWeights {
  bool cross = false;
  TensorView input_norm, post_attn_norm;  // [H]
  Matrix q_w;                             // [Hq*d, H]
  Matrix k_w, v_w;                        // [Hkv*d, H] (cross: applied to the image features)
  Matrix o_w;                             // [H, Hq*d]
  TensorView q_norm, k_norm;              // [d] cross only
  TensorView attn_gate, mlp_gate;         // [1] cross only
  Matrix gate_w, up_w;                    // [I, H]
  Matrix down_w;                          // [H, I]
};

struct Weights {
  VisionWeights vision;
  Matrix proj_w;      // [H, Dv] multi_modal_projector
  TensorView proj_b;  // [H]
  Matrix embed;       // [V + 8, H] embed_tokens (the image token has a row)
  std::vector<TextLayerWeights> layers;
  TensorView final_norm;  // [H]
  Matrix lm_head;         // [V, H]
};

// Calls fn(hf_name, expected_shape, slot, required) for every tensor in module order, under
// the names save_pretrained writes in transformers 4.57 (as the released checkpoints).
Status ForEachTensor(const MllamaConfig& cfg, Weights* w, const TensorVisitor& fn);

}  // namespace ocular::mllama

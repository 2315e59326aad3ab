// Weight views for PaliGemma (SigLIP + projector + Gemma/Gemma 2), in HF layout and in the
// checkpoint's stored dtype. Shapes use the config names: D vision hidden, Iv vision MLP,
// P patch, N patches, H text hidden, I text MLP, V vocab, Hq/Hkv heads, d head_dim.
// One visitor, ForEachTensor, names every tensor with its expected shape; loading and shape
// checking are both driven by it, so the HF names appear exactly once (weights.cc).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/config.h"

namespace ocular {

struct SiglipLayerWeights {
  TensorView ln1_w, ln1_b;        // [D]
  TensorView q_w, k_w, v_w, o_w;  // [D, D]
  TensorView q_b, k_b, v_b, o_b;  // [D]
  TensorView ln2_w, ln2_b;        // [D]
  TensorView fc1_w;               // [Iv, D]
  TensorView fc1_b;               // [Iv]
  TensorView fc2_w;               // [D, Iv]
  TensorView fc2_b;               // [D]
};

struct SiglipWeights {
  TensorView patch_w;  // [D, 3, P, P] (Conv2d), used as [D, 3*P*P]
  TensorView patch_b;  // [D]
  TensorView pos;      // [N, D]
  std::vector<SiglipLayerWeights> layers;
  TensorView post_ln_w, post_ln_b;  // [D]
};

struct GemmaLayerWeights {
  TensorView input_norm;          // [H]
  TensorView q_w;                 // [Hq*d, H]
  TensorView k_w, v_w;            // [Hkv*d, H]
  TensorView o_w;                 // [H, Hq*d]
  TensorView post_attn_norm;      // [H] Gemma 1: the pre-FFW norm; Gemma 2: after attention
  TensorView pre_ffw_norm;        // [H] Gemma 2 only
  TensorView post_ffw_norm;       // [H] Gemma 2 only
  TensorView gate_w, up_w;        // [I, H]
  TensorView down_w;              // [H, I]
};

struct GemmaWeights {
  TensorView embed;  // [V, H] (tied output projection unless lm_head is stored)
  TensorView lm_head;  // [V, H] == embed when tied
  std::vector<GemmaLayerWeights> layers;
  TensorView final_norm;  // [H]
};

struct PaliGemmaWeights {
  SiglipWeights vision;
  TensorView proj_w;  // [H, D]  multi_modal_projector.linear
  TensorView proj_b;  // [H]
  GemmaWeights text;
};

// Calls fn(hf_name, &view, expected_shape) for every tensor of the model, in module order.
// `optional` tensors (lm_head) are reported with required == false.
using TensorVisitor =
    std::function<Status(const std::string& name, TensorView* view, const Shape& shape, bool required)>;
Status ForEachTensor(const PaliGemmaConfig& cfg, PaliGemmaWeights* w, const TensorVisitor& fn);

}  // namespace ocular

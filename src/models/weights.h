// Weights for PaliGemma (SigLIP + projector + Gemma/Gemma 2), in HF layout and in the
// checkpoint's stored format: linear weights as Matrix rows (core/matrix.h), vectors (norms,
// biases, position tables) as TensorViews. Shapes use the config names: D vision hidden, Iv vision
// MLP, P patch, N patches, H text hidden, I text MLP, V vocab, Hq/Hkv heads, d head_dim. One
// visitor, ForEachTensor, names every tensor with its expected shape; loading and shape checking
// are both driven by it, so the HF names appear exactly once (weights.cc).
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/matrix.h"
#include "core/tensor.h"
#include "io/tensor_source.h"
#include "models/config.h"

namespace ocular {

struct SiglipLayerWeights {
  TensorView ln1_w, ln1_b;        // [D]
  Matrix q_w, k_w, v_w, o_w;      // [D, D]
  TensorView q_b, k_b, v_b, o_b;  // [D]
  TensorView ln2_w, ln2_b;        // [D]
  Matrix fc1_w;                   // [Iv, D]
  TensorView fc1_b;               // [Iv]
  Matrix fc2_w;                   // [D, Iv]
  TensorView fc2_b;               // [D]
};

struct SiglipWeights {
  Matrix patch_w;      // [D, 3, P, P] (Conv2d), as the matrix [D, 3*P*P]
  TensorView patch_b;  // [D]
  TensorView pos;      // [N, D]
  std::vector<SiglipLayerWeights> layers;
  TensorView post_ln_w, post_ln_b;  // [D]
};

struct GemmaLayerWeights {
  TensorView input_norm;      // [H]
  Matrix q_w;                 // [Hq*d, H]
  Matrix k_w, v_w;            // [Hkv*d, H]
  Matrix o_w;                 // [H, Hq*d]
  TensorView post_attn_norm;  // [H] Gemma 1: the pre-FFW norm; Gemma 2: after attention
  TensorView pre_ffw_norm;    // [H] Gemma 2 only
  TensorView post_ffw_norm;   // [H] Gemma 2 only
  Matrix gate_w, up_w;        // [I, H]
  Matrix down_w;              // [H, I]
};

struct GemmaWeights {
  Matrix embed;    // [V, H] (tied output projection unless lm_head is stored)
  Matrix lm_head;  // [V, H] == embed when tied
  std::vector<GemmaLayerWeights> layers;
  TensorView final_norm;  // [H]
};

struct PaliGemmaWeights {
  SiglipWeights vision;
  Matrix proj_w;      // [H, D]  multi_modal_projector.linear
  TensorView proj_b;  // [H]
  GemmaWeights text;
};

// Where a visited tensor goes: a matrix (linear weights, embeddings; the shape's first
// dimension is the rows, the rest is flattened into the columns) or a vector view.
struct WeightSlot {
  Matrix* matrix = nullptr;
  TensorView* vector = nullptr;
};

// Calls fn(hf_name, expected_shape, slot, required) for every tensor of the model, in module
// order. `optional` tensors (lm_head) are reported with required == false.
using TensorVisitor = std::function<Status(const std::string& name, const Shape& shape,
                                           WeightSlot slot, bool required)>;

// Slots for a visitor's calls: fn(name, shape, Mat(&w.q_w), true).
inline WeightSlot Mat(Matrix* m) { return WeightSlot{m, nullptr}; }
inline WeightSlot Vec(TensorView* v) { return WeightSlot{nullptr, v}; }

// One required tensor of a module: its name under the module's prefix, slot and shape.
struct WeightItem {
  std::string name;
  WeightSlot slot;
  Shape shape;
};
// fn(prefix + name, shape, slot, true) for each item in order; stops at the first error.
Status VisitItems(const std::string& prefix, std::initializer_list<WeightItem> items,
                  const TensorVisitor& fn);
Status ForEachTensor(const PaliGemmaConfig& cfg, PaliGemmaWeights* w, const TensorVisitor& fn);

// The SigLIP tower's tensors alone ("vision_tower.vision_model.*"), for every family using it.
Status VisitSiglip(const SiglipVisionConfig& cfg, SiglipWeights* w, const TensorVisitor& fn);

// How a family binds its weights (BindTensors).
struct BindRules {
  // The names to try for a visited name, in order (other transformers versions save other
  // module paths); the name itself first.
  std::function<std::vector<std::string>(const std::string&)> candidates;
  // True for the tensors a decode step streams (ModelSpec::text_weight_bytes).
  std::function<bool(const std::string&)> is_text;
  // For the refusal of an unused tensor: "paligemma", "PaliGemma (gemma2)".
  std::string tag, model;
};
struct BoundWeights {
  size_t weight_bytes = 0, text_weight_bytes = 0;
  DType weight_dtype = DType::kF32;  // of the matrices: F32 if mixed or quantized
  // Of the matrices that are not quantized: their dtype if they all share one (F16 ones aside,
  // beside another dtype: quantize's fallback where no block format fits), else F32.
  DType float_dtype = DType::kF32;
  bool quantized = false;      // some matrix is quantized (q8_0, q4_k, ...)
  std::string weight_formats;  // every matrix format, "+"-joined
};
// Binds every tensor `for_each` visits from `src` (the first candidate name it has); a missing
// required tensor is kDataLoss, and a tensor of `src` nothing bound is kUnimplemented — it
// would mean a configuration the family does not implement (attention or MLP biases, a
// pooling head, ...), refused rather than ignored.
StatusOr<BoundWeights> BindTensors(const TensorSource& src, const BindRules& rules,
                                   const std::function<Status(const TensorVisitor&)>& for_each);

}  // namespace ocular

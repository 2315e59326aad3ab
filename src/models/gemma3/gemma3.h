// Gemma 3 behind the VlModel seam (models/model.h):
//   gemma3_text  Gemma3ForCausalLM: scaled embedding -> decoder -> tied output (+ final softcap)
//   gemma3       Gemma3ForConditionalGeneration: SigLIP -> average pool to mm_tokens_per_image
//                -> mm_soft_emb_norm -> mm_input_projection, whose rows replace the image
//                tokens' embeddings; causal decoder with bidirectional image blocks
// Reference: transformers 4.57 models/gemma3/modeling_gemma3.py; docs/models.md (Gemma 3).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/model_files.h"
#include "io/tensor_source.h"
#include "models/family.h"
#include "models/gemma3/config.h"
#include "models/gemma3/decoder.h"
#include "models/weights.h"

namespace ocular::gemma3 {

struct Gemma3Weights {
  SiglipWeights vision;  // model_type gemma3 only
  TensorView mm_norm;    // [D] mm_soft_emb_norm (1 + w)
  TensorView mm_proj;    // [D, H] mm_input_projection_weight (x @ W), as stored
  Matrix mm_proj_t;      // [H, D] its transpose (owned copy), for MatMul
  Matrix embed;          // [V, H] tied output projection
  std::vector<Gemma3LayerWeights> layers;
  TensorView final_norm;  // [H]
};

// Calls fn(hf_name, expected_shape, slot, required) for every tensor of the model in module
// order (loading, shape checks and the GGUF name table are driven by it).
Status ForEachTensor(const Gemma3Config& cfg, Gemma3Weights* w, const TensorVisitor& fn);

// EncodeImages: features = Gemma3Model.get_image_features(pixels); taps vision.*, projector.
// Embed: text rows embed_tokens(ids) * embed_scale (Gemma3TextScaledWordEmbedding), image
// rows the features, unscaled (masked_scatter after the embedding); tap decoder.embed_scaled.
// ForwardLayers taps decoder.layers.{i}, decoder.norm. Logits: gemma3_text applies
// final_logit_softcapping when set (Gemma3ForCausalLM.forward); gemma3 none
// (Gemma3ForConditionalGeneration.forward applies none).
class Gemma3 final : public FamilyModel<Gemma3Config, Gemma3Weights> {
 public:
  // An HF directory (either model_type) or a GGUF file written by `ocular quantize`. Every
  // tensor's presence and shape is checked; an unused tensor is an error (kUnimplemented).
  static StatusOr<std::unique_ptr<Gemma3>> Load(const ModelFiles& files);
  static StatusOr<std::unique_ptr<Gemma3>> Load(Gemma3Config config,
                                                std::unique_ptr<TensorSource> source);

  OCULAR_FAMILY_MODEL_METHODS();

 private:
  Gemma3() = default;
  Status BindWeights() override;
  void BuildSpec() override;

  std::vector<std::byte> mm_proj_t_bytes_;
  std::vector<LayerAttention> attention_;  // per layer
};

}  // namespace ocular::gemma3

// PaliGemma 1 and 2: SigLIP -> linear projector -> Gemma / Gemma 2 decoder with a
// bidirectional image+prompt prefix, behind the VlModel seam (models/model.h).
// Reference: transformers/models/paligemma/modeling_paligemma.py
#pragma once

#include <memory>
#include <string>

#include "io/model_files.h"
#include "io/tensor_source.h"
#include "models/config.h"
#include "models/family.h"
#include "models/weights.h"

namespace ocular::paligemma {

// EncodeImages: features = projector(SigLIP(pixels)) / sqrt(H)
// (PaliGemmaModel.get_image_features); taps vision.*, projector. Embed: embeddings multiplied
// by the normalizer sqrt(H) (HF scales text AND image rows); taps decoder.inputs_embeds
// (before the normalizer), decoder.embed_scaled. ForwardLayers taps decoder.layers.{i},
// decoder.norm. Logits: no final softcap unless set_apply_final_softcap, as HF's PaliGemma.
class PaliGemma final : public FamilyModel<PaliGemmaConfig, PaliGemmaWeights> {
 public:
  // Loads config.json and the safetensors weights of an HF PaliGemma directory. Weights stay
  // memory-mapped in their stored format. Every tensor's presence and shape is checked, and a
  // tensor the model does not use is an error (it would mean a configuration ocular does not
  // implement, e.g. attention biases).
  // `path`: an HF directory or a GGUF file written by `ocular quantize`.
  static StatusOr<std::unique_ptr<PaliGemma>> Load(const std::string& path);
  static StatusOr<std::unique_ptr<PaliGemma>> Load(const ModelFiles& files);
  // The same from an already parsed config and any tensor source.
  static StatusOr<std::unique_ptr<PaliGemma>> Load(PaliGemmaConfig config,
                                                   std::unique_ptr<TensorSource> source);

  OCULAR_FAMILY_MODEL_METHODS();

  // Gemma 2's final_logit_softcapping, which HF's PaliGemma does not apply. Default off.
  void set_apply_final_softcap(bool on) { apply_final_softcap_ = on; }

 private:
  PaliGemma() = default;
  Status BindWeights() override;
  void BuildSpec() override;

  bool apply_final_softcap_ = false;
  bool tied_output_ = false;  // no lm_head tensor: the embedding is the output projection
};

}  // namespace ocular::paligemma

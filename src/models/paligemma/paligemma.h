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

  size_t WorkspaceBytes(const WorkspaceShape& shape) const override;

  // features = projector(SigLIP(pixels)) / sqrt(H) (PaliGemmaModel.get_image_features).
  // Taps: vision.*, projector.
  void EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                    float* features, Tracer* tracer) const override;
  // Embeddings multiplied by the normalizer sqrt(H) (HF scales text AND image rows).
  // Taps: decoder.inputs_embeds (before the normalizer), decoder.embed_scaled.
  Status Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
               int64_t feature_rows, float* x, Tracer* tracer) const override;
  // Taps: decoder.layers.{i}, decoder.norm.
  void ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer, int begin,
                     int end) const override;
  // No final softcap unless enabled below, as HF's PaliGemma.
  void Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const override;

  Status ForEachWeight(const WeightVisitor& fn) const override;

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

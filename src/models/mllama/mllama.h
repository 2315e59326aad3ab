// Llama 3.2 Vision (model_type "mllama") behind the VlModel seam (models/model.h):
//   images  -> MllamaVisionModel (tiles, local + gated global encoders, intermediate features)
//           -> multi_modal_projector: the features the cross-attention layers read
//   prompt  -> Llama 3 decoder whose cross-attention layers attend to the images' K/V, computed
//              once per image and layer at the prefill and kept in the sequence's cache
// Reference: transformers 4.57 models/mllama/modeling_mllama.py (MllamaForConditionalGeneration),
// with Meta's intermediate-feature definition (vision.h); docs/models.md (Llama 3.2 Vision).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "io/model_files.h"
#include "io/tensor_source.h"
#include "models/family.h"
#include "models/mllama/config.h"
#include "models/mllama/weights.h"

namespace ocular::mllama {

// EncodeImages: pixels are the images' processor.h PixelFloats each, their grid {1, tiles
// high, tiles wide} -> features [n * ImageFeatureRows, H] (vision.h). Embed: x =
// embed_tokens(ids) (the image token has its own row); the features are not placed in x: the
// decoder reads them through SeqChunk::features. Errors: an id outside the embedding table;
// image tokens != images of the features. ForwardLayers taps decoder.layers.{i} (a cross
// layer only when some sequence has images: HF skips it for text-only prompts),
// decoder.norm. ForEachWeight: every tensor under its GGUF name (gguf_names.h).
class Mllama final : public FamilyModel<MllamaConfig, Weights> {
 public:
  // An HF directory, or a GGUF file written by `ocular quantize` (models/mllama/gguf_names.h).
  // Every tensor's presence and shape is checked; an unused tensor is an error
  // (kUnimplemented).
  static StatusOr<std::unique_ptr<Mllama>> Load(const ModelFiles& files);

  OCULAR_FAMILY_MODEL_METHODS();
  // A CrossState (decoder.h): the cross layers' keys and a decode step's key range.
  std::unique_ptr<SequenceState> NewState() const override;

  // Images whose cross-attention K/V were computed, summed over the cross layers (one per
  // image and layer per request when the cache works as it should). For tests.
  int64_t cross_kv_computed() const { return kv_computed_.load(); }

 private:
  Mllama() = default;
  Status BindWeights() override;  // and the RoPE table
  void BuildSpec() override;

  std::vector<float> inv_freq_;
  mutable std::atomic<int64_t> kv_computed_{0};
};

}  // namespace ocular::mllama

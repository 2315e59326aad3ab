// Qwen3-VL (model_type "qwen3_vl", dense) behind the VlModel seam (models/model.h):
//   images  -> the vision tower (vision3.h): patches + interpolated position table -> ViT with
//              2-D rotary -> merger, one feature row per <|image_pad|>, each row also holding
//              the DeepStack mergers' outputs (ModelSpec::feature_width = H * (1 + deepstack))
//   prompt  -> Qwen3 decoder (GQA, q/k RMSNorm per head, SwiGLU, RMSNorm) with interleaved
//              M-RoPE at get_rope_index's positions (Prompt::positions, 3 axes; a decode step at
//              cache index i is at i + rope_deltas on every axis); after decoder layer k <
//              deepstack, DeepStack feature k is added at the prefill's image positions
// Reference: transformers 4.57.1 models/qwen3_vl/modeling_qwen3_vl.py
// (Qwen3VLForConditionalGeneration, Qwen3VLTextModel, Qwen3VLTextRotaryEmbedding).
#pragma once

#include <memory>

#include "io/model_files.h"
#include "io/tensor_source.h"
#include "models/blocks/rope.h"
#include "models/family.h"
#include "models/qwen2vl/config3.h"
#include "models/qwen2vl/processor.h"
#include "models/qwen2vl/text.h"
#include "models/qwen2vl/weights3.h"

namespace ocular::qwen2vl {

// apply_interleaved_mrope as a multi-axis RoPE: frequency j reads the height position if
// j % 3 == 1 and j < 3 * mrope_section[1], the width position if j % 3 == 2 and
// j < 3 * mrope_section[2], else the temporal one. REQUIRES: head_dim even.
blocks::AxesRope InterleavedMrope(int64_t head_dim, float theta,
                                  const std::array<int, 3>& mrope_section);

// Calls fn(hf_name, expected_shape, slot, required) for every tensor of the model in module
// order.
Status ForEachTensor(const Qwen3VLConfig& cfg, Weights3* w, const TensorVisitor& fn);

// Embed: x = embed_tokens(ids), each <|image_pad|> row replaced by the next feature row's
// merger output (text.h EmbedText). ForwardLayers taps decoder.layers.{i} (before DeepStack's
// addition, as the layer's output), decoder.norm. ForEachWeight: every tensor under
// its GGUF name (gguf_names.h).
class Qwen3VL final : public FamilyModel<Qwen3VLConfig, Weights3> {
 public:
  // An HF directory. Every tensor's presence and shape is checked; an unused tensor is an
  // error (kUnimplemented).
  static StatusOr<std::unique_ptr<Qwen3VL>> Load(const ModelFiles& files);

  OCULAR_FAMILY_MODEL_METHODS();

 private:
  Qwen3VL() = default;
  Status BindWeights() override;  // and the qkv thirds' views, the RoPE tables
  void BuildSpec() override;
  // x[image rows of each prefill] += DeepStack feature k (_deepstack_process).
  void AddDeepstack(const Exec& ex, const Batch& batch, int k, float* x) const;

  ImageConfig image_;
  QwenText text_;
  blocks::AxesRope text_rope_, vision_rope_;
};

}  // namespace ocular::qwen2vl

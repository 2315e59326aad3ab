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
#include "models/model.h"
#include "models/qwen2vl/config3.h"
#include "models/qwen2vl/processor.h"
#include "models/qwen2vl/weights3.h"

namespace ocular::qwen2vl {

// apply_interleaved_mrope as a multi-axis RoPE: frequency j reads the height position if
// j % 3 == 1 and j < 3 * mrope_section[1], the width position if j % 3 == 2 and
// j < 3 * mrope_section[2], else the temporal one. REQUIRES: head_dim even.
blocks::AxesRope InterleavedMrope(int64_t head_dim, float theta,
                                  const std::array<int, 3>& mrope_section);

class Qwen3VL final : public VlModel {
 public:
  // An HF directory. Every tensor's presence and shape is checked; an unused tensor is an
  // error (kUnimplemented).
  static StatusOr<std::unique_ptr<Qwen3VL>> Load(const ModelFiles& files);

  const Qwen3VLConfig& config() const { return cfg_; }
  const ModelSpec& spec() const override { return spec_; }
  size_t WorkspaceBytes(const WorkspaceShape& shape) const override;

  void EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                    float* features, Tracer* tracer) const override;
  // x = embed_tokens(ids), each <|image_pad|> row replaced by the next feature row's merger
  // output (masked_scatter). Errors: an id outside the vocabulary; pads != feature rows.
  Status Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
               int64_t feature_rows, float* x, Tracer* tracer) const override;
  // Taps: decoder.layers.{i} (before DeepStack's addition, as the layer's output), decoder.norm.
  void ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer, int begin,
                     int end) const override;
  void Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const override;
  // Not yet: `ocular quantize` has no GGUF names for Qwen3-VL (kUnimplemented).
  Status ForEachWeight(const WeightVisitor& fn) const override;

 private:
  Qwen3VL() = default;
  Status BindWeights();
  void BuildSpec();
  // x[image rows of each prefill] += DeepStack feature k (_deepstack_process).
  void AddDeepstack(const Exec& ex, const Batch& batch, int k, float* x) const;

  Qwen3VLConfig cfg_;
  ImageConfig image_;
  std::unique_ptr<TensorSource> source_;
  Weights3 w_;
  blocks::AxesRope text_rope_, vision_rope_;
  ModelSpec spec_;
};

}  // namespace ocular::qwen2vl

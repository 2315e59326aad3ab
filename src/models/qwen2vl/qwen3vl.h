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
#include "models/qwen2vl/config3.h"
#include "models/qwen2vl/processor.h"
#include "models/qwen2vl/qwen_vl.h"
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

// Each feature row holds the merger's output, then DeepStack merger k's
// (ModelSpec::feature_width); Embed places the first, AfterLayer adds the others.
class Qwen3VL final : public QwenVlModel<Qwen3VLConfig, Weights3> {
 public:
  // An HF directory, or a GGUF written by `ocular quantize`. Every tensor's presence and shape
  // is checked; an unused tensor is an error (kUnimplemented). `resize`: the processor's
  // bounds the workspace is planned for (LoadImageConfig).
  static StatusOr<std::unique_ptr<Qwen3VL>> Load(const ModelFiles& files,
                                                 const ImageResize& resize = {});

  // The vision tower (vision3.h). Taps: vision.embeddings, vision.layers.{i},
  // vision.deepstack.{k}, projector.
  void EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                    float* features, Tracer* tracer) const override;

 private:
  Qwen3VL() = default;
  Status BindWeights() override;  // and the qkv thirds' views, the RoPE tables
  void BuildSpec() override;
  size_t EncodeBytes(int64_t rows, int threads) const override;
  // Qwen3VLTextModel.forward: after decoder layer k < deepstack, x[image rows of each
  // prefill] += DeepStack feature k (_deepstack_process).
  void AfterLayer(const Exec& ex, const Batch& batch, int k, float* x) const override;
};

}  // namespace ocular::qwen2vl

// Qwen2-VL (model_type "qwen2_vl") and Qwen2.5-VL ("qwen2_5_vl": its ViT's blocks and window
// attention, vision.h; the same decoder) behind the VlModel seam (models/model.h):
//   images  -> the vision tower (vision.h): patches -> ViT with 2-D rotary -> 2x2 merger, one
//              feature row per <|image_pad|>
//   prompt  -> Qwen2 decoder (GQA, q/k/v biases, SwiGLU, RMSNorm) with M-RoPE at the prompt's
//              get_rope_index positions (Prompt::positions, 3 axes); a decode step at cache
//              index i is at i + rope_deltas on every axis
// Reference: transformers 4.57 models/qwen2_vl/modeling_qwen2_vl.py
// (Qwen2VLForConditionalGeneration), models/qwen2_5_vl/modeling_qwen2_5_vl.py
// (Qwen2_5_VLForConditionalGeneration).
#pragma once

#include <memory>

#include "io/model_files.h"
#include "io/tensor_source.h"
#include "models/blocks/rope.h"
#include "models/qwen2vl/config.h"
#include "models/qwen2vl/processor.h"
#include "models/qwen2vl/qwen_vl.h"
#include "models/qwen2vl/text.h"
#include "models/qwen2vl/weights.h"

namespace ocular::qwen2vl {

// Calls fn(hf_name, expected_shape, slot, required) for every tensor of the model in module
// order (the legacy names of the released checkpoints).
Status ForEachTensor(const Qwen2VLConfig& cfg, Weights* w, const TensorVisitor& fn);

// WorkspaceBytes plans encoding for images of the processor's largest size (max_pixels).
class Qwen2VL final : public QwenVlModel<Qwen2VLConfig, Weights> {
 public:
  // An HF directory, or llama.cpp's text GGUF with its mmproj (llamacpp_gguf.h). Every
  // tensor's presence and shape is checked; an unused tensor is an error (kUnimplemented).
  // `resize`: the processor's bounds the workspace is planned for (LoadImageConfig).
  static StatusOr<std::unique_ptr<Qwen2VL>> Load(const ModelFiles& files,
                                                 const ImageResize& resize = {});

  // The vision tower (vision.h). Taps: vision.embeddings, vision.layers.{i}, projector.
  void EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,
                    float* features, Tracer* tracer) const override;

 private:
  Qwen2VL() = default;
  Status BindWeights() override;  // and the qkv thirds' views, the RoPE tables
  void BuildSpec() override;
  size_t EncodeBytes(int64_t rows, int threads) const override;
};

}  // namespace ocular::qwen2vl

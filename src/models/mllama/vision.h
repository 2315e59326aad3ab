// The mllama vision tower and projector (MllamaVisionModel + multi_modal_projector).
// Reference: transformers 4.57 models/mllama/modeling_mllama.py, with the intermediate
// features of Meta's llama-models (llama3/multimodal/model.py ImageTransformer.forward): feature
// i is the *input* of local layer i. transformers 4.56+ takes the output instead; see
// docs/models.md (Llama 3.2 Vision) for why ocular follows Meta.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/exec.h"
#include "models/mllama/config.h"
#include "models/mllama/weights.h"
#include "models/prompt.h"
#include "models/tracer.h"

namespace ocular::mllama {

// Feature rows per image: every tile's P rows (padding tiles included: text rows without an
// image attend to them, as in HF).
int64_t ImageFeatureRows(const VisionConfig& v);

// pixels: the images' values one after the other, each in the layout of processor.h
// PixelFloats; each image's aspect ratio is its grid {1, tiles high, tiles wide}. Writes
// features [n * ImageFeatureRows, H]. Taps: vision.layernorm_pre, vision.layers.{i},
// vision.layernorm_post, vision.global_layers.{i}, vision.output, projector.
void EncodeImages(const Exec& ex, const MllamaConfig& cfg, const Weights& w,
                  std::span<const VisionInput> images, const float* pixels, float* features,
                  Tracer* tracer);

// Arena bytes EncodeImages takes for n images.
size_t EncodeBytes(const MllamaConfig& cfg, int64_t n, int threads);

}  // namespace ocular::mllama

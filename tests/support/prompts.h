// Typed prompts (models/prompt.h) of golden fixtures: their input_ids and pixel values, as the
// family's processor would have made them (tests only).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "models/mllama/config.h"
#include "models/model.h"
#include "models/prompt.h"

namespace ocular::testing_support {

// `ids` with n images of `per_image` pixel values each (pixels: n * per_image floats, the
// family's layout), each spec.image_tokens feature rows and an equal share of the image tokens
// in `ids`. grids: each image's VisionInput::grid (empty: {1, 1, 1}). prefix_len: the
// bidirectional block [0, prefix_len) (-1: the whole prompt; families without one ignore it).
inline std::shared_ptr<Prompt> FixturePrompt(
    const ModelSpec& spec, std::vector<int32_t> ids, const float* pixels = nullptr, int64_t n = 0,
    int64_t per_image = 0, int64_t prefix_len = -1,
    const std::vector<std::array<int32_t, 3>>& grids = {}) {
  auto p = std::make_shared<Prompt>(
      TextPrompt(std::move(ids), prefix_len < 0 ? static_cast<int64_t>(0) : prefix_len));
  if (prefix_len < 0) p->bidirectional = {{0, p->size()}};
  const int64_t image_ids = std::count(p->ids.begin(), p->ids.end(), spec.image_token_id);
  for (int64_t i = 0; i < n; ++i) {
    VisionInput in;
    in.feature_rows = spec.image_tokens;
    in.tokens = image_ids / n;
    in.source = static_cast<int32_t>(i);
    if (!grids.empty()) in.grid = grids[static_cast<size_t>(i)];
    p->AddImage(pixels + i * per_image, per_image, in);
  }
  return p;
}

// The same with pixel values [n, ...] (one image per row), or none.
inline std::shared_ptr<Prompt> FixturePrompt(const ModelSpec& spec, std::vector<int32_t> ids,
                                             const Tensor* pixels, int64_t prefix_len = -1) {
  const int64_t n = pixels != nullptr && !pixels->data.empty() ? pixels->dim(0) : 0;
  return FixturePrompt(spec, std::move(ids), n > 0 ? pixels->data.data() : nullptr, n,
                       n > 0 ? pixels->numel() / n : 0, prefix_len);
}
inline std::shared_ptr<Prompt> FixturePrompt(const ModelSpec& spec, std::vector<int32_t> ids,
                                             const TensorView* pixels, int64_t prefix_len = -1) {
  const int64_t n = pixels != nullptr ? pixels->shape[0] : 0;
  return FixturePrompt(spec, std::move(ids), n > 0 ? pixels->as<float>() : nullptr, n,
                       n > 0 ? pixels->numel() / n : 0, prefix_len);
}

// mllama: pixel_values [n, T, 3, t, t] and aspect_ratio_ids [n] as MllamaImageProcessor gives
// them (each image's grid {1, tiles high, tiles wide} from its aspect ratio id).
inline std::shared_ptr<Prompt> MllamaFixturePrompt(const ModelSpec& spec, std::vector<int32_t> ids,
                                                   const TensorView& pixel_values,
                                                   const TensorView& aspect_ratio_ids) {
  const int64_t n = pixel_values.shape[0];
  const auto ratios = mllama::SupportedAspectRatios(static_cast<int>(pixel_values.shape[1]));
  std::vector<std::array<int32_t, 3>> grids;
  for (int64_t i = 0; i < n; ++i) {
    const auto [high, wide] = ratios.at(static_cast<size_t>(aspect_ratio_ids.as<int64_t>()[i] - 1));
    grids.push_back({1, high, wide});
  }
  return FixturePrompt(spec, std::move(ids), pixel_values.as<float>(), n, pixel_values.numel() / n,
                       0, grids);
}

}  // namespace ocular::testing_support

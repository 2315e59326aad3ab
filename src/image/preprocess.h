// SigLIP-style image preprocessing (PaliGemma): resize, rescale, normalize → float32 [3, H, W].
//
// Parity target: transformers 4.57 SiglipImageProcessor (slow, PIL path;
// src/transformers/models/siglip/image_processing_siglip.py and image_transforms.py):
//   resize     PIL resize of the uint8 image to size (height, width), filter `resample`
//   rescale    float32(float64(v) * rescale_factor)
//   normalize  (x - float32(mean[c])) / float32(std[c]) in float32
//   layout     channels first
// Without rescale, normalize sees float32(v); with neither, the output is the uint8 values.
#pragma once

#include <array>
#include <string>

#include "core/tensor.h"
#include "image/image.h"
#include "image/resize.h"
#include "ocular/status.h"

namespace ocular {

// Fields and defaults of preprocessor_config.json as SiglipImageProcessor reads it.
struct PreprocessConfig {
  bool do_resize = true;
  int height = 224;  // size.height
  int width = 224;   // size.width
  ResampleFilter resample = ResampleFilter::kBicubic;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<double, 3> image_mean = {0.5, 0.5, 0.5};  // IMAGENET_STANDARD_MEAN
  std::array<double, 3> image_std = {0.5, 0.5, 0.5};   // IMAGENET_STANDARD_STD
  // Parsed for completeness (null → false, as in transformers). Preprocess reads Image::rgb,
  // which is PIL's convert("RGB") (alpha dropped): what convert_to_rgb makes of any mode. With
  // null, transformers refuses a non-RGB image instead, and a caller's convert("RGB") (its
  // load_image) gives these same pixels.
  bool do_convert_rgb = false;

  // Sizes in 1..16384, std non-zero, factors finite.
  Status Validate() const;
};

// Parses a preprocessor_config.json; absent fields keep SiglipImageProcessor's defaults,
// unknown fields are ignored. Errors ([image]) name the file and the field.
StatusOr<PreprocessConfig> ParsePreprocessConfig(const std::string& json_text,
                                                 const std::string& origin = "<string>");
StatusOr<PreprocessConfig> LoadPreprocessConfig(const std::string& path);

// pixel_values for one image: float32 [3, height, width] (or [3, image.height, image.width]
// when !do_resize). REQUIRES: config.Validate() is OK and image has pixels.
Tensor Preprocess(const Image& image, const PreprocessConfig& config);

// Preprocess for a vision tower of square `size`-pixel inputs (SigLIP: PaliGemma, Gemma 3).
// Errors: a config that resizes to another shape (kInvalidArgument, tagged `component`).
StatusOr<Tensor> PreprocessSquare(const Image& image, const PreprocessConfig& config, int size,
                                  const char* component);

}  // namespace ocular

// Image resampling, bit-exact to Pillow 11.3's 8-bit Image.resize for BILINEAR and BICUBIC.
//
// Like Pillow: separable (horizontal pass, then vertical), each pass with fixed-point
// coefficients and rounding/clipping to uint8 between the passes; when downscaling, the filter
// support is stretched by the scale factor (antialiasing).
#pragma once

#include "image/image.h"

namespace ocular {

// Values are PIL's Image.Resampling numbers (preprocessor_config.json "resample").
enum class ResampleFilter { kBilinear = 2, kBicubic = 3 };

// Maps a PIL resample number to a supported filter; false for NEAREST, LANCZOS, BOX, HAMMING.
bool ResampleFilterFromPil(int pil_code, ResampleFilter* out);
const char* ResampleFilterName(ResampleFilter f);  // "bilinear", "bicubic"

// Resizes `in` to width x height (aspect ratio not preserved), as
// PIL.Image.Image.resize((width, height), filter) does for an RGB image.
// REQUIRES: in has pixels; 0 < width, height <= 1 << 24 (checked).
Image Resize(const Image& in, int width, int height, ResampleFilter filter);

}  // namespace ocular

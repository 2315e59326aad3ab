// Internal to the image layer: one decoder per format, each returning PIL's convert("RGB") and,
// where the source mode has transparency, convert("RGBA")'s alpha (image.h).
// Every decoder reads the dimensions from the header and calls CheckDimensions before it
// allocates pixels, and reports corrupt or truncated data as kDataLoss.
#pragma once

#include <cstdint>
#include <span>

#include "image/image.h"
#include "ocular/status.h"

namespace ocular::image_internal {

// OK iff 0 < width, 0 < height and width * height <= max_pixels.
Status CheckDimensions(const char* format, int64_t width, int64_t height, int64_t max_pixels);

// Empties image->alpha when every pixel is opaque (decoders fill it, then call this).
void DropOpaqueAlpha(Image* image);

StatusOr<Image> DecodeJpeg(std::span<const uint8_t> data, int64_t max_pixels);
StatusOr<Image> DecodePng(std::span<const uint8_t> data, int64_t max_pixels);
StatusOr<Image> DecodeWebp(std::span<const uint8_t> data, int64_t max_pixels);
StatusOr<Image> DecodeGif(std::span<const uint8_t> data, int64_t max_pixels);
StatusOr<Image> DecodeBmp(std::span<const uint8_t> data, int64_t max_pixels);

}  // namespace ocular::image_internal

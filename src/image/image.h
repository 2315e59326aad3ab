// Image decoding: encoded bytes (JPEG, PNG, WebP, GIF, BMP) → 8-bit RGB, as PIL does it.
//
// Parity target: `PIL.Image.open(f).convert("RGB")` with Pillow 11.3 for the colour, and
// convert("RGBA")'s alpha kept beside it (Image::alpha) for the processors that composite
// (mllama's convert_to_rgb); the others drop it, as convert("RGB") does. Per source mode:
//   RGB / RGBA / LA        colour as is; alpha kept (RGB has none: an RGB PNG's tRNS colour
//                          stays PIL info that no processor reads)
//   L / 1 / LA / P         grey replicated, palette looked up; tRNS (a palette's alphas, a
//                          grey's transparent value) and a GIF's transparent index as alpha
//   16-bit RGB/RGBA/LA PNG the most significant byte of each sample
//   16-bit grey PNG (I;16) min(value, 255) — PIL clips, it does not scale
//   CMYK JPEG              Adobe files are inverted first; then R = k' - k'·c/255 (k' = 255-k)
//   GIF                    first frame only
// EXIF orientation is not applied unless DecodeOptions::exif_rotate (Image.open ignores it).
//
// All inputs are untrusted: errors come back as Status tagged [image], never a crash, and the
// pixel budget is checked from the header before any pixel buffer is allocated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ocular/status.h"

namespace ocular {

// Interleaved 8-bit RGB, row-major: rgb[(y * width + x) * 3 + c], and the alpha the source
// carries, if any: alpha[y * width + x] as PIL's convert("RGBA") makes it; empty when the source
// mode has no transparency or every pixel is opaque. Each family's processor decides what
// alpha means (CompositeOnWhite, or ignore it as convert("RGB") does).
struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
  std::vector<uint8_t> alpha;

  Image() = default;
  Image(int w, int h) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3) {}
  uint8_t* pixel(int x, int y) { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
  const uint8_t* pixel(int x, int y) const {
    return rgb.data() + (static_cast<size_t>(y) * width + x) * 3;
  }
};

// Image.alpha_composite of `image` over an opaque white canvas, then convert("RGB"): mllama's
// convert_to_rgb (transformers 4.57 models/mllama/image_processing_mllama.py) on a non-RGB
// source, with Pillow's integer blend (libImaging/AlphaComposite.c). The result has no alpha;
// an image without alpha comes back unchanged.
Image CompositeOnWhite(const Image& image);

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kGif, kBmp };
const char* ImageFormatName(ImageFormat f);  // "JPEG", "PNG", ...
// Sniffs the magic bytes; kUnknown if none matches.
ImageFormat DetectImageFormat(std::span<const uint8_t> data);

struct DecodeOptions {
  // Images with width * height above this are rejected (kResourceExhausted) before decoding.
  int64_t max_pixels = 50'000'000;
  // Apply the EXIF orientation tag of a JPEG (APP1), PNG (eXIf) or WebP (EXIF chunk), like
  // PIL's ImageOps.exif_transpose. Off by default: transformers' image processors see
  // Image.open(f) pixels; only its load_image helper (pipelines) applies exif_transpose.
  bool exif_rotate = false;
};

// Decodes one image. Errors: kInvalidArgument (unknown format, zero size), kDataLoss (corrupt or
// truncated data), kResourceExhausted (over max_pixels), kUnimplemented (valid but unsupported
// variant, e.g. a BMP with embedded JPEG/PNG or a bitfield layout Pillow refuses).
StatusOr<Image> DecodeImage(std::span<const uint8_t> data, const DecodeOptions& options = {});

// Reads `path` and decodes it; errors name the path.
StatusOr<Image> LoadImage(const std::string& path, const DecodeOptions& options = {});

// Writes `image` as an 8-bit RGB PNG (libpng). REQUIRES: rgb.size() == width * height * 3.
Status WritePng(const std::string& path, const Image& image);

// The EXIF orientation (1..8) from a JPEG's APP1 segment; 1 if absent or unreadable.
int JpegExifOrientation(std::span<const uint8_t> data);
// The same from a PNG's eXIf chunk and from a WebP's EXIF chunk.
int PngExifOrientation(std::span<const uint8_t> data);
int WebpExifOrientation(std::span<const uint8_t> data);

// Applies an EXIF orientation (1..8) the way PIL's ImageOps.exif_transpose does:
// 2 mirror, 3 rotate 180, 4 flip, 5 transpose, 6 rotate 90 clockwise, 7 transverse,
// 8 rotate 90 counter-clockwise. Other values return the image unchanged.
Image ApplyExifOrientation(const Image& image, int orientation);

}  // namespace ocular

// BMP through stb_image (Debian's libstb-dev), BMP support only.
//
// stb_image reads past the end of a memory buffer as zeros instead of failing, so the file size
// implied by the header is checked here first: a truncated BMP is an error, not a black bottom.
// stb does not decode RLE-compressed BMPs (Pillow does); those are reported as kUnimplemented.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#include <stb/stb_image.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "image/codecs.h"

namespace ocular::image_internal {
namespace {

uint32_t U16(const uint8_t* p) { return p[0] | (p[1] << 8); }
uint32_t U32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

struct StbFree {
  void operator()(stbi_uc* p) const { stbi_image_free(p); }
};

}  // namespace

StatusOr<Image> DecodeBmp(std::span<const uint8_t> data, int64_t max_pixels) {
  // BITMAPFILEHEADER (14 bytes), then a DIB header whose first field is its own size.
  if (data.size() < 26) return Error(StatusCode::kDataLoss, "image", "truncated BMP header");
  const uint8_t* p = data.data();
  const int64_t pixel_offset = U32(p + 10);
  const uint32_t dib_size = U32(p + 14);
  int64_t width = 0, height = 0;
  uint32_t bpp = 0, compression = 0;
  if (dib_size == 12) {  // BITMAPCOREHEADER
    width = U16(p + 18);
    height = U16(p + 20);
    bpp = U16(p + 24);
  } else if (dib_size >= 40 && data.size() >= 34) {  // BITMAPINFOHEADER and later versions
    width = static_cast<int32_t>(U32(p + 18));
    height = static_cast<int32_t>(U32(p + 22));
    bpp = U16(p + 28);
    compression = U32(p + 30);
  } else {
    return Error(StatusCode::kDataLoss, "image", "BMP with unknown header size ", dib_size);
  }
  height = std::llabs(height);  // negative: rows stored top-down
  OCULAR_RETURN_IF_ERROR(CheckDimensions("BMP", width, height, max_pixels));
  // 0 = BI_RGB, 3 = BI_BITFIELDS, 6 = BI_ALPHABITFIELDS: uncompressed rows padded to 4 bytes.
  if (compression != 0 && compression != 3 && compression != 6) {
    return Error(StatusCode::kUnimplemented, "image", "BMP compression ", compression,
                 " (RLE/JPEG/PNG in BMP) is not supported");
  }
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32) {
    return Error(StatusCode::kDataLoss, "image", "BMP with ", bpp, " bits per pixel");
  }
  const int64_t stride = (width * bpp + 31) / 32 * 4;
  const int64_t needed = pixel_offset + stride * height;
  if (static_cast<int64_t>(data.size()) < needed) {
    return Error(StatusCode::kDataLoss, "image", "truncated BMP: ", data.size(),
                 " bytes, header needs ", needed);
  }
  if (data.size() > static_cast<size_t>(INT32_MAX)) {
    return Error(StatusCode::kResourceExhausted, "image", "BMP file over 2 GiB");
  }
  int w = 0, h = 0, comp = 0;
  std::unique_ptr<stbi_uc, StbFree> rgb(
      stbi_load_from_memory(p, static_cast<int>(data.size()), &w, &h, &comp, 3));
  if (rgb == nullptr) {
    return Error(StatusCode::kDataLoss, "image", "corrupt BMP: ", stbi_failure_reason());
  }
  if (w != width || h != height) {
    return Error(StatusCode::kDataLoss, "image", "BMP decoded as ", w, "x", h, ", header says ",
                 width, "x", height);
  }
  Image out(w, h);
  std::memcpy(out.rgb.data(), rgb.get(), out.rgb.size());
  return out;
}

}  // namespace ocular::image_internal

// CompositeOnWhite: mllama's convert_to_rgb (transformers 4.57
// models/mllama/image_processing_mllama.py): image.convert("RGBA"), Image.alpha_composite onto
// Image.new("RGBA", size, (255, 255, 255)), convert("RGB").
//
// Pillow's blend (src/libImaging/AlphaComposite.c, ImagingAlphaComposite), with 7 extra bits of
// precision and rounded divisions by 255: for source alpha a > 0 over a destination of alpha da,
//   blend = da * (255 - a), outa255 = a * 255 + blend,
//   coef1 = a * 255 * 255 * 128 / outa255, coef2 = 255 * 128 - coef1,
//   out = div255(src * coef1 + dst * coef2 + (128 << 7)) >> 7, div255(x) = ((x >> 8) + x) >> 8;
// a = 0 keeps the destination. Over opaque white (da = 255, dst = 255) coef1 = a * 128.
#include "image/image.h"

namespace ocular {

Image CompositeOnWhite(const Image& image) {
  Image out(image.width, image.height);
  if (image.alpha.empty()) {
    out.rgb = image.rgb;
    return out;
  }
  constexpr uint32_t kDst = 255, kDstAlpha = 255, kBits = 7;
  for (size_t i = 0; i < image.alpha.size(); ++i) {
    const uint32_t a = image.alpha[i];
    for (int c = 0; c < 3; ++c) {
      uint8_t& o = out.rgb[i * 3 + c];
      if (a == 0) {
        o = kDst;
        continue;
      }
      const uint32_t blend = kDstAlpha * (255 - a);
      const uint32_t outa255 = a * 255 + blend;
      const uint32_t coef1 = a * 255 * 255 * (1u << kBits) / outa255;
      const uint32_t coef2 = 255 * (1u << kBits) - coef1;
      const uint32_t t = image.rgb[i * 3 + c] * coef1 + kDst * coef2 + (0x80u << kBits);
      o = static_cast<uint8_t>((((t >> 8) + t) >> 8) >> kBits);
    }
  }
  return out;
}

}  // namespace ocular

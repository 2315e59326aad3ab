// libFuzzer target: DecodeImage over arbitrary bytes (all five codecs, EXIF parsing), then a
// small resize of whatever decodes. Any crash, sanitizer report or inconsistent Image is a bug.
//
//   CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DOCULAR_FUZZ=ON -DOCULAR_SANITIZE=ON
//   cmake --build build-asan --target image_decode_fuzz
//   build-asan/fuzz/image_decode_fuzz -max_len=65536 corpus/ testdata/images/inputs/
#include <cstdint>
#include <cstdlib>
#include <span>

#include "image/image.h"
#include "image/resize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ocular::DecodeOptions options;
  options.max_pixels = 1'000'000;  // keeps each run fast; the budget check itself is fuzzed too
  options.exif_rotate = size > 0 && (data[size - 1] & 1);
  auto image = ocular::DecodeImage(std::span(data, size), options);
  if (!image.ok()) return 0;
  if (image->width <= 0 || image->height <= 0 ||
      image->rgb.size() != static_cast<size_t>(image->width) * image->height * 3 ||
      int64_t{image->width} * image->height > options.max_pixels) {
    std::abort();
  }
  if (int64_t{image->width} * image->height <= 65536) {
    const ocular::Image small = ocular::Resize(*image, image->width / 2 + 1, image->height / 3 + 1,
                                               ocular::ResampleFilter::kBicubic);
    if (small.rgb.size() != static_cast<size_t>(small.width) * small.height * 3) std::abort();
  }
  return 0;
}

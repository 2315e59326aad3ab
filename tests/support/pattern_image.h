// A synthetic image of any size for tests and benchmarks: a w × h 24-bit BMP (which every
// image decoder of ours reads) whose pixels depend on a seed, so two seeds give two images of
// one size (the same image token count and placeholder ids in every family).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ocular::testing_support {

inline std::vector<uint8_t> PatternBmp(int w, int h, int seed) {
  const uint32_t row = (static_cast<uint32_t>(w) * 3 + 3) & ~3u;
  const uint32_t size = 54 + row * static_cast<uint32_t>(h);
  std::vector<uint8_t> b(size, 0);
  auto put = [&](size_t at, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  b[0] = 'B';
  b[1] = 'M';
  put(2, size, 4);
  put(10, 54, 4);  // pixel data offset
  put(14, 40, 4);  // BITMAPINFOHEADER
  put(18, static_cast<uint32_t>(w), 4);
  put(22, static_cast<uint32_t>(h), 4);
  put(26, 1, 2);   // planes
  put(28, 24, 2);  // bits per pixel
  put(34, row * static_cast<uint32_t>(h), 4);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) {
        b[54 + y * row + x * 3 + c] =
            static_cast<uint8_t>((x * (37 + 50 * seed) + y * 11 * (c + 1) + seed * 91) & 255);
      }
    }
  }
  return b;
}

}  // namespace ocular::testing_support

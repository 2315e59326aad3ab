// Test-only helpers for the image layer: golden fixtures from
// tools/reference/make_image_fixtures.py.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "image/image.h"
#include "io/safetensors.h"

namespace ocular::testing_image {

inline const char kFixtureDir[] = "testdata/images/";

inline const SafetensorsFile& Expected() {
  static const SafetensorsFile* file = [] {
    auto f = SafetensorsFile::Open(std::string(kFixtureDir) + "expected.safetensors");
    if (!f.ok()) {
      std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
      std::abort();
    }
    return new SafetensorsFile(std::move(f).value());
  }();
  return *file;
}

// Names of all tensors starting with `prefix`.
inline std::vector<std::string> TensorsWithPrefix(const SafetensorsFile& f,
                                                  const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& [name, view] : f.tensors()) {
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

// A U8 [H, W, 3] tensor as an Image.
inline Image ImageFromTensor(const TensorView& t) {
  EXPECT_EQ(t.dtype, DType::kU8);
  EXPECT_EQ(t.shape.size(), 3u);
  Image im(static_cast<int>(t.dim(0) == 0 ? 0 : t.dim(1)), static_cast<int>(t.dim(0)));
  std::memcpy(im.rgb.data(), t.data, im.rgb.size());
  return im;
}

// Byte equality with a diagnostic naming the first differing pixel.
inline ::testing::AssertionResult SameImage(const Image& got, const TensorView& want) {
  if (want.shape.size() != 3 || got.height != want.dim(0) || got.width != want.dim(1) ||
      want.dim(2) != 3) {
    return ::testing::AssertionFailure() << "size " << got.width << "x" << got.height
                                         << ", expected shape " << ShapeString(want.shape);
  }
  const uint8_t* w = want.as<uint8_t>();
  size_t diffs = 0, first = 0;
  int max_diff = 0;
  for (size_t i = 0; i < got.rgb.size(); ++i) {
    const int d = std::abs(got.rgb[i] - w[i]);
    if (d != 0 && diffs++ == 0) first = i;
    max_diff = std::max(max_diff, d);
  }
  if (diffs == 0) return ::testing::AssertionSuccess();
  const size_t px = first / 3;
  return ::testing::AssertionFailure()
         << diffs << " of " << got.rgb.size() << " bytes differ (max " << max_diff
         << "); first at x=" << px % got.width << " y=" << px / got.width << " c=" << first % 3
         << ": got " << int(got.rgb[first]) << ", PIL " << int(w[first]);
}

}  // namespace ocular::testing_image

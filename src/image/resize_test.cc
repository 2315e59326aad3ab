// Resize: byte-identical to PIL's Image.resize for every fixture case (PIL's own decode as input,
// so a decoder difference cannot hide or cause a resize failure).
#include "image/resize.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "image/test_util.h"

namespace ocular {
namespace {

using testing_image::Expected;
using testing_image::ImageFromTensor;
using testing_image::SameImage;
using testing_image::TensorsWithPrefix;

TEST(ResizeTest, EveryCaseMatchesPil) {
  const auto names = TensorsWithPrefix(Expected(), "resize/");
  ASSERT_GE(names.size(), 200u) << "fixtures missing: run make_image_fixtures";
  int up = 0, down = 0;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    // resize/<file>/<filter>/<W>x<H>
    const size_t filter_at = name.find('/', 7), size_at = name.rfind('/');
    const std::string file = name.substr(7, filter_at - 7);
    const std::string filter = name.substr(filter_at + 1, size_at - filter_at - 1);
    int width = 0, height = 0;
    ASSERT_EQ(std::sscanf(name.c_str() + size_at + 1, "%dx%d", &width, &height), 2);
    ASSERT_TRUE(filter == "bicubic" || filter == "bilinear");
    const Image in = ImageFromTensor(*Expected().Find("decode/" + file));
    const Image out =
        Resize(in, width, height,
               filter == "bicubic" ? ResampleFilter::kBicubic : ResampleFilter::kBilinear);
    EXPECT_TRUE(SameImage(out, *Expected().Find(name)));
    (width * height > in.width * in.height ? up : down) += 1;
  }
  EXPECT_GT(up, 20);  // the fixtures cover both directions
  EXPECT_GT(down, 20);
}

TEST(ResizeTest, SameSizeIsACopy) {
  const Image in = ImageFromTensor(*Expected().Find("decode/noise_61x67.png"));
  const Image out = Resize(in, 61, 67, ResampleFilter::kBicubic);
  EXPECT_EQ(out.rgb, in.rgb);
}

TEST(ResizeTest, ConstantImageStaysConstant) {
  // Normalized weights sum to 1 in fixed point (up to rounding): no drift, no ringing.
  Image in(13, 7);
  for (size_t i = 0; i < in.rgb.size(); ++i)
    in.rgb[i] = static_cast<uint8_t>(i % 3 == 0 ? 200 : 17);
  for (auto filter : {ResampleFilter::kBilinear, ResampleFilter::kBicubic}) {
    for (auto [w, h] : {std::pair{1, 1}, {5, 3}, {40, 29}, {13, 50}}) {
      const Image out = Resize(in, w, h, filter);
      for (size_t i = 0; i < out.rgb.size(); ++i) {
        ASSERT_EQ(out.rgb[i], i % 3 == 0 ? 200 : 17)
            << ResampleFilterName(filter) << " " << w << "x" << h << " byte " << i;
      }
    }
  }
}

TEST(ResizeTest, PilFilterNumbers) {
  ResampleFilter f;
  EXPECT_TRUE(ResampleFilterFromPil(2, &f));
  EXPECT_EQ(f, ResampleFilter::kBilinear);
  EXPECT_TRUE(ResampleFilterFromPil(3, &f));
  EXPECT_EQ(f, ResampleFilter::kBicubic);
  for (int unsupported : {0, 1, 4, 5, -1, 99}) EXPECT_FALSE(ResampleFilterFromPil(unsupported, &f));
}

}  // namespace
}  // namespace ocular

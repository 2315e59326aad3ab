// Preprocess: pixel_values equal to transformers' SiglipImageProcessor (≤ 1e-6 abs; in practice
// bit-exact), and config parsing with SiglipImageProcessor's defaults and clear errors.
#include "image/preprocess.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "image/test_util.h"

namespace ocular {
namespace {

using testing_image::Expected;
using testing_image::ImageFromTensor;
using testing_image::kFixtureDir;

TEST(PreprocessTest, PixelValuesMatchTransformers) {
  auto file = SafetensorsFile::Open(std::string(kFixtureDir) + "pixel_values.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_GE(file->tensors().size(), 8u);
  for (const auto& [name, want] : file->tensors()) {
    SCOPED_TRACE(name);
    // pixel_values/<file>/<config>
    const size_t split = name.rfind('/');
    const std::string image_file = name.substr(13, split - 13),
                      config_name = name.substr(split + 1);
    auto config =
        LoadPreprocessConfig(std::string(kFixtureDir) + "configs/" + config_name + ".json");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    const Tensor got =
        Preprocess(ImageFromTensor(*Expected().Find("decode/" + image_file)), *config);
    ASSERT_EQ(got.shape, want.shape);
    ASSERT_EQ(want.dtype, DType::kF32);
    double max_diff = 0;
    int64_t first_diff = -1;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double d = std::fabs(double(got.data[i]) - want.as<float>()[i]);
      if (d > 0 && first_diff < 0) first_diff = i;
      max_diff = std::max(max_diff, d);
    }
    EXPECT_LE(max_diff, 1e-6) << "first difference at flat index " << first_diff;
    EXPECT_EQ(max_diff, 0.0) << "not bit-exact (still within tolerance)";
  }
}

TEST(PreprocessConfigTest, EmptyObjectGivesSiglipDefaults) {
  auto config = ParsePreprocessConfig("{}");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->do_resize);
  EXPECT_EQ(config->height, 224);
  EXPECT_EQ(config->width, 224);
  EXPECT_EQ(config->resample, ResampleFilter::kBicubic);
  EXPECT_TRUE(config->do_rescale);
  EXPECT_EQ(config->rescale_factor, 1.0 / 255.0);
  EXPECT_TRUE(config->do_normalize);
  EXPECT_EQ(config->image_mean, (std::array<double, 3>{0.5, 0.5, 0.5}));
  EXPECT_EQ(config->image_std, (std::array<double, 3>{0.5, 0.5, 0.5}));
}

TEST(PreprocessConfigTest, PaliGemmaConfig) {
  auto config = LoadPreprocessConfig(std::string(kFixtureDir) + "configs/paligemma_448.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->height, 448);
  EXPECT_EQ(config->width, 448);
  EXPECT_FALSE(config->do_convert_rgb);  // null in the file
}

TEST(PreprocessConfigTest, Errors) {
  struct Case {
    const char* json;
    StatusCode code;
    const char* mentions;
  };
  const Case cases[] = {
      {"not json", StatusCode::kDataLoss, "invalid JSON at line 1, column 2"},
      {"[1, 2]", StatusCode::kDataLoss, "not a JSON object"},
      {R"({"resample": 0})", StatusCode::kUnimplemented, "resample"},
      {R"({"resample": "bicubic"})", StatusCode::kDataLoss, "resample"},
      {R"({"size": {"shortest_edge": 224}})", StatusCode::kUnimplemented, "shortest_edge"},
      {R"({"size": {"height": 0, "width": 224}})", StatusCode::kDataLoss, "size"},
      {R"({"size": {"height": 100000, "width": 224}})", StatusCode::kDataLoss, "size"},
      {R"({"image_std": [0.5, 0, 0.5]})", StatusCode::kDataLoss, "image_std"},
      {R"({"image_mean": [0.5, 0.5]})", StatusCode::kDataLoss, "image_mean"},
      {R"({"do_resize": "yes"})", StatusCode::kDataLoss, "do_resize"},
      {R"({"rescale_factor": "1/255"})", StatusCode::kDataLoss, "rescale_factor"},
      {R"({"image_mean": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]})",
       StatusCode::kDataLoss, "got [0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,..."},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    auto config = ParsePreprocessConfig(c.json, "test.json");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), c.code) << config.status().ToString();
    EXPECT_NE(config.status().message().find(c.mentions), std::string::npos)
        << config.status().message();
    EXPECT_EQ(config.status().message().rfind("[image] ", 0), 0u);
  }
  auto missing = LoadPreprocessConfig("testdata/images/configs/missing.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(PreprocessTest, ScalarMeanAndNoResize) {
  auto config =
      ParsePreprocessConfig(R"({"do_resize": false, "image_mean": 0.25, "image_std": 2})");
  ASSERT_TRUE(config.ok());
  Image im(2, 1);
  im.rgb = {0, 255, 51, 102, 153, 204};
  const Tensor t = Preprocess(im, *config);
  ASSERT_EQ(t.shape, (Shape{3, 1, 2}));
  // Channel-first: t[c][0][x] from pixel x, channel c.
  EXPECT_FLOAT_EQ(t.data[0], (0.0f - 0.25f) / 2.0f);
  EXPECT_FLOAT_EQ(t.data[1], (static_cast<float>(102 / 255.0) - 0.25f) / 2.0f);
}

}  // namespace
}  // namespace ocular

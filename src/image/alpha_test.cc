// Transparency: every way a file carries alpha decodes to PIL's convert("RGB") plus
// convert("RGBA")'s alpha, CompositeOnWhite is mllama's convert_to_rgb bit for bit, and
// SiglipImageProcessor and Gemma3ImageProcessor (convert("RGB"): alpha dropped) see the same
// pixels as Preprocess.
// Fixtures: tools/reference/make_alpha_fixtures.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "image/image.h"
#include "image/preprocess.h"
#include "io/safetensors.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

constexpr char kDir[] = "testdata/golden/alpha/";

// The source files of the fixture (not its expected/ outputs, not the composite table).
std::vector<std::string> Sources() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir)) {
    if (e.is_regular_file() && e.path().filename() != "composite.png") {
      out.push_back(e.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Stem(const std::string& file) { return file.substr(0, file.find('.')); }

// The alpha plane with empty read as opaque.
std::vector<uint8_t> AlphaOf(const Image& image) {
  if (!image.alpha.empty()) return image.alpha;
  return std::vector<uint8_t>(static_cast<size_t>(image.width) * image.height, 255);
}

TEST(AlphaTest, EveryTransparentSourceKeepsPilsColourAndAlpha) {
  const std::vector<std::string> files = Sources();
  ASSERT_GE(files.size(), 12u);
  int with_alpha = 0;
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    auto got = LoadImage(kDir + file);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const std::string expected = std::string(kDir) + "expected/" + Stem(file);
    auto rgb = LoadImage(expected + ".rgb.png");
    ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
    ASSERT_EQ(got->width, rgb->width);
    ASSERT_EQ(got->height, rgb->height);
    EXPECT_EQ(got->rgb, rgb->rgb) << "convert(\"RGB\") differs";
    if (!fs::exists(expected + ".alpha.png")) {  // mode "RGB": no alpha at all
      EXPECT_TRUE(got->alpha.empty());
      continue;
    }
    auto alpha = LoadImage(expected + ".alpha.png");  // "L", replicated into rgb
    ASSERT_TRUE(alpha.ok()) << alpha.status().ToString();
    std::vector<uint8_t> want(alpha->rgb.size() / 3);
    for (size_t i = 0; i < want.size(); ++i) want[i] = alpha->rgb[i * 3];
    EXPECT_EQ(AlphaOf(*got), want) << "convert(\"RGBA\")'s alpha differs";
    with_alpha += !got->alpha.empty();
  }
  EXPECT_GE(with_alpha, 10);  // all but the opaque RGBA and the RGB with tRNS
}

TEST(AlphaTest, CompositeOnWhiteIsMllamasConvertToRgb) {
  std::vector<std::string> files = Sources();
  files.push_back("composite.png");  // every (value, alpha) pair
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    auto image = LoadImage(kDir + file);
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    auto want = LoadImage(std::string(kDir) + "expected/" + Stem(file) + ".mllama.png");
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const Image got = CompositeOnWhite(*image);
    EXPECT_TRUE(got.alpha.empty());
    EXPECT_EQ(got.rgb, want->rgb);
  }
}

TEST(AlphaTest, SiglipAndGemma3ImageProcessorsDropAlpha) {
  auto fx = SafetensorsFile::Open("testdata/golden/alpha.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().ToString();
  PreprocessConfig c;
  c.height = c.width = std::stoi(fx->metadata().at("siglip_size"));
  c.resample = ResampleFilter::kBicubic;  // resample 3, mean / std 0.5: the defaults
  int checked = 0;
  for (const std::string& file : Sources()) {
    SCOPED_TRACE(file);
    const TensorView* want = fx->Find(Stem(file) + "/siglip/pixel_values");
    ASSERT_NE(want, nullptr);
    auto image = LoadImage(kDir + file);
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    const Tensor got = Preprocess(*image, c);
    ASSERT_EQ(got.numel(), want->numel());
    int64_t differ = 0;
    for (int64_t i = 0; i < got.numel(); ++i) differ += got.data[i] != want->as<float>()[i];
    EXPECT_EQ(differ, 0);
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

}  // namespace
}  // namespace ocular

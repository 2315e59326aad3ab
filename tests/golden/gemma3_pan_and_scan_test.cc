// Gemma 3's pan-and-scan against transformers 4.57 (fixtures: tools/reference/make_gemma3.py):
// the crop grids of Gemma3ImageProcessor.pan_and_scan, Gemma3Processor's prompt rewrite, and
// whole runs from image files (the pas_* goldens), plus what is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "models/gemma3/pan_and_scan.h"
#include "models/registry.h"
#include "ocular/engine.h"
#include "support/fixture.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<int32_t> Ids(const TensorView& t) {
  std::vector<int32_t> ids(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) ids[i] = static_cast<int32_t>(t.as<int64_t>()[i]);
  return ids;
}

// A copy of testdata/tiny/gemma3 whose preprocessor_config.json has `from` replaced by `to`.
class EditedCheckpoint {
 public:
  EditedCheckpoint(const std::string& from, const std::string& to)
      : dir_(fs::temp_directory_path() /
             ("ocular_g3_pas_" + std::to_string(::getpid()) + "_" + std::to_string(++count_))) {
    fs::create_directories(dir_);
    for (const auto& e : fs::directory_iterator("testdata/tiny/gemma3")) {
      fs::copy_file(e.path(), dir_ / e.path().filename(), fs::copy_options::overwrite_existing);
    }
    std::string json = ReadText(dir_ / "preprocessor_config.json");
    found_ = json.find(from) != std::string::npos;
    if (found_) json.replace(json.find(from), from.size(), to);
    std::ofstream(dir_ / "preprocessor_config.json") << json;
  }
  ~EditedCheckpoint() { fs::remove_all(dir_); }
  std::string path() const { return dir_.string(); }
  bool found() const { return found_; }

 private:
  static inline int count_ = 0;
  fs::path dir_;
  bool found_ = false;
};

// Every grid of testdata/golden/gemma3_pan_and_scan_grids.json: the same crops, in the same
// order, as transformers cuts them; a grid transformers would slice empty is refused.
TEST(PanAndScanTest, CropGridsMatchGemma3ImageProcessor) {
  const auto grids =
      nlohmann::json::parse(ReadText("testdata/golden/gemma3_pan_and_scan_grids.json"));
  ASSERT_GE(grids.size(), 15u);
  int cropped = 0;
  for (const auto& g : grids) {
    const int w = g["width"], h = g["height"];
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    gemma3::PanAndScanParams p;
    p.min_crop_size = g["min_crop_size"];
    p.max_num_crops = g["max_num_crops"];
    p.min_ratio_to_activate = g["min_ratio_to_activate"];
    auto crops = gemma3::PanAndScanCrops(w, h, p);
    if (g["crops"].is_string()) {
      ASSERT_FALSE(crops.ok());
      EXPECT_EQ(crops.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    ASSERT_TRUE(crops.ok()) << crops.status().ToString();
    ASSERT_EQ(crops->size(), g["crops"].size());
    for (size_t i = 0; i < crops->size(); ++i) {
      const auto& want = g["crops"][i];
      const gemma3::CropRect& r = (*crops)[i];
      EXPECT_EQ(std::vector<int>({r.x, r.y, r.width, r.height}),
                std::vector<int>({want[0], want[1], want[2], want[3]}))
          << "crop " << i;
    }
    cropped += !crops->empty();
  }
  EXPECT_GE(cropped, 10);
}

TEST(PanAndScanTest, CropsCopyTheirPixelsAndMarkersAreRewrittenAsGemma3Processor) {
  Image image(5, 3);
  for (size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = static_cast<uint8_t>(i);
  const Image crop = gemma3::CropImage(image, {2, 1, 3, 2});
  ASSERT_EQ(crop.width, 3);
  ASSERT_EQ(crop.height, 2);
  EXPECT_EQ(crop.pixel(0, 0)[0], image.pixel(2, 1)[0]);
  EXPECT_EQ(crop.pixel(2, 1)[2], image.pixel(4, 2)[2]);
  // processing_gemma3.py: the marker of an image with crops becomes this sentence.
  EXPECT_EQ(gemma3::InsertCropMarkers("a <start_of_image> b <start_of_image> c", {2, 0}),
            "a Here is the original image <start_of_image> and here are some crops to help you "
            "see better <start_of_image> <start_of_image> b <start_of_image> c");
}

// `ocular run --pan-and-scan` on files: the prompt ids, pixels and greedy tokens of
// transformers' processor(..., do_pan_and_scan=True) and generate; off gives the plain case.
TEST(PanAndScanTest, EngineRunsGiveTransformersTokens) {
  auto engine = Engine::Load("testdata/tiny/gemma3", EngineOptions{.threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  for (const char* name : {"pas_photo", "pas_three", "three"}) {
    SCOPED_TRACE(name);
    auto taps =
        fixture::GoldenTaps::Open(std::string("testdata/golden/gemma3/") + name + ".safetensors");
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    const auto& meta = taps->file().metadata();
    std::vector<ImageInput> images;
    std::stringstream names(meta.at("images"));
    for (std::string n; std::getline(names, n, ',');) {
      images.emplace_back("testdata/golden/inputs/" + n + ".png");
    }
    GenerateOptions o;
    o.max_tokens = 16;
    o.stop_at_eos = false;
    o.pan_and_scan = meta.count("pan_and_scan") > 0;
    auto r = (*engine)->Generate(images, meta.at("prompt"), o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->prompt_ids, Ids(*taps->file().Find("input_ids")));
    EXPECT_EQ(r->output_ids, Ids(*taps->file().Find("generated_ids")));
    ASSERT_EQ(r->image_sizes.size(), images.size());  // the inputs' sizes, not the crops'
  }
}

// do_pan_and_scan: true in preprocessor_config.json is the checkpoint's default (transformers'
// Gemma3Processor ignores the key); a request still turns it off.
TEST(PanAndScanTest, ConfigDefaultAndRequestOverride) {
  EditedCheckpoint on("\"do_pan_and_scan\": false", "\"do_pan_and_scan\": true");
  ASSERT_TRUE(on.found());
  auto engine = Engine::Load(on.path(), EngineOptions{.threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto pas = fixture::GoldenTaps::Open("testdata/golden/gemma3/pas_photo.safetensors");
  auto plain = fixture::GoldenTaps::Open("testdata/golden/gemma3/photo.safetensors");
  ASSERT_TRUE(pas.ok() && plain.ok());
  const std::vector<ImageInput> images = {ImageInput("testdata/golden/inputs/photo.png")};
  GenerateOptions o;
  o.max_tokens = 4;
  o.stop_at_eos = false;
  auto by_default = (*engine)->Generate(images, pas->file().metadata().at("prompt"), o);
  ASSERT_TRUE(by_default.ok()) << by_default.status().ToString();
  EXPECT_EQ(by_default->prompt_ids, Ids(*pas->file().Find("input_ids")));
  o.pan_and_scan = false;
  auto off = (*engine)->Generate(images, plain->file().metadata().at("prompt"), o);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->prompt_ids, Ids(*plain->file().Find("input_ids")));
}

TEST(PanAndScanTest, RefusesBadParametersAndOtherFamilies) {
  const std::pair<const char*, const char*> bad[] = {
      {"\"pan_and_scan_min_crop_size\": 16", "\"pan_and_scan_min_crop_size\": 0"},
      {"\"pan_and_scan_max_num_crops\": 3", "\"pan_and_scan_max_num_crops\": \"3\""},
      {"\"pan_and_scan_min_ratio_to_activate\": 1.2", "\"pan_and_scan_min_ratio_to_activate\": -1"},
      {"\"do_pan_and_scan\": false", "\"do_pan_and_scan\": 1"},
  };
  for (const auto& [from, to] : bad) {
    SCOPED_TRACE(to);
    EditedCheckpoint ck(from, to);
    ASSERT_TRUE(ck.found());
    auto m = LoadModel(ck.path());
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kDataLoss) << m.status().ToString();
    EXPECT_NE(m.status().message().find("preprocessor_config.json"), std::string::npos);
  }
  // Families without pan-and-scan refuse the request instead of ignoring it.
  for (const char* dir : {"testdata/tiny/pg1", "testdata/tiny/mllama"}) {
    SCOPED_TRACE(dir);
    auto engine = Engine::Load(dir, EngineOptions{.threads = 2});
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    GenerateOptions o;
    o.max_tokens = 2;
    o.pan_and_scan = true;
    const std::string prompt =
        std::string(dir).ends_with("mllama") ? "<|image|>caption" : "caption en";
    auto r = (*engine)->Generate({ImageInput("testdata/golden/inputs/photo.png")}, prompt, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find("pan-and-scan"), std::string::npos);
  }
}

}  // namespace
}  // namespace ocular

// Parity of the mask decoder with the torch reference (tools/reference/make_seg_fixtures.py,
// testdata/seg): logits within 1e-5 relative error, masks in the box identical, for random
// weights of the real shapes (vae-full.npz), a reduced-width variant (vae-small.*) and the trained
// shapes-world VAE of the demo model (vae-shapes.npz, tools/demo_model/vqvae.py).
#include "tasks/mask_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "io/npz.h"
#include "io/safetensors.h"
#include "tasks/detection.h"

namespace ocular {
namespace {

std::unique_ptr<MaskDecoder> LoadOrDie(const std::string& path) {
  auto d = MaskDecoder::Load(path);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(*d) : nullptr;
}

// The file at `path`, or "" when it cannot be read (the checks on it then fail).
std::string ReadAll(const std::string& path) {
  StatusOr<std::string> bytes = ReadFileToString(path);
  return bytes.ok() ? std::move(*bytes) : std::string();
}

// max |a − b| / max |b| over the 64×64 logits of every fixture row.
TEST(MaskDecoder, LogitsMatchTheTorchReference) {
  auto ref = SafetensorsFile::Open("testdata/seg/logits.safetensors");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (const std::string variant : {"full", "small", "shapes"}) {
    auto dec = LoadOrDie("testdata/seg/vae-" + variant + ".npz");
    ASSERT_NE(dec, nullptr);
    EXPECT_EQ(dec->codebook_size(), 128);
    EXPECT_EQ(dec->mask_size(), 64);
    const TensorView* codes = ref->Find(variant + ".codes");
    const TensorView* logits = ref->Find(variant + ".logits");
    ASSERT_NE(codes, nullptr);
    ASSERT_NE(logits, nullptr);
    ASSERT_EQ(logits->shape, (Shape{codes->dim(0), 64, 64}));
    double max_err = 0, max_ref = 0;
    int sign_flips = 0;
    for (int64_t r = 0; r < codes->dim(0); ++r) {
      std::vector<int> c(16);
      for (int k = 0; k < 16; ++k) c[k] = static_cast<int>(codes->as<int64_t>()[r * 16 + k]);
      auto got = dec->DecodeLogits(c);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->size(), 64u * 64u);
      const float* want = logits->as<float>() + r * 64 * 64;
      for (size_t i = 0; i < got->size(); ++i) {
        max_err = std::max(max_err, std::fabs(double((*got)[i]) - want[i]));
        max_ref = std::max(max_ref, std::fabs(double(want[i])));
        // Thresholded 64×64 masks agree wherever the reference is not within rounding of 0.
        if (std::fabs(want[i]) > 1e-5 && (((*got)[i] > 0) != (want[i] > 0))) ++sign_flips;
      }
    }
    const double rel = max_err / max_ref;
    std::printf("[seg parity] %s: %lld code rows, max abs err %.3g, rel err %.3g\n",
                variant.c_str(), static_cast<long long>(codes->dim(0)), max_err, rel);
    EXPECT_LE(rel, 1e-5) << variant;
    EXPECT_EQ(sign_flips, 0) << variant;
    RecordProperty(variant + "_rel_err", std::to_string(rel));
  }
}

// The answer strings of cases.json → ParseDetections → AddMasks → the reference's boxes and
// COCO RLE masks, pixel for pixel.
TEST(MaskDecoder, MasksInTheBoxMatchTheReferenceExactly) {
  std::ifstream f("testdata/seg/cases.json");
  ASSERT_TRUE(f) << "testdata/seg/cases.json";
  const auto cases = nlohmann::json::parse(f);
  for (const auto& [variant, c] : cases["variants"].items()) {
    auto dec = LoadOrDie("testdata/seg/vae-" + variant + ".npz");
    ASSERT_NE(dec, nullptr);
    const int w = c["image"][0], h = c["image"][1];
    std::vector<Detection> dets = ParseDetections(c["answer"].get<std::string>(), w, h);
    ASSERT_EQ(dets.size(), c["objects"].size()) << variant;
    EXPECT_EQ(dec->AddMasks(&dets, w, h), 0);
    int masks = 0;
    for (size_t i = 0; i < dets.size(); ++i) {
      const auto& want = c["objects"][i];
      const Detection& d = dets[i];
      SCOPED_TRACE(variant + " object " + std::to_string(i));
      EXPECT_EQ(d.label, want["label"].get<std::string>());
      EXPECT_EQ(std::vector<int>(d.loc.begin(), d.loc.end()), want["loc"].get<std::vector<int>>());
      if (!want.contains("seg")) {
        EXPECT_TRUE(d.seg.empty());
        EXPECT_FALSE(d.mask.has_value());
        continue;
      }
      EXPECT_EQ(d.seg, want["seg"].get<std::vector<int>>());
      if (!want.contains("mask")) {
        EXPECT_FALSE(d.mask.has_value());  // an inverted box: no mask, as big_vision
        continue;
      }
      ASSERT_TRUE(d.mask.has_value());
      ++masks;
      const auto box = want["pixel_box"].get<std::vector<int>>();
      EXPECT_EQ(d.mask->x0, box[0]);
      EXPECT_EQ(d.mask->y0, box[1]);
      EXPECT_EQ(d.mask->x0 + d.mask->width, box[2]);
      EXPECT_EQ(d.mask->y0 + d.mask->height, box[3]);
      EXPECT_EQ(d.mask->area(), want["area"].get<int64_t>());
      EXPECT_EQ(MaskToCocoRle(*d.mask), want["mask"]["counts"].get<std::vector<int64_t>>());
    }
    EXPECT_EQ(masks, 2) << variant;
  }
}

// The safetensors copy gives the same decoder as the NPZ, bit for bit.
TEST(MaskDecoder, SafetensorsCopyDecodesLikeTheNpz) {
  // The committed small copy (written by safetensors.numpy) ...
  auto npz_small = LoadOrDie("testdata/seg/vae-small.npz");
  auto st_small = LoadOrDie("testdata/seg/vae-small.safetensors");
  // ... and a full-shape copy written here from the NPZ's arrays.
  auto npz = NpzFile::Open("testdata/seg/vae-full.npz");
  ASSERT_TRUE(npz.ok()) << npz.status().ToString();
  std::vector<NamedTensor> tensors;
  for (const auto& [name, a] : npz->arrays()) tensors.push_back({name, a.view()});
  const std::string path = testing::TempDir() + "vae-full-copy.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto npz_full = LoadOrDie("testdata/seg/vae-full.npz");
  auto st_full = LoadOrDie(path);
  ASSERT_TRUE(npz_small && st_small && npz_full && st_full);
  const std::vector<int> codes = {0, 5, 17, 127, 64, 3, 99, 12, 1, 2, 3, 4, 120, 121, 7, 8};
  EXPECT_EQ(*npz_small->DecodeLogits(codes), *st_small->DecodeLogits(codes));
  EXPECT_EQ(*npz_full->DecodeLogits(codes), *st_full->DecodeLogits(codes));
}

TEST(MaskDecoder, RefusesBadCodes) {
  auto dec = LoadOrDie("testdata/seg/vae-small.npz");
  ASSERT_NE(dec, nullptr);
  EXPECT_EQ(dec->DecodeLogits(std::vector<int>(15, 0)).status().code(),
            StatusCode::kInvalidArgument);
  std::vector<int> codes(16, 0);
  codes[3] = 128;
  EXPECT_EQ(dec->DecodeLogits(codes).status().code(), StatusCode::kInvalidArgument);
  codes[3] = -1;
  EXPECT_EQ(dec->DecodeLogits(codes).status().code(), StatusCode::kInvalidArgument);
  // Model output with a code past the codebook: that object gets no mask, the others do.
  std::string answer = "<loc0000><loc0000><loc0500><loc0500>";
  for (int k = 0; k < 16; ++k) answer += k == 5 ? "<seg200>" : "<seg001>";
  answer += " a ; <loc0000><loc0000><loc0500><loc0500>";
  for (int k = 0; k < 16; ++k) answer += "<seg001>";
  answer += " b";
  auto dets = ParseDetections(answer, 100, 100);
  ASSERT_EQ(dets.size(), 2u);
  EXPECT_EQ(dec->AddMasks(&dets, 100, 100), 1);
  EXPECT_FALSE(dets[0].mask.has_value());
  EXPECT_TRUE(dets[1].mask.has_value());
}

// name → views of vae-small.npz, for editing.
struct SmallTensors {
  NpzFile npz;
  std::map<std::string, TensorView> views;
};
SmallTensors LoadSmall() {
  auto npz = NpzFile::Open("testdata/seg/vae-small.npz");
  EXPECT_TRUE(npz.ok());
  SmallTensors t{std::move(*npz), {}};
  for (const auto& [name, a] : t.npz.arrays()) t.views.emplace(name, a.view());
  return t;
}

TEST(MaskDecoder, RefusesInconsistentCheckpointsWithClearErrors) {
  const SmallTensors t = LoadSmall();
  ASSERT_TRUE(BindMaskDecoder(t.views, "vae.npz").ok());
  struct Case {
    const char* what;
    std::function<void(std::map<std::string, TensorView>*)> edit;
    StatusCode code;
    const char* message;
  };
  static const int64_t ints[4] = {0, 0, 0, 0};
  const Case cases[] = {
      {"missing", [](auto* m) { m->erase("decoder.6.weight"); }, StatusCode::kDataLoss,
       "tensor 'decoder.6.weight' is missing"},
      {"reshaped",
       [](auto* m) {
         (*m)["decoder.8.weight"].shape = {16, 16, 4, 2};  // same bytes, wrong shape
       },
       StatusCode::kDataLoss,
       "'decoder.8.weight' has shape [16,16,4,2], the mask decoder expects [16,8,4,4]"},
      {"bias", [](auto* m) { (*m)["decoder.0.bias"].shape = {31}; }, StatusCode::kDataLoss,
       "'decoder.0.bias' has shape [31]"},
      {"unknown", [](auto* m) { m->emplace("decoder.14.weight", (*m)["decoder.12.bias"]); },
       StatusCode::kUnimplemented, "'decoder.14.weight' is not part of big_vision's mask decoder"},
      {"int codebook",
       [](auto* m) {
         (*m)["_vq_vae._embedding"] = TensorView{ints, DType::kI64, {2, 2}};
       },
       StatusCode::kUnimplemented, "is I64"},
      {"codebook rank", [](auto* m) { (*m)["_vq_vae._embedding"].shape = {128 * 64}; },
       StatusCode::kDataLoss, "expected 2 dimensions"},
      {"huge codebook",
       [](auto* m) {
         (*m)["_vq_vae._embedding"].shape = {2048, 4};
       },
       StatusCode::kDataLoss, "at most 1000"},
  };
  for (const Case& c : cases) {
    std::map<std::string, TensorView> views = t.views;
    c.edit(&views);
    auto w = BindMaskDecoder(views, "vae.npz");
    ASSERT_FALSE(w.ok()) << c.what;
    EXPECT_EQ(w.status().code(), c.code) << c.what << ": " << w.status().ToString();
    EXPECT_NE(w.status().message().find(c.message), std::string::npos)
        << c.what << ": " << w.status().ToString();
    EXPECT_EQ(w.status().message().rfind("[seg] vae.npz: ", 0), 0u) << w.status().ToString();
  }
  // The rest of the VAE is ignored (the real vae-oid.npz holds the encoder too).
  std::map<std::string, TensorView> extra = t.views;
  extra.emplace("_vq_vae._ema_w", t.views.at("_vq_vae._embedding"));
  extra.emplace("encoder.10.weight", t.views.at("decoder.0.weight"));
  extra.emplace("step", t.views.at("decoder.0.bias"));
  EXPECT_TRUE(BindMaskDecoder(extra, "vae.npz").ok());
}

TEST(MaskDecoder, CorruptFilesAreErrorsNotCrashes) {
  const std::string dir = testing::TempDir();
  EXPECT_EQ(MaskDecoder::Load(dir + "none.npz").status().code(), StatusCode::kNotFound);
  const std::string bytes = ReadAll("testdata/seg/vae-small.npz");
  ASSERT_FALSE(bytes.empty());
  std::ofstream(dir + "cut.npz", std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  auto cut = MaskDecoder::Load(dir + "cut.npz");
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss) << cut.status().ToString();
  std::ofstream(dir + "text.safetensors") << "not a safetensors file";
  auto text = MaskDecoder::Load(dir + "text.safetensors");
  EXPECT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("text.safetensors"), std::string::npos);
}

TEST(ResizeBilinearF32, MatchesPillowOnSmallCases) {
  // PIL: Image.fromarray(np.float32([[0, 1]])).resize((4, 1), Image.BILINEAR)
  //   → [0, 0.25, 0.75, 1]; and (1, 1) → the mean 0.5.
  const float in[2] = {0.0f, 1.0f};
  EXPECT_EQ(ResizeBilinearF32(in, 2, 1, 4, 1), (std::vector<float>{0.0f, 0.25f, 0.75f, 1.0f}));
  EXPECT_EQ(ResizeBilinearF32(in, 2, 1, 1, 1), (std::vector<float>{0.5f}));
  EXPECT_EQ(ResizeBilinearF32(in, 2, 1, 2, 1), (std::vector<float>{0.0f, 1.0f}));  // a copy
  // Vertical only: a column [0, 1] to height 4.
  EXPECT_EQ(ResizeBilinearF32(in, 1, 2, 1, 4), (std::vector<float>{0.0f, 0.25f, 0.75f, 1.0f}));
}

TEST(PlaceMaskInBox, UsesBigVisionsTruncatedPixelEdges) {
  std::vector<float> logits(64 * 64, 1.0f);
  // loc 511/1023 · 100 = 49.95… → 49; 1023 → 100.
  auto m = PlaceMaskInBox(logits.data(), 64, {0, 511, 1023, 1023}, 100, 50);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->x0, 49);
  EXPECT_EQ(m->width, 51);
  EXPECT_EQ(m->y0, 0);
  EXPECT_EQ(m->height, 50);
  EXPECT_EQ(m->area(), 51 * 50);
  EXPECT_FALSE(PlaceMaskInBox(logits.data(), 64, {10, 10, 10, 500}, 100, 50));  // empty
  EXPECT_FALSE(PlaceMaskInBox(logits.data(), 64, {0, 0, 1024, 10}, 100, 50));   // bad loc
  EXPECT_FALSE(PlaceMaskInBox(logits.data(), 64, {0, 0, 1, 1}, 100, 50));       // < 1 pixel
}

TEST(AttachMasks, FindsTheModelInTheModelDirectoryOrWarns) {
  const std::string dir = testing::TempDir() + "seg_model_dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string answer = "<loc0100><loc0100><loc0900><loc0900>";
  for (int k = 0; k < 16; ++k)
    answer += "<seg" + std::string(k < 10 ? "00" : "0") + std::to_string(k) + ">";
  answer += " cat";
  auto dets = ParseDetections(answer, 64, 48);
  // No model anywhere: a warning, the codes stay, no mask.
  auto warning = AttachMasks(&dets, "", dir, 64, 48);
  ASSERT_TRUE(warning.ok());
  EXPECT_NE(warning->find("no mask model"), std::string::npos) << *warning;
  EXPECT_EQ(dets[0].seg.size(), 16u);
  EXPECT_FALSE(dets[0].mask.has_value());
  // An explicit path that does not exist is an error.
  EXPECT_EQ(AttachMasks(&dets, dir + "/missing.npz", dir, 64, 48).status().code(),
            StatusCode::kNotFound);
  // A model in the directory is found and used.
  std::filesystem::copy_file("testdata/seg/vae-small.safetensors", dir + "/vae.safetensors");
  EXPECT_EQ(FindMaskModel(dir), dir + "/vae.safetensors");
  std::filesystem::copy_file("testdata/seg/vae-small.npz", dir + "/vae-oid.npz");
  EXPECT_EQ(FindMaskModel(dir), dir + "/vae-oid.npz");  // the NPZ first
  warning = AttachMasks(&dets, "", dir, 64, 48);
  ASSERT_TRUE(warning.ok()) << warning.status().ToString();
  EXPECT_EQ(*warning, "");
  ASSERT_TRUE(dets[0].mask.has_value());
  EXPECT_EQ(dets[0].mask->image_width, 64);
  // Without seg codes nothing is loaded, so even a bad path is not touched.
  auto boxes = ParseDetections("<loc0100><loc0100><loc0900><loc0900> cat", 64, 48);
  warning = AttachMasks(&boxes, dir + "/missing.npz", dir, 64, 48);
  ASSERT_TRUE(warning.ok());
  EXPECT_EQ(*warning, "");
}

}  // namespace
}  // namespace ocular

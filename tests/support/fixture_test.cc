// The golden fixtures are readable, complete and self-consistent.
#include "support/fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "runtime/parity.h"

namespace ocular::fixture {
namespace {

std::string WriteTemp(const std::string& name, const std::string& content) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(GoldenManifest, ListsEveryCheckpointWithNineCasesAndItsFiles) {
  auto manifest = GoldenManifest::Load();
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(manifest->CheckpointNames(), (std::vector<std::string>{"pg1", "pg2", "pg2-bf16"}));
  EXPECT_FALSE(manifest->transformers_version().empty());
  for (const std::string& name : manifest->CheckpointNames()) {
    const GoldenCheckpoint* ck = manifest->Find(name);
    ASSERT_NE(ck, nullptr);
    EXPECT_TRUE(std::ifstream(ck->model_dir + "/config.json").good()) << ck->model_dir;
    EXPECT_GE(ck->cases.size(), 9u) << name;
    for (const GoldenCase& c : ck->cases) {
      EXPECT_TRUE(std::ifstream(c.image_path).good()) << c.image_path;
      EXPECT_FALSE(c.prompt.empty());
      EXPECT_EQ(c.tap_shapes.at("logits").back(), ck->vocab_size);
    }
  }
  EXPECT_EQ(manifest->Find("pg3"), nullptr);
}

// Every case file holds exactly the manifest's taps with the manifest's shapes, and the
// taps relate to each other the way docs/testing.md says.
TEST(GoldenTaps, EveryCaseMatchesTheManifestAndIsSelfConsistent) {
  auto manifest = GoldenManifest::Load();
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  int cases = 0;
  for (const std::string& name : manifest->CheckpointNames()) {
    const GoldenCheckpoint& ck = *manifest->Find(name);
    for (const GoldenCase& c : ck.cases) {
      SCOPED_TRACE(c.path);
      auto taps = GoldenTaps::Open(c.path);
      ASSERT_TRUE(taps.ok()) << taps.status().ToString();
      std::vector<std::string> names = taps->TapNames();
      ASSERT_EQ(names.size(), c.tap_shapes.size());
      for (const std::string& tap : names) {
        ASSERT_TRUE(c.tap_shapes.count(tap)) << tap;
        EXPECT_EQ(taps->file().Find(tap)->shape, c.tap_shapes.at(tap)) << tap;
      }
      EXPECT_EQ(names.front(), "input_ids");
      EXPECT_EQ(names.back(), "decode_logits");

      // Prompt layout: <image>*N <bos> ... ; the image rows come first.
      auto ids = taps->Ids("input_ids");
      ASSERT_TRUE(ids.ok()) << ids.status().ToString();
      const auto n_image = std::count(ids->begin(), ids->end(), ck.image_token_index);
      EXPECT_EQ(n_image, ck.num_image_tokens);
      ASSERT_GT(ids->size(), static_cast<size_t>(n_image));
      EXPECT_TRUE(std::all_of(ids->begin(), ids->begin() + n_image,
                              [&](int32_t id) { return id == ck.image_token_index; }));

      // generated_ids[k] = argmax(decode_logits[k]) (ties -> lowest id), and decode row 0 is
      // the last prompt position's logits.
      auto gen = taps->Ids("generated_ids");
      auto decode = taps->Tap("decode_logits");
      auto logits = taps->Tap("logits");
      ASSERT_TRUE(gen.ok() && decode.ok() && logits.ok());
      const int64_t vocab = decode->dim(1);
      for (size_t k = 0; k < gen->size(); ++k) {
        const float* row = decode->as<float>() + k * vocab;
        EXPECT_EQ((*gen)[k], std::max_element(row, row + vocab) - row) << "step " << k;
      }
      TensorView last_row{logits->as<float>() + (logits->dim(0) - 1) * vocab, DType::kF32, {vocab}};
      EXPECT_EQ(CompareTensors({decode->as<float>(), DType::kF32, {vocab}}, last_row).max_abs, 0.0);

      // f32: decoder.embed_scaled = decoder.inputs_embeds * sqrt(H).
      if (ck.dtype == "float32") {
        auto in = taps->Tap("decoder.inputs_embeds");
        auto scaled = taps->Tap("decoder.embed_scaled");
        ASSERT_TRUE(in.ok() && scaled.ok());
        std::vector<float> mine(in->as<float>(), in->as<float>() + in->numel());
        const float normalizer = std::sqrt(static_cast<float>(ck.hidden_size));
        for (float& v : mine) v *= normalizer;
        EXPECT_LE(CompareTensors({mine.data(), DType::kF32, scaled->shape}, *scaled).rel, 1e-6);
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 27);
}

TEST(GoldenTaps, ReportsMissingAndMistypedTaps) {
  auto manifest = GoldenManifest::Load();
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  auto taps = GoldenTaps::Open(manifest->Find("pg1")->cases.front().path);
  ASSERT_TRUE(taps.ok()) << taps.status().ToString();
  EXPECT_EQ(taps->Tap("decoder.layers.99").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(taps->Tap("input_ids").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(taps->Ids("logits").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(GoldenTaps::Open("testdata/golden/pg1/no_such_case.safetensors").ok());
}

TEST(GoldenManifest, RejectsMissingOrMalformedManifests) {
  EXPECT_EQ(GoldenManifest::Load("testdata/no_such_dir").status().code(), StatusCode::kNotFound);
  const std::string dir = testing::TempDir();
  for (const char* bad : {"{not json", "[]", "{}", R"({"versions": {"transformers": 4}})",
                          R"({"versions": {"transformers": "4"}, "images": {},
                              "checkpoints": {"x": {"dir": "d", "dtype": "float32"}}})"}) {
    WriteTemp("manifest.json", bad);
    auto m = GoldenManifest::Load(dir);
    EXPECT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.status().message().find("[fixture]"), std::string::npos);
  }
}

TEST(CompareTensors, DetectsASmallPerturbationOfARealTap) {
  auto manifest = GoldenManifest::Load();
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  auto taps = GoldenTaps::Open(manifest->Find("pg2")->cases.front().path);
  ASSERT_TRUE(taps.ok()) << taps.status().ToString();
  auto logits = taps->Tap("logits");
  ASSERT_TRUE(logits.ok());
  std::vector<float> mine(logits->as<float>(), logits->as<float>() + logits->numel());
  mine[mine.size() / 2] += 0.5f;
  TapDiff d = CompareTensors({mine.data(), DType::kF32, logits->shape}, *logits);
  EXPECT_GT(d.rel, 1e-5);
  EXPECT_EQ(d.worst, static_cast<int64_t>(mine.size() / 2));
}

// Scratch paths are fresh, inside one folder of this process, and that folder goes at exit
// (only the owner's exit: a forked child leaves it alone).
TEST(ScratchPath, IsFreshAndRemovedWhenTheProcessExits) {
  namespace fs = std::filesystem;
  const std::string a = ScratchPath("copy");
  EXPECT_FALSE(fs::exists(a));
  fs::create_directories(a);
  std::ofstream(a + "/file") << "left over";
  EXPECT_EQ(ScratchPath("copy"), a);
  EXPECT_FALSE(fs::exists(a)) << "a leftover of the same name is removed";
  const fs::path root = fs::path(a).parent_path();
  EXPECT_TRUE(fs::is_directory(root));
  EXPECT_EQ(fs::path(ScratchPath("other")).parent_path(), root);

  GTEST_FLAG_SET(death_test_style, "fast");  // fork: the child inherits the exit handler
  EXPECT_EXIT(std::exit(0), ::testing::ExitedWithCode(0), "");
  EXPECT_TRUE(fs::is_directory(root)) << "a child's exit removed its parent's folder";

  // A fresh process (re-executed, this test only, from its start) removes its own folder when
  // it exits; it names the folder in a file the parent chose (the child keeps the parent's
  // variable: no overwrite).
  const std::string note = ScratchPath("child_root.txt");
  ASSERT_EQ(::setenv("OCULAR_SCRATCH_NOTE", note.c_str(), /*overwrite=*/0), 0);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::ofstream(std::getenv("OCULAR_SCRATCH_NOTE"))
            << fs::path(ScratchPath("x")).parent_path().string();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  std::string child_root;
  std::getline(std::ifstream(note), child_root);
  ASSERT_FALSE(child_root.empty());
  EXPECT_NE(child_root, root.string());
  EXPECT_FALSE(fs::exists(child_root));
}

}  // namespace
}  // namespace ocular::fixture

// The same tiny PaliGemma stored as sharded safetensors and as F16 gives the reference's
// answer: the loader handles every layout users download, not just one model.safetensors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "kernels/quant/blocks.h"
#include "runtime/parity.h"
#include "support/fixture.h"
#include "support/harness.h"
#include "support/prompts.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

const char* kCase = "testdata/golden/pg1/photo_caption.safetensors";

// Copies pg1's config and rewrites its weights through `write(dir, file)`.
std::string Rewrite(const std::string& name,
                    const std::function<void(const std::string&, const SafetensorsFile&)>& write) {
  const std::string dir = fixture::ScratchPath("fmt_" + name);
  fs::create_directories(dir);
  fs::copy("testdata/tiny/pg1/config.json", dir + "/config.json");
  auto src = SafetensorsFile::Open("testdata/tiny/pg1/model.safetensors");
  EXPECT_TRUE(src.ok());
  write(dir, *src);
  return dir;
}

// Runs the golden case through `dir` and returns (prompt logits, generated ids).
std::pair<Tensor, std::vector<int32_t>> RunGoldenCase(const std::string& dir) {
  auto h = testing_support::Harness::Load(dir);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  auto taps = fixture::GoldenTaps::Open(kCase);
  EXPECT_TRUE(taps.ok());
  const TensorView pv = *taps->Tap("pixel_values");
  Tensor pixels(pv.shape);
  std::copy_n(pv.as<float>(), pv.numel(), pixels.data.data());
  GenerationRequest req;
  req.prompt =
      testing_support::FixturePrompt((*h)->model->spec(), *taps->Ids("input_ids"), &pixels);
  req.max_new_tokens = 16;
  req.record_prompt_logits = true;
  auto out = (*h)->Generate(req);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {std::move(out->prompt_logits), out->generated};
}

TEST(CheckpointFormats, ShardedWithIndexMatchesTheReference) {
  const std::string dir = Rewrite("sharded", [](const std::string& d, const SafetensorsFile& src) {
    std::vector<NamedTensor> shard[2];
    nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                            {"weight_map", nlohmann::json::object()}};
    int i = 0;
    for (const auto& [name, view] : src.tensors()) {
      const int s = i++ % 2;
      shard[s].push_back({name, view});
      index["weight_map"][name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
    }
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE(WriteSafetensors(
                      d + "/model-0000" + std::to_string(s + 1) + "-of-00002.safetensors", shard[s])
                      .ok());
    }
    std::ofstream(d + "/model.safetensors.index.json") << index.dump(2);
  });
  auto [logits, ids] = RunGoldenCase(dir);
  auto taps = fixture::GoldenTaps::Open(kCase);
  ASSERT_TRUE(taps.ok());
  EXPECT_LE(CompareTensors(logits.view(), *taps->Tap("logits")).rel, 1e-5);
  EXPECT_EQ(ids, *taps->Ids("generated_ids"));

  // An index naming a shard that lacks the tensor is a clear error.
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"weight_map": {"language_model.model.norm.weight": "model-00001-of-00002.safetensors",)"
      << R"( "vision_tower.vision_model.post_layernorm.bias": "model-00001-of-00002.safetensors"}})";
  auto bad = paligemma::PaliGemma::Load(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("missing"), std::string::npos) << bad.status().message();
}

TEST(CheckpointFormats, F16WeightsStayCloseToTheF32Reference) {
  const std::string dir = Rewrite("f16", [](const std::string& d, const SafetensorsFile& src) {
    std::vector<std::vector<uint16_t>> storage;
    std::vector<NamedTensor> out;
    storage.reserve(src.tensors().size());
    for (const auto& [name, view] : src.tensors()) {
      ASSERT_EQ(view.dtype, DType::kF32);
      std::vector<uint16_t> h(view.numel());
      for (int64_t i = 0; i < view.numel(); ++i) h[i] = quant::F32ToF16(view.as<float>()[i]);
      storage.push_back(std::move(h));
      out.push_back({name, {storage.back().data(), DType::kF16, view.shape}});
    }
    ASSERT_TRUE(WriteSafetensors(d + "/model.safetensors", out).ok());
  });
  auto model = paligemma::PaliGemma::Load(dir);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->spec().weight_dtype, DType::kF16);
  auto [logits, ids] = RunGoldenCase(dir);
  auto taps = fixture::GoldenTaps::Open(kCase);
  ASSERT_TRUE(taps.ok());
  // f16 keeps 11 significant bits (relative rounding ≤ 2^-11 ≈ 4.9e-4 per weight).
  const double rel = CompareTensors(logits.view(), *taps->Tap("logits")).rel;
  EXPECT_LE(rel, 5e-3);
  EXPECT_GT(rel, 0.0);  // the weights really were rounded
}

}  // namespace
}  // namespace ocular

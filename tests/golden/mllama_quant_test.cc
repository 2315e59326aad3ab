// Llama 3.2 Vision (mllama) in GGUF files written by `ocular quantize`: the name table, the
// recipe (text decoder quantized; vision tower, projector and cross-attention K/V kept as
// stored), and what quantization costs on the tiny golden checkpoints, measured like
// quant_quality_test.cc does for PaliGemma (top-1 and KL over prompt + decode positions).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/file_set.h"
#include "models/mllama/config.h"
#include "models/mllama/gguf_names.h"
#include "ocular/quantize.h"
#include "support/agreement.h"
#include "support/any_model.h"
#include "support/fixture.h"
#include "support/harness.h"
#include "support/prompts.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;
using testing_support::Agreement;
using testing_support::AnyModel;

struct Quantized {
  std::string path;
  std::map<std::string, QuantizedTensor> tensors;  // by GGUF name
  int fallbacks = 0;
};

// A GGUF of `dir` in a per-process temporary file (ctest runs the ISA variants at once); the
// caller removes it.
Quantized Quantize(const std::string& dir, const char* type, const char* vision = "keep") {
  QuantizeOptions o;
  o.input = dir;
  o.output = (fs::temp_directory_path() /
              ("ocular_mllama_" + fs::path(dir).filename().string() + "_" + type + "_" + vision +
               "_" + std::to_string(::getpid()) + ".gguf"))
                 .string();
  o.type = type;
  o.vision = vision;
  o.threads = 1;
  Quantized q;
  q.path = o.output;
  auto report = QuantizeModel(o);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  if (!report.ok()) return q;
  for (const QuantizedTensor& t : report->tensors) q.tensors[t.name] = t;
  q.fallbacks = report->fallbacks;
  return q;
}

TEST(MllamaGgufTest, EveryTensorHasOneName) {
  for (const char* ck : {"mllama", "mllama-1x"}) {
    auto cfg = mllama::LoadMllamaConfig(DirectoryFiles(std::string("testdata/tiny/") + ck));
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    std::set<std::string> seen;
    for (const GgufName& n : mllama::GgufNames(*cfg)) {
      EXPECT_FALSE(n.gguf.empty()) << n.hf;
      EXPECT_TRUE(seen.insert(n.gguf).second) << "duplicate " << n.gguf;
    }
    // llama.cpp's mllama names for the decoder, ocular's (after ollama's) for the vision tower.
    for (const char* name :
         {"token_embd.weight", "output.weight", "output_norm.weight", "blk.0.attn_q.weight",
          "blk.0.ffn_norm.weight", "v.patch_embd.weight", "v.tile_position_embd.weight",
          "v.global.blk.0.attn_gate", "v.blk.0.attn_output.weight", "mm.0.weight", "mm.0.bias"}) {
      EXPECT_TRUE(seen.count(name)) << ck << ": " << name;
    }
    const int cross = cfg->text.cross_attention_layers[0];
    const std::string b = "blk." + std::to_string(cross) + ".";
    for (const std::string rest : {"cross_attn_k_proj.weight", "cross_attn_q_norm.weight",
                                   "cross_attn_attn_gate", "cross_attn_mlp_gate"}) {
      EXPECT_TRUE(seen.count(b + rest)) << ck << ": " << b + rest;
    }
  }
  EXPECT_EQ(mllama::GgufTensorName("vision_model.unknown"), "");
}

// The text decoder takes --type; the vision tower, projector and cross-attention K/V
// projections stay as stored unless --vision says otherwise.
TEST(MllamaGgufTest, RecipeKeepsTheImagePathAsStored) {
  const std::string dir = "testdata/tiny/mllama";  // f32; cross-attention layers 1 and 3
  Quantized f16 = Quantize(dir, "f16");
  fs::remove(f16.path);
  ASSERT_FALSE(f16.tensors.empty());
  auto format = [&](const Quantized& q, const std::string& name) {
    auto it = q.tensors.find(name);
    EXPECT_NE(it, q.tensors.end()) << name;
    return it == q.tensors.end() ? std::string() : it->second.format;
  };
  for (const char* name : {"token_embd.weight", "output.weight", "blk.0.attn_q.weight",
                           "blk.0.ffn_down.weight", "blk.1.cross_attn_q_proj.weight",
                           "blk.1.cross_attn_o_proj.weight", "blk.1.ffn_up.weight"}) {
    EXPECT_EQ(format(f16, name), "f16") << name;
  }
  for (const char* name : {"blk.1.cross_attn_k_proj.weight", "blk.3.cross_attn_v_proj.weight",
                           "v.blk.0.attn_q.weight", "v.global.blk.1.ffn_up.weight", "mm.0.weight",
                           "blk.0.attn_norm.weight", "blk.1.cross_attn_attn_gate"}) {
    EXPECT_EQ(format(f16, name), "f32") << name;
  }
  // --vision q8_0: the image path quantized where its rows fit a block (vision width 32).
  Quantized v8 = Quantize(dir, "f16", "q8_0");
  fs::remove(v8.path);
  EXPECT_EQ(format(v8, "v.blk.0.attn_q.weight"), "q8_0");
  EXPECT_EQ(format(v8, "mm.0.weight"), "q8_0");
  EXPECT_EQ(v8.tensors["blk.1.cross_attn_k_proj.weight"].wanted, "q8_0");  // rows of 48: f16
  // q4_k_m: Q6_K for the (untied) output projection; the embedding takes the base type.
  Quantized q4 = Quantize(dir, "q4_k_m");
  fs::remove(q4.path);
  auto wanted = [&](const std::string& name) {
    const QuantizedTensor& t = q4.tensors[name];
    return t.wanted.empty() ? t.format : t.wanted;
  };
  EXPECT_EQ(wanted("output.weight"), "q6_k");
  EXPECT_EQ(wanted("token_embd.weight"), "q4_k");
  EXPECT_EQ(format(q4, "blk.1.cross_attn_k_proj.weight"), "f32");
}

struct Target {
  const char* type;
  double min_top1, max_mean_kl;
};
// Floors for the tiny random checkpoints (widths 36-96: most matrices fall back to f16, and
// the f16/bf16 rows show how sensitive they are to any rounding); they catch a broken format,
// kernel or name (which lands near 0 %), not the quality targets (docs/quantization.md).
constexpr Target kFloors[] = {{"f16", 0.99, 1e-3},
                              {"bf16", 0.85, 5e-2},
                              {"q8_0", 0.85, 5e-2},
                              {"q4_k_m", 0.80, 0.2},
                              {"q4_0", 0.80, 0.2}};

TEST(MllamaQuantQuality, TopOneAndKlAgainstTheUnquantizedModel) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  const Precision f32 = Precision::kF32;
  std::printf("%-10s %-7s %9s %7s %11s %11s %9s\n", "model", "type", "positions", "top-1",
              "mean KL", "max KL", "fallbacks");
  for (const char* ck : {"mllama", "mllama-1x"}) {
    const std::string dir = std::string("testdata/tiny/") + ck;
    auto ref = AnyModel::Load(dir, &f32);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    std::vector<std::string> cases;
    for (const auto& e : fs::directory_iterator("testdata/golden/" + std::string(ck))) {
      if (e.path().extension() == ".safetensors") cases.push_back(e.path().string());
    }
    ASSERT_GE(cases.size(), 3u);
    for (const Target& target : kFloors) {
      SCOPED_TRACE(std::string(ck) + " " + target.type);
      Quantized q = Quantize(dir, target.type);
      auto quant = AnyModel::Load(q.path, &f32);
      fs::remove(q.path);
      ASSERT_TRUE(quant.ok()) << quant.status().ToString();
      Agreement a;
      for (const std::string& file : cases) {
        auto taps = fixture::GoldenTaps::Open(file);
        ASSERT_TRUE(taps.ok());
        const std::vector<int32_t> prompt = *taps->Ids("input_ids");
        const std::vector<int32_t> gen = *taps->Ids("generated_ids");
        const TensorView* pv = taps->file().Find("pixel_values");
        const ModelSpec& spec = (*ref)->model->spec();
        const std::shared_ptr<Prompt> p =
            pv ? testing_support::MllamaFixturePrompt(spec, prompt, *pv,
                                                      *taps->file().Find("aspect_ratio_ids"))
               : std::make_shared<Prompt>(TextPrompt(prompt));
        a.Add(testing_support::TeacherForced(**ref, *p, gen),
              testing_support::TeacherForced(**quant, *p, gen), (*ref)->model->spec().vocab_size);
      }
      std::printf("%-10s %-7s %9d %6.1f%% %11.2e %11.2e %9d\n", ck, target.type, a.positions,
                  100 * a.top1_rate(), a.mean_kl(), a.kl_max, q.fallbacks);
      EXPECT_GE(a.positions, 50);
      EXPECT_GE(a.top1_rate(), target.min_top1);
      EXPECT_LE(a.mean_kl(), target.max_mean_kl);
    }
  }
}

}  // namespace
}  // namespace ocular

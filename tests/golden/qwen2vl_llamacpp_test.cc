// Qwen2-VL, Qwen2.5-VL and Qwen3-VL from llama.cpp's two files (a text GGUF of architecture
// qwen2vl or qwen3vl and its mmproj), converted by llama.cpp's convert_hf_to_gguf.py from tiny
// checkpoints, f32 and f16 (tools/reference/make_llamacpp_qwen_pair.py; f16-valued weights, so both
// pairs hold the goldens' model exactly): the pair's own processor (prompt ids, pixels, grids,
// M-RoPE positions) and every tap, the logits and the greedy tokens against transformers on the HF
// checkpoint; then what the loader refuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "image/image.h"
#include "io/gguf.h"
#include "kernels/exec.h"
#include "models/qwen2vl/qwen2vl.h"
#include "models/qwen2vl/qwen3vl.h"
#include "models/registry.h"
#include "runtime/generator.h"
#include "runtime/kv_pool.h"
#include "runtime/recorder.h"
#include "runtime/runner.h"
#include "support/fixture.h"
#include "support/golden.h"
#include "support/harness.h"
#include "support/qwen_golden.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

struct Pair {
  const char* checkpoint;  // testdata/golden/<checkpoint>
  const char* type;        // f32, f16
  std::string text() const {
    return std::string("testdata/llamacpp/") + checkpoint + "-" + type + ".gguf";
  }
  std::string mmproj() const {
    return std::string("testdata/llamacpp/mmproj-") + checkpoint + "-" + type + ".gguf";
  }
};

using qwen_golden::CasePrompt;
using qwen_golden::ExpectProcessorMatches;
using qwen_golden::I64;
using qwen_golden::Ids;
using qwen_golden::Split;

class Qwen2VLLlamaCppGoldenTest : public testing::TestWithParam<Pair> {};

TEST_P(Qwen2VLLlamaCppGoldenTest, EveryTapLogitsAndGreedyDecodeMatchTransformers) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  const Pair& pair = GetParam();
  auto m = LoadModel(pair.text(), pair.mmproj());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ThreadPool pool(2);
  Backend backend(pool);
  KvPool kv(m->model->spec().kv, KvDType::kF32);
  Runner runner(*m->model, backend, Precision::kF32, RunnerLimits{.max_batch = 1, .max_images = 4});
  const std::vector<std::string> cases = qwen_golden::Cases(pair.checkpoint);
  for (const std::string& file : cases) {
    SCOPED_TRACE(file);
    qwen_golden::ExpectCaseMatches(*m->processor, runner, kv, file, 1e-5);
  }
  EXPECT_EQ(cases.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(ConvertedPairs, Qwen2VLLlamaCppGoldenTest,
                         testing::Values(Pair{"qwen2vl-lc", "f32"}, Pair{"qwen2vl-lc", "f16"},
                                         Pair{"qwen25vl-lc", "f32"}, Pair{"qwen25vl-lc", "f16"},
                                         Pair{"qwen3vl-lc", "f32"}, Pair{"qwen3vl-lc", "f16"}),
                         [](const auto& info) {
                           std::string n =
                               std::string(info.param.checkpoint) + "_" + info.param.type;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// A Q4_K_M text file (llama-quantize) with its f16 mmproj (tools/reference/
// llamacpp_quant_parity.py --fixture; Qwen2.5-VL, hidden 256: whole Q4_K / Q6_K blocks),
// against transformers on the file's weights dequantized: with OCULAR_GGUF_DEQUANTIZE=1 the
// same model, every tap within the f32 goldens' 1e-5; with the int8-activation kernels
// (ocular's default) the prompt's top-1 at every position and the greedy tokens.
StatusOr<LoadedModel> LoadQuantizedPair(bool dequantize) {
  ::setenv("OCULAR_GGUF_DEQUANTIZE", dequantize ? "1" : "0", 1);  // read when the files load
  auto m = LoadModel("testdata/llamacpp/qwen25vl-q-Q4_K_M.gguf",
                     "testdata/llamacpp/mmproj-qwen25vl-q-f16.gguf");
  ::unsetenv("OCULAR_GGUF_DEQUANTIZE");
  return m;
}

struct QuantRun {
  std::vector<float> logits;  // [T, V] prompt logits
  std::vector<int32_t> generated;
  int compared = 0;
};

QuantRun RunCase(const LoadedModel& m, const fixture::GoldenTaps& taps, double tolerance) {
  QuantRun r;
  const SafetensorsFile& g = taps.file();
  auto prompt = CasePrompt(*m.processor, g.metadata().at("images"), g.metadata().at("prompt"));
  EXPECT_TRUE(prompt.ok()) << prompt.status().ToString();
  if (!prompt.ok()) return r;
  ThreadPool pool(2);
  Backend backend(pool);
  KvPool kv(m.model->spec().kv, KvDType::kF32);
  Runner runner(*m.model, backend, Precision::kF32, RunnerLimits{.max_batch = 1, .max_images = 1});
  GenerationRequest req;
  req.prompt = std::make_shared<Prompt>(std::move(*prompt));
  req.max_new_tokens = static_cast<int>(g.Find("generated_ids")->numel());
  req.record_prompt_logits = true;
  req.record_decode_logits = true;
  RecordingTracer tracer;
  auto out = Generate(runner, kv, req, &tracer);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return r;
  tracer.Add("decode_logits", out->decode_logits);
  if (tolerance > 0) r.compared = testing_support::ExpectEveryTapWithin(taps, tracer, tolerance);
  r.logits = out->prompt_logits.data;
  r.generated = out->generated;
  return r;
}

TEST(Qwen2VLLlamaCppQuantTest, Q4KMPairDequantizedEqualsTransformersOnTheSameValues) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  auto m = LoadQuantizedPair(true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const char* c : {"palette", "text_only"}) {
    SCOPED_TRACE(c);
    auto taps = fixture::GoldenTaps::Open(std::string("testdata/golden/qwen25vl-q4km/") + c +
                                          ".safetensors");
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    const QuantRun r = RunCase(*m, *taps, 1e-5);
    EXPECT_GE(r.compared, 6);  // text only: embeddings, 2 layers, norm, logits, decode
    EXPECT_EQ(r.generated, Ids(*taps->file().Find("generated_ids")));
  }
}

TEST(Qwen2VLLlamaCppQuantTest, Q4KMPairWithInt8ActivationsAgreesOnTop1) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  auto m = LoadQuantizedPair(false);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->model->spec().quantized);  // Q4_K / Q6_K blocks, int8 activations
  int agree = 0, rows = 0;
  for (const char* c : {"palette", "text_only"}) {
    auto taps = fixture::GoldenTaps::Open(std::string("testdata/golden/qwen25vl-q4km/") + c +
                                          ".safetensors");
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    const QuantRun r = RunCase(*m, *taps, 0);
    const TensorView& ref = *taps->file().Find("logits");
    const int64_t V = ref.shape[1];
    ASSERT_EQ(static_cast<int64_t>(r.logits.size()), ref.numel());
    for (int64_t t = 0; t < ref.shape[0]; ++t) {
      const float* a = r.logits.data() + t * V;
      const float* b = ref.as<float>() + t * V;
      agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
      ++rows;
    }
  }
  // Measured: 27 of 28 prompt positions (scalar, avx2 and avx512 kernels alike).
  EXPECT_GE(agree, rows - 2) << agree << " of " << rows;
}

// What the loader derives from the two files' metadata, where llama.cpp's rules fill in what
// they leave out.
TEST(Qwen2VLLlamaCppTest, ConfigFromTheTwoFilesMetadata) {
  auto q2 = LoadModel(Pair{"qwen2vl-lc", "f16"}.text(), Pair{"qwen2vl-lc", "f16"}.mmproj());
  ASSERT_TRUE(q2.ok()) << q2.status().ToString();
  const auto& c2 = static_cast<const qwen2vl::Qwen2VL&>(*q2->model).config();
  EXPECT_EQ(c2.model_type, "qwen2_vl");
  EXPECT_EQ(c2.vision.depth, 3);
  EXPECT_EQ(c2.vision.mlp_dim(), 96);  // v.blk.0.ffn_up's rows, not feed_forward_length (48)
  EXPECT_EQ(c2.text.mrope_section, (std::array<int, 3>{1, 2, 3}));
  EXPECT_EQ(c2.text.vocab_size, 464);    // token_embd's rows, past the tokenizer's 407 ids
  EXPECT_FALSE(c2.tie_word_embeddings);  // output.weight is in the file
  auto q25 = LoadModel(Pair{"qwen25vl-lc", "f16"}.text(), Pair{"qwen25vl-lc", "f16"}.mmproj());
  ASSERT_TRUE(q25.ok()) << q25.status().ToString();
  const auto& c25 = static_cast<const qwen2vl::Qwen2VL&>(*q25->model).config();
  EXPECT_TRUE(c25.qwen25());
  EXPECT_TRUE(c25.tie_word_embeddings);
  EXPECT_EQ(c25.vision.window_size, 112);  // no clip.vision.window_size: clip.cpp's 112
  EXPECT_EQ(c25.vision.fullatt_block_indexes, std::vector<int>{1});  // n_wa_pattern 2
  const auto& image = static_cast<const qwen2vl::Qwen2VLProcessor&>(*q25->processor);
  EXPECT_EQ(image.image_config().max_pixels, 12845056);  // the released checkpoints'
  auto q3 = LoadModel(Pair{"qwen3vl-lc", "f16"}.text(), Pair{"qwen3vl-lc", "f16"}.mmproj());
  ASSERT_TRUE(q3.ok()) << q3.status().ToString();
  const auto& c3 = static_cast<const qwen2vl::Qwen3VL&>(*q3->model).config();
  EXPECT_EQ(c3.model_type, "qwen3_vl");
  EXPECT_EQ(c3.text.head_dim, 16);  // qwen3vl.attention.key_length, not 48 / 4
  EXPECT_EQ(c3.text.mrope_section, (std::array<int, 3>{2, 3, 3}));
  EXPECT_FALSE(c3.text.attention_bias);
  EXPECT_TRUE(c3.tie_word_embeddings);
  EXPECT_EQ(c3.vision.num_position_embeddings, 36);  // v.position_embd's rows: 6x6
  EXPECT_EQ(c3.vision.deepstack_visual_indexes, (std::vector<int>{0, 2}));  // is_deepstack_layers
  EXPECT_EQ(c3.vision.intermediate_size, 64);
  const auto& image3 = static_cast<const qwen2vl::Qwen2VLProcessor&>(*q3->processor);
  EXPECT_EQ(image3.image_config().min_pixels, 65536);  // Qwen3-VL-4B-Instruct's size
  EXPECT_EQ(image3.image_config().max_pixels, 16777216);
}

// A decode step that sampled <|image_pad|> (a random-weight model may) embeds the pad's row,
// as transformers does without pixel_values, rather than failing the placeholder check.
TEST(Qwen2VLLlamaCppTest, ASampledImagePadEmbedsItsRow) {
  const Pair q2{"qwen2vl-lc", "f32"};
  auto m = LoadModel(q2.text(), q2.mmproj());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto& model = static_cast<const qwen2vl::Qwen2VL&>(*m->model);
  ThreadPool pool(1);
  Backend backend(pool);
  Runner runner(model, backend, Precision::kF32, RunnerLimits{.max_batch = 1, .max_images = 1});
  runner.Plan(1, 1, 0);
  const int32_t pad = model.config().image_token_id;
  std::vector<float> x(model.config().text.hidden_size);
  const Status s =
      model.Embed(runner.exec(), std::span<const int32_t>(&pad, 1), nullptr, 0, x.data(), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(std::any_of(x.begin(), x.end(), [](float v) { return v != 0; }));
  // With features, the count must match (get_placeholder_mask).
  std::vector<float> features(2 * x.size());
  EXPECT_FALSE(model
                   .Embed(runner.exec(), std::span<const int32_t>(&pad, 1), features.data(), 2,
                          x.data(), nullptr)
                   .ok());
}

// A copy of `from` with metadata edited by `edit` (false: drop the key; called once more with
// "" to add keys).
std::string Rewrite(const std::string& from, const std::string& name,
                    const std::function<bool(const std::string&, GgufWriter&)>& edit) {
  auto src = GgufFile::Open(from);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) {
    if (edit(key, w)) w.SetValue(key, value);
  }
  edit("", w);
  for (const GgufTensor& t : (*src)->tensors()) {
    WFormat f;
    EXPECT_TRUE(WFormatFromGgml(t.type, &f));
    w.AddTensor(t.name, t.shape(), f);
  }
  const std::string path =
      (fs::temp_directory_path() / ("ocular_qpair_" + name + std::to_string(::getpid()) + ".gguf"))
          .string();
  const GgufFile& file = **src;
  const Status s = w.Write(path, [&](size_t i, std::byte* out, size_t n) {
    std::memcpy(out, file.tensors()[i].data, n);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

std::function<bool(const std::string&, GgufWriter&)> SetU32(const char* which, uint32_t v) {
  return [=](const std::string& key, GgufWriter& w) {
    if (key != which) return true;
    w.SetU32(key, v);
    return false;
  };
}
std::function<bool(const std::string&, GgufWriter&)> Drop(const char* which) {
  return [=](const std::string& key, GgufWriter&) { return key != which; };
}
std::function<bool(const std::string&, GgufWriter&)> Add(const char* which) {
  return [=](const std::string& key, GgufWriter& w) {
    if (key.empty()) w.SetU32(which, 1);
    return true;
  };
}

// Exit 5 (kUnimplemented) naming the key: projectors, keys, activations and sizes ocular does
// not implement, and pairs that do not go together.
TEST(Qwen2VLLlamaCppTest, RefusesWhatItDoesNotImplementNamingTheKey) {
  const Pair q2{"qwen2vl-lc", "f16"}, q25{"qwen25vl-lc", "f16"}, q3{"qwen3vl-lc", "f16"};
  struct Case {
    const char* name;
    Pair pair;
    bool text;  // edits the text file, else the mmproj
    std::function<bool(const std::string&, GgufWriter&)> edit;
    const char* says;
    StatusCode code = StatusCode::kUnimplemented;
  };
  const Case cases[] = {
      {"type", q2, false,
       [](const std::string& key, GgufWriter& w) {
         if (key != "clip.projector_type") return true;
         w.SetString(key, "glm4v");
         return false;
       },
       "clip.projector_type 'glm4v' is not implemented"},
      {"type3", q2, false,
       [](const std::string& key, GgufWriter& w) {
         if (key != "clip.projector_type") return true;
         w.SetString(key, "qwen3vl_merger");
         return false;
       },
       "'qwen3vl_merger' does not pair with a text file of architecture 'qwen2vl'"},
      {"q3_deepstack", q3, true, SetU32("qwen3vl.n_deepstack_layers", 1),
       "qwen3vl.n_deepstack_layers = 1"},
      {"q3_vlen", q3, true, SetU32("qwen3vl.attention.value_length", 8),
       "qwen3vl.attention.value_length = 8"},
      {"q3_text_key", q3, true, Add("qwen3vl.expert_count"), "qwen3vl.expert_count"},
      {"q3_key", q3, false, Add("clip.vision.n_wa_pattern"), "clip.vision.n_wa_pattern"},
      {"q3_gelu", q3, false, Drop("clip.use_gelu"), "clip.use_gelu = false"},
      {"dim", q2, false, SetU32("clip.vision.projection_dim", 64),
       "clip.vision.projection_dim = 64"},
      {"eps", q2, false,
       [](const std::string& key, GgufWriter& w) {
         if (key != "clip.vision.attention.layer_norm_epsilon") return true;
         w.SetF32(key, 1e-5f);
         return false;
       },
       "layer_norm_epsilon"},
      {"silu", q25, false, Drop("clip.use_silu"), "clip.use_silu = false"},
      {"wa", q25, false, Drop("clip.vision.n_wa_pattern"), "clip.vision.n_wa_pattern",
       StatusCode::kDataLoss},
      {"key", q2, false, Add("clip.vision.n_wa_pattern"), "clip.vision.n_wa_pattern"},
      {"text_key", q2, true, Add("qwen2vl.expert_count"), "qwen2vl.expert_count"},
      {"pre", q2, true,
       [](const std::string& key, GgufWriter& w) {
         if (key != "tokenizer.ggml.pre") return true;
         w.SetString(key, "llama-bpe");
         return false;
       },
       "tokenizer.ggml.pre 'llama-bpe'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = Rewrite(c.text ? c.pair.text() : c.pair.mmproj(), c.name, c.edit);
    auto m = c.text ? LoadModel(path, c.pair.mmproj()) : LoadModel(c.pair.text(), path);
    fs::remove(path);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), c.code) << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status().ToString();
  }
}

TEST(Qwen2VLLlamaCppTest, RefusesFilesThatDoNotPair) {
  const Pair q2{"qwen2vl-lc", "f16"};
  struct Case {
    std::string model, mmproj;
    const char* says;
  };
  const Case cases[] = {
      {q2.text(), "testdata/llamacpp/mmproj-gemma3-lc-f16.gguf",
       "clip.projector_type 'gemma3' does not pair with a text file of architecture 'qwen2vl'"},
      {"testdata/llamacpp/gemma3-lc-f16.gguf", q2.mmproj(),
       "clip.projector_type 'qwen2vl_merger' does not pair with a text file of architecture "
       "'gemma3'"},
      {q2.text(), "", "give its mmproj file"},
      {Pair{"qwen3vl-lc", "f16"}.text(), q2.mmproj(),
       "clip.projector_type 'qwen2vl_merger' does not pair with a text file of architecture "
       "'qwen3vl'"},
      {Pair{"qwen3vl-lc", "f16"}.text(), "", "a Qwen3-VL text file runs with its vision encoder"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + " + " + c.mmproj);
    auto m = LoadModel(c.model, c.mmproj);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented) << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status().ToString();
  }
}

}  // namespace
}  // namespace ocular

// Qwen3-VL (qwen3_vl, dense) against transformers 4.57.1, tap by tap (fixtures:
// tools/reference/make_qwen3vl.py): the processor's pixels, image_grid_thw, ids, get_rope_index
// positions and rope_deltas exactly; then the vision tower (the interpolated position table,
// the DeepStack mergers), every decoder layer (interleaved M-RoPE, q/k norms, DeepStack's
// additions), the logits and 32 greedy tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "image/image.h"
#include "kernels/exec.h"
#include "models/qwen2vl/config3.h"
#include "models/qwen2vl/processor.h"
#include "models/qwen2vl/qwen3vl.h"
#include "models/qwen2vl/vision3.h"
#include "models/registry.h"
#include "ocular/detection.h"
#include "ocular/engine.h"
#include "runtime/generator.h"
#include "runtime/kv_pool.h"
#include "runtime/recorder.h"
#include "runtime/runner.h"
#include "runtime/sequence.h"
#include "support/fixture.h"
#include "support/golden.h"
#include "support/harness.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Cases(const std::string& checkpoint) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("testdata/golden/" + checkpoint)) {
    if (e.path().extension() == ".safetensors") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> I64(const TensorView& t) {
  return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + t.numel());
}

std::vector<int32_t> Ids(const TensorView& t) {
  std::vector<int32_t> ids(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) ids[i] = static_cast<int32_t>(t.as<int64_t>()[i]);
  return ids;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int64_t Differ(const std::vector<float>& mine, const TensorView& ref) {
  if (static_cast<int64_t>(mine.size()) != ref.numel()) return -1;
  int64_t n = 0;
  for (size_t k = 0; k < mine.size(); ++k) n += mine[k] != ref.as<float>()[k];
  return n;
}

// apply_interleaved_mrope on Qwen3-VL's mrope_section [24, 20, 20] (head_dim 128): frequencies
// 1, 4, ..., 58 height, 2, 5, ..., 59 width, the rest (0, 3, ..., 57 and 60..63) temporal.
TEST(Qwen3VLRopeTest, InterleavedSectionsAsApplyInterleavedMrope) {
  const blocks::AxesRope r = qwen2vl::InterleavedMrope(128, 5000000.0f, {24, 20, 20});
  ASSERT_EQ(r.axis_of.size(), 64u);
  int count[3] = {0, 0, 0};
  for (int j = 0; j < 64; ++j) {
    const int want = j < 60 ? j % 3 : 0;
    EXPECT_EQ(r.axis_of[j], want) << "frequency " << j;
    ++count[r.axis_of[j]];
  }
  EXPECT_EQ(count[0], 24);
  EXPECT_EQ(count[1], 20);
  EXPECT_EQ(count[2], 20);
}

// fast_pos_embed_interpolate's points: torch.linspace(0, n - 1, h) in float32 bit for bit, for
// the released 48x48 table and others, at every h up to 160 patches.
TEST(Qwen3VLVisionTest, LinspaceIsTorchsBitForBit) {
  auto fx = fixture::GoldenTaps::Open("testdata/golden/qwen3vl-linspace.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().ToString();
  for (int n : {6, 48, 97}) {
    std::string name = "n";
    name += std::to_string(n);  // (GCC 12 warns on "n" + to_string: -Wrestrict, bug 105329)
    const TensorView* t = fx->file().Find(name);
    ASSERT_NE(t, nullptr);
    int64_t k = 0, differ = 0;
    for (int h = 1; h <= 160; ++h) {
      for (int i = 0; i < h; ++i, ++k) {
        ASSERT_LT(k, t->numel());
        differ += qwen2vl::TorchLinspace(static_cast<float>(n - 1), h, i) != t->as<float>()[k];
      }
    }
    EXPECT_EQ(k, t->numel());
    EXPECT_EQ(differ, 0) << "n = " << n;
  }
}

// Qwen/Qwen3-VL-4B-Instruct's config.json (keys ocular does not read included), and what is
// refused.
TEST(Qwen3VLConfigTest, ReleasedConfigParsesAndUnimplementedIsRefused) {
  const std::string text = R"("text_config": {"attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 151643, "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": 128,
      "hidden_act": "silu", "hidden_size": 2560, "initializer_range": 0.02,
      "intermediate_size": 9728, "max_position_embeddings": 262144, "model_type": "qwen3_vl_text",
      "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
      "rms_norm_eps": 1e-06, "rope_scaling": {"mrope_interleaved": true,
      "mrope_section": [24, 20, 20], "rope_type": "default"}, "rope_theta": 5000000,
      "tie_word_embeddings": true, "use_cache": true, "vocab_size": 151936})";
  const std::string vision = R"("vision_config": {"deepstack_visual_indexes": [5, 11, 17],
      "depth": 24, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1024,
      "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4096,
      "model_type": "qwen3_vl", "num_heads": 16, "num_position_embeddings": 2304,
      "out_hidden_size": 2560, "patch_size": 16, "spatial_merge_size": 2,
      "temporal_patch_size": 2})";
  auto c = qwen2vl::ParseQwen3VLConfig(R"({"architectures": ["Qwen3VLForConditionalGeneration"],
      "image_token_id": 151655, "model_type": "qwen3_vl", "tie_word_embeddings": true,
      "video_token_id": 151656, "vision_end_token_id": 151653,
      "vision_start_token_id": 151652, )" + text +
                                           ", " + vision + "}",
                                       "Qwen3-VL-4B-Instruct");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->text.head_dim, 128);
  EXPECT_EQ(c->text.eos_token_id, 151645);
  EXPECT_EQ(c->vision.grid_per_side(), 48);
  EXPECT_EQ(c->vision.deepstack(), 3);
  EXPECT_EQ(c->ProcessorConfig().vision.patch_size, 16);

  const std::string base = R"({"model_type": "qwen3_vl", "vision_config": {"hidden_size": 32,
      "num_heads": 4, "out_hidden_size": 64, "depth": 2, "deepstack_visual_indexes": [1]},
      "text_config": {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 200000)";
  const std::string rope =
      R"(, "rope_scaling": {"rope_type": "default", "mrope_section": [2, 3, 3]})";
  auto ok = qwen2vl::ParseQwen3VLConfig(base + rope + "}}", "c");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_FALSE(ok->tie_word_embeddings);  // text_config's default; the top level is not read
  // The legacy "type": "mrope" passes rope_config_validation (no validator) and runs the default
  // frequencies; without mrope_section, Qwen3VLTextRotaryEmbedding takes [24, 20, 20] (sections
  // past head_dim / 2 are cut short, as apply_interleaved_mrope's slices).
  auto legacy = qwen2vl::ParseQwen3VLConfig(
      base + R"(, "rope_scaling": {"type": "mrope", "mrope_section": [1, 2, 2]}}})", "c");
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_EQ(legacy->text.mrope_section[1], 2);
  auto defaults =
      qwen2vl::ParseQwen3VLConfig(base + R"(, "rope_scaling": {"rope_type": "default"}}})", "c");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->text.mrope_section[0], 24);
  const blocks::AxesRope cut = qwen2vl::InterleavedMrope(16, 10000.0f, {24, 20, 20});
  EXPECT_EQ(cut.axis_of, (std::vector<uint8_t>{0, 1, 2, 0, 1, 2, 0, 1}));
  // The defaults (Qwen3VLTextConfig()) with the rope_scaling transformers needs.
  const std::string text_ok = R"("text_config": {"rope_scaling": {"rope_type": "default"}}})";
  struct Bad {
    std::string config;
    StatusCode code;
  };
  const Bad bad[] = {
      {base + "}}", StatusCode::kDataLoss},  // no rope_scaling: transformers fails too
      {base + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2}}})",
       StatusCode::kUnimplemented},
      {base + R"(, "rope_scaling": {"mrope_section": [2, 3, 3]}}})",
       StatusCode::kDataLoss},  // no rope_type: rope_config_validation's KeyError
      {base + R"(, "rope_scaling": {"type": "default", "mrope_section": [2, 3, 3]}}})",
       StatusCode::kDataLoss},  // the same: "default" needs the "rope_type" key
      {base + R"(, "rope_scaling": {"rope_type": "mrope"}}})",
       StatusCode::kUnimplemented},  // not in ROPE_INIT_FUNCTIONS
      {base + R"(, "rope_scaling": {"rope_type": "default", "mrope_section": [2, -1, 3]}}})",
       StatusCode::kDataLoss},
      {base + rope + R"(, "hidden_act": "gelu"}})", StatusCode::kUnimplemented},
      {base + rope + R"(, "use_sliding_window": true}})", StatusCode::kUnimplemented},
      {base + rope + R"(, "num_hidden_layers": 0}})", StatusCode::kDataLoss},
      {std::string(R"({"model_type": "qwen3_vl_moe"})"), StatusCode::kUnimplemented},
      {R"({"model_type": "qwen3_vl", "vision_config": {"depth": 2,
          "deepstack_visual_indexes": [2]}, )" +
           text_ok,
       StatusCode::kDataLoss},  // a block past the ViT
      {R"({"model_type": "qwen3_vl", "vision_config": {"depth": 3,
          "deepstack_visual_indexes": [1, 1]}, )" +
           text_ok,
       StatusCode::kUnimplemented},
      {R"({"model_type": "qwen3_vl", "vision_config": {"hidden_act": "quick_gelu"}, )" + text_ok,
       StatusCode::kUnimplemented},
  };
  for (const Bad& b : bad) {
    auto r = qwen2vl::ParseQwen3VLConfig(b.config, "config.json");
    ASSERT_FALSE(r.ok()) << b.config;
    EXPECT_EQ(r.status().code(), b.code) << r.status().ToString();
  }
}

// Qwen/Qwen3-VL-4B-Instruct's preprocessor_config.json: size's edges as min/max pixels, 16-px
// patches (factor 32), mean/std 0.5; it names the fast image processor, whose PIL counterpart
// ocular runs (docs/models.md §12.5).
TEST(Qwen3VLConfigTest, ReleasedPreprocessorConfigParses) {
  auto c = qwen2vl::ParseImageConfig(R"({"size": {"longest_edge": 16777216,
      "shortest_edge": 65536}, "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
      "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
      "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"})",
                                     "preprocessor_config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->min_pixels, 65536);
  EXPECT_EQ(c->max_pixels, 16777216);
  EXPECT_EQ(c->factor(), 32);
  EXPECT_FLOAT_EQ(static_cast<float>(c->pp.image_mean[1]), 0.5f);
  // A 60x40 image: sides rounded to multiples of 32, then scaled up to min_pixels.
  auto hw = qwen2vl::SmartResize(40, 60, 32, c->min_pixels, c->max_pixels);
  ASSERT_TRUE(hw.ok());
  EXPECT_EQ(hw->first % 32, 0);
  EXPECT_EQ(hw->second % 32, 0);
  EXPECT_GE(int64_t{hw->first} * hw->second, 65536);
}

struct Loaded {
  LoadedModel m;
  ThreadPool pool{2};
  Backend backend{pool};
  std::unique_ptr<KvPool> kv;
  std::unique_ptr<Runner> runner;
};

std::unique_ptr<Loaded> LoadTiny(const std::string& checkpoint) {
  auto l = std::make_unique<Loaded>();
  auto m = LoadModel("testdata/tiny/" + checkpoint);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  l->m = std::move(*m);
  const bool bf16 = l->m.model->spec().weight_dtype == DType::kBF16;  // run as torch runs it
  l->kv = std::make_unique<KvPool>(l->m.model->spec().kv, bf16 ? KvDType::kBF16 : KvDType::kF32);
  l->runner =
      std::make_unique<Runner>(*l->m.model, l->backend, bf16 ? Precision::kBF16 : Precision::kF32,
                               RunnerLimits{.max_batch = 2, .max_images = 4});
  return l;
}

// The processor's prompt for a case: its images through AddImage, then MakePrompt.
// chat: the text is one user turn of a chat (`ocular run --chat`), rendered with the
// checkpoint's chat template.
StatusOr<Prompt> CasePrompt(const Processor& p, const std::string& images, const std::string& text,
                            bool chat = false) {
  Prompt with_images;
  const std::vector<std::string> names = Split(images);
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string dir = names[i].find('/') != std::string::npos ? "" : "inputs/";
    OCULAR_ASSIGN_OR_RETURN(Image im, LoadImage("testdata/golden/" + dir + names[i] + ".png"));
    OCULAR_RETURN_IF_ERROR(p.AddImage(im, false, static_cast<int32_t>(i), &with_images));
  }
  PromptOptions o;
  o.chat = chat;
  return p.MakePrompt(std::move(with_images), static_cast<int>(names.size()), text, nullptr, o);
}

// The processor's outputs for a case, exactly.
void ExpectProcessorMatches(const Prompt& prompt, const SafetensorsFile& g) {
  ASSERT_EQ(prompt.ids, Ids(*g.Find("input_ids")));
  const std::vector<int64_t> want_pos = I64(*g.Find("position_ids"));
  const int64_t T = prompt.size();
  for (int a = 0; a < 3; ++a) {
    for (int64_t t = 0; t < T; ++t) {
      ASSERT_EQ(prompt.positions.At(a, t, T), want_pos[a * T + t]) << "axis " << a << " row " << t;
    }
  }
  EXPECT_EQ(prompt.positions.decode_offset, g.Find("rope_deltas")->as<int64_t>()[0]);
  if (const TensorView* pv = g.Find("pixel_values")) {
    EXPECT_EQ(Differ(prompt.pixels, *pv), 0) << "pixel values differ";
    const std::vector<int64_t> grids = I64(*g.Find("image_grid_thw"));
    ASSERT_EQ(grids.size(), 3 * prompt.images.size());
    for (size_t i = 0; i < prompt.images.size(); ++i) {
      for (int k = 0; k < 3; ++k) EXPECT_EQ(prompt.images[i].grid[k], grids[3 * i + k]);
    }
  } else {
    EXPECT_TRUE(prompt.images.empty());
  }
}

// qwen3vl: DeepStack after ViT blocks 0 and 2, tied; its bf16 copy against torch's bf16 run.
// qwen3vl-b: another configuration (attention biases, MHA, head_dim = hidden / heads, legacy
// rope "type", DeepStack after block 1 only, untied).
struct Checkpoint {
  const char* name;
  double tolerance;  // relative error per tap
  size_t cases;
  int deepstack;
};

class Qwen3VLGoldenTest : public testing::TestWithParam<Checkpoint> {};

TEST_P(Qwen3VLGoldenTest, EveryTapLogitsAndGreedyDecodeMatchTransformers) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  auto m = LoadTiny(GetParam().name);
  ASSERT_NE(m, nullptr);
  // The merger's and each DeepStack merger's rows side by side.
  EXPECT_EQ(m->m.model->spec().feature_floats(), 48 * (1 + GetParam().deepstack));
  const std::vector<std::string> cases = Cases(GetParam().name);
  ASSERT_EQ(cases.size(), GetParam().cases);
  for (const std::string& file : cases) {
    SCOPED_TRACE(file);
    auto taps = fixture::GoldenTaps::Open(file);
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    const SafetensorsFile& g = taps->file();
    const auto& meta = g.metadata();
    auto prompt =
        CasePrompt(*m->m.processor, meta.at("images"), meta.at("prompt"), meta.contains("chat"));
    ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
    ExpectProcessorMatches(*prompt, g);
    const TensorView* gen = g.Find("generated_ids");
    GenerationRequest req;
    req.prompt = std::make_shared<Prompt>(std::move(*prompt));
    req.max_new_tokens = static_cast<int>(gen->numel());
    req.record_prompt_logits = true;
    req.record_decode_logits = true;
    RecordingTracer tracer;
    auto out = Generate(*m->runner, *m->kv, req, &tracer);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    tracer.Add("decode_logits", out->decode_logits);
    const int compared = testing_support::ExpectEveryTapWithin(*taps, tracer, GetParam().tolerance);
    EXPECT_GE(compared, 7);
    EXPECT_EQ(out->generated, Ids(*gen)) << "greedy continuation differs";
  }
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, Qwen3VLGoldenTest,
                         testing::Values(Checkpoint{"qwen3vl", 1e-5, 8, 2},
                                         Checkpoint{"qwen3vl-bf16", 1e-2, 2, 2},
                                         Checkpoint{"qwen3vl-b", 1e-5, 2, 1}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// An image prompt (rope_deltas -6, DeepStack rows) and a text-only one decode together in one
// batch, transformers' tokens each.
TEST(Qwen3VLBatchTest, ImageAndTextPromptsDecodeTogether) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  auto m = LoadTiny("qwen3vl");
  ASSERT_NE(m, nullptr);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::vector<int32_t>> want;
  std::vector<std::vector<float>> features;
  for (const char* c : {"two", "text_only"}) {
    auto taps =
        fixture::GoldenTaps::Open(std::string("testdata/golden/qwen3vl/") + c + ".safetensors");
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    const auto& meta = taps->file().metadata();
    auto prompt = CasePrompt(*m->m.processor, meta.at("images"), meta.at("prompt"));
    ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
    want.push_back(Ids(*taps->file().Find("generated_ids")));
    SequenceParams p;
    p.prompt = std::make_shared<const Prompt>(std::move(*prompt));
    p.max_new_tokens = static_cast<int>(want.back().size());
    const ModelSpec& spec = m->m.model->spec();
    features.emplace_back(p.prompt->feature_rows() * spec.feature_floats());
    const bool images = !p.prompt->images.empty();
    if (images) {
      m->runner->EncodeImages(*p.prompt, 0, p.prompt->images.size(), features.back().data(),
                              nullptr);
    }
    auto cache = m->kv->Acquire(p.prompt->size() + p.max_new_tokens, 0);
    ASSERT_TRUE(cache.ok());
    seqs.push_back(std::make_unique<Sequence>(std::move(p), std::move(*cache), spec.vocab_size,
                                              m->m.model->NewState()));
    ASSERT_TRUE(
        m->runner->Prefill(*seqs.back(), images ? features.back().data() : nullptr, nullptr).ok());
  }
  std::vector<Sequence*> batch = {seqs[0].get(), seqs[1].get()};
  while (!seqs[0]->done() || !seqs[1]->done()) m->runner->DecodeStep(batch);
  EXPECT_EQ(seqs[0]->generated(), want[0]);
  EXPECT_EQ(seqs[1]->generated(), want[1]);
}

// As `ocular run -m testdata/tiny/qwen3vl -i photo.png -i gray.png -p "..."` runs it: files ->
// processor -> scheduler (features of feature_width floats a row) -> model.
TEST(Qwen3VLEngineTest, TwoImagesFromFilesGiveTransformersTokens) {
  auto engine = Engine::Load("testdata/tiny/qwen3vl", EngineOptions{.threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto taps = fixture::GoldenTaps::Open("testdata/golden/qwen3vl/two.safetensors");
  ASSERT_TRUE(taps.ok()) << taps.status().ToString();
  const auto& meta = taps->file().metadata();
  std::vector<ImageInput> images;
  for (const std::string& name : Split(meta.at("images"))) {
    images.emplace_back("testdata/golden/inputs/" + name + ".png");
  }
  GenerateOptions o;
  o.max_tokens = 32;
  o.stop_at_eos = false;
  auto r = (*engine)->Generate(images, meta.at("prompt"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_ids, Ids(*taps->file().Find("input_ids")));
  EXPECT_EQ(r->output_ids, Ids(*taps->file().Find("generated_ids")));
}

// A decode step embeds a sampled <|image_pad|> as a plain token, as transformers does (no
// pixel values then, so no placeholder check); with features the counts must agree.
TEST(QwenEmbedTest, ASampledImagePadEmbedsWithoutFeatures) {
  for (const char* ckpt : {"qwen2vl", "qwen25vl", "qwen3vl"}) {
    SCOPED_TRACE(ckpt);
    auto m = LoadModel(std::string("testdata/tiny/") + ckpt);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const VlModel& model = *m->model;
    ThreadPool pool(1);
    Backend backend(pool);
    Arena arena(1 << 20);
    const Exec ex{backend, Precision::kF32, arena};
    const int32_t pad = model.spec().image_token_id;
    const int64_t H = model.spec().hidden_size;
    std::vector<float> x(2 * H), features(model.spec().feature_floats(), 0.5f);
    EXPECT_TRUE(model.Embed(ex, std::vector<int32_t>{pad}, nullptr, 0, x.data(), nullptr).ok());
    // One pad, two feature rows: refused (get_placeholder_mask's ValueError).
    const Status two =
        model.Embed(ex, std::vector<int32_t>{pad, 1}, features.data(), 2, x.data(), nullptr);
    EXPECT_EQ(two.code(), StatusCode::kInvalidArgument) << two.ToString();
    ASSERT_TRUE(
        model.Embed(ex, std::vector<int32_t>{pad, 1}, features.data(), 1, x.data(), nullptr).ok());
    EXPECT_EQ(x[0], 0.5f);  // the feature row's first H floats
  }
}

// Grounding: each checkpoint's frame. Qwen2.5-VL boxes are pixels of the resized image (a
// 60x40 image is fed as 84x56: smart_resize with min_pixels 56*56), Qwen3-VL's a 0-1000 grid,
// PaliGemma's <loc> tokens.
TEST(GroundingTest, EachFamilysBoxesMapToTheOriginalImage) {
  auto q25 = LoadGroundingFormat("testdata/tiny/qwen25vl");
  ASSERT_TRUE(q25.ok()) << q25.status().ToString();
  EXPECT_EQ(q25->kind, GroundingFormat::Kind::kQwenResizedPixels);
  EXPECT_EQ(q25->factor, 28);
  const std::string answer = "```json\n[{\"bbox_2d\": [42, 14, 84, 56], \"label\": \"cat\"}]\n```";
  auto b25 = ParseGroundedDetections(*q25, answer, 60, 40);
  ASSERT_EQ(b25.size(), 1u);
  EXPECT_EQ(b25[0].label, "cat");
  EXPECT_FLOAT_EQ(b25[0].x0, 30.0f);  // 42 / 84 * 60
  EXPECT_FLOAT_EQ(b25[0].y0, 10.0f);  // 14 / 56 * 40
  EXPECT_FLOAT_EQ(b25[0].x1, 60.0f);
  EXPECT_FLOAT_EQ(b25[0].y1, 40.0f);

  auto q3 = LoadGroundingFormat("testdata/tiny/qwen3vl");
  ASSERT_TRUE(q3.ok()) << q3.status().ToString();
  EXPECT_EQ(q3->kind, GroundingFormat::Kind::kQwenGrid1000);
  auto b3 = ParseGroundedDetections(*q3, answer, 60, 40);
  ASSERT_EQ(b3.size(), 1u);
  EXPECT_FLOAT_EQ(b3[0].x0, 42.0f * 60 / 1000);
  EXPECT_FLOAT_EQ(b3[0].y1, 56.0f * 40 / 1000);

  auto pg = LoadGroundingFormat("testdata/tiny/pg2");
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  EXPECT_EQ(pg->kind, GroundingFormat::Kind::kLocTokens);
  EXPECT_TRUE(ParseGroundedDetections(*pg, answer, 60, 40).empty());
  EXPECT_EQ(ParseGroundedDetections(*pg, "<loc0000><loc0000><loc1023><loc1023> x", 60, 40).size(),
            1u);
  // Not a directory (a GGUF file, a missing path): <loc> tokens.
  auto none = LoadGroundingFormat("testdata/tiny/does-not-exist");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kind, GroundingFormat::Kind::kLocTokens);
}

}  // namespace
}  // namespace ocular

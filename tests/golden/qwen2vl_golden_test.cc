// Qwen2-VL (qwen2_vl) and Qwen2.5-VL (qwen2_5_vl) against transformers 4.57, tap by tap (fixtures:
// tools/reference/make_qwen2vl.py): the processor's pixels, image_grid_thw, ids, get_rope_index
// positions and rope_deltas exactly; then the vision tower, every decoder layer, the logits
// and 32 greedy tokens from the prompt the processor built.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "image/image.h"
#include "kernels/exec.h"
#include "models/qwen2vl/config.h"
#include "models/qwen2vl/processor.h"
#include "models/registry.h"
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

constexpr char kTiny[] = "testdata/tiny/qwen2vl";

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

// smart_resize's branches on sizes worked out by hand from image_processing_qwen2_vl.py.
TEST(Qwen2VLProcessorTest, SmartResizeRoundsScalesAndRefuses) {
  const int64_t lo = 56 * 56, hi = 28 * 28 * 1280;
  struct Case {
    int h, w, want_h, want_w;
  };
  const Case cases[] = {
      {56, 56, 56, 56},         // already a multiple
      {42, 70, 56, 56},         // round(1.5) = 2, round(2.5) = 2 (half to even), then >= min
      {40, 60, 56, 84},         // below min_pixels: ceil(h * beta / 28) * 28
      {480, 640, 476, 644},     // nearest multiples
      {4000, 3000, 1148, 840},  // above max_pixels: floor(h / beta / 28) * 28
  };
  for (const Case& c : cases) {
    auto r = qwen2vl::SmartResize(c.h, c.w, 28, lo, hi);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->first, c.want_h) << c.h << "x" << c.w;
    EXPECT_EQ(r->second, c.want_w) << c.h << "x" << c.w;
  }
  auto wide = qwen2vl::SmartResize(10, 2010, 28, lo, hi);
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(wide.status().code(), StatusCode::kInvalidArgument);
}

// Qwen2VLImageProcessor on 46 files of odd sizes and modes (RGB, grey, palette; RGBA, LA and a
// palette with tRNS, whose alpha it drops; CMYK JPEG, 16-bit grey and RGB, 1-bit, EXIF
// orientation 6 in a PNG and a JPEG, which it does not apply): pixel values and image_grid_thw
// byte-identical.
TEST(Qwen2VLProcessorTest, PixelsAndGridsMatchQwen2VLImageProcessor) {
  auto fx = fixture::GoldenTaps::Open("testdata/golden/qwen2vl-pixels.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().ToString();
  const auto& meta = fx->file().metadata();
  qwen2vl::ImageConfig c;  // the defaults, as make_processor's (CLIP mean/std, BICUBIC)
  c.patch_size = std::stoi(meta.at("patch_size"));
  c.min_pixels = std::stoll(meta.at("min_pixels"));
  c.max_pixels = std::stoll(meta.at("max_pixels"));
  auto parsed = qwen2vl::ParseImageConfig("{}", "defaults");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  c.pp = parsed->pp;
  int images = 0;
  for (const std::string& name : fx->TapNames()) {
    if (!name.ends_with("/pixel_values")) continue;
    const std::string key = name.substr(0, name.find('/'));
    SCOPED_TRACE(key);
    const std::string stem = "testdata/golden/qwen2vl-pixels/" + key;
    auto image = LoadImage(fs::exists(stem + ".png") ? stem + ".png" : stem + ".jpg");
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    auto patches = qwen2vl::Patchify(*image, c);
    ASSERT_TRUE(patches.ok()) << patches.status().ToString();
    const std::vector<int64_t> grid = I64(*fx->file().Find(key + "/image_grid_thw"));
    EXPECT_EQ(std::vector<int64_t>(patches->grid.begin(), patches->grid.end()), grid);
    EXPECT_EQ(Differ(patches->values, *fx->file().Find(name)), 0);
    ++images;
  }
  EXPECT_GE(images, 46);
}

// The tiny checkpoint's preprocessor_config.json and what is refused.
TEST(Qwen2VLProcessorTest, ConfigsParseAndRefuse) {
  auto c = qwen2vl::ParseImageConfig(
      R"({"size": {"shortest_edge": 100, "longest_edge": 1000}, "max_pixels": 2000})", "p");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->min_pixels, 100);
  EXPECT_EQ(c->max_pixels, 2000);  // max_pixels overrides size.longest_edge (__init__)
  EXPECT_FLOAT_EQ(static_cast<float>(c->pp.image_mean[0]), 0.48145466f);
  EXPECT_FALSE(qwen2vl::ParseImageConfig(R"({"do_resize": false})", "p").ok());
  EXPECT_FALSE(qwen2vl::ParseImageConfig(R"({"size": {"height": 3}})", "p").ok());
  EXPECT_FALSE(qwen2vl::ParseImageConfig(R"({"resample": 1})", "p").ok());

  const char* base = R"({"model_type": "qwen2_vl", "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vision_config": {"hidden_size": 64, "embed_dim": 32,
      "num_heads": 2}, "vocab_size": 200000)";
  auto ok = qwen2vl::ParseQwen2VLConfig(
      std::string(base) + R"(, "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}})",
      "c");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->text.num_key_value_heads, 2);
  EXPECT_EQ(ok->text.mrope_section[1], 3);
  struct Bad {
    std::string tail;
    StatusCode code;
  };
  const Bad bad[] = {
      {"}", StatusCode::kDataLoss},  // no rope_scaling: no mrope_section
      {R"(, "rope_scaling": {"type": "mrope", "mrope_section": [2, 2, 2]}})",
       StatusCode::kDataLoss},  // 6 != head_dim / 2
      {R"(, "rope_scaling": {"type": "linear", "factor": 2, "mrope_section": [2, 3, 3]}})",
       StatusCode::kUnimplemented},
      {R"(, "use_sliding_window": true, "rope_scaling": {"mrope_section": [2, 3, 3]}})",
       StatusCode::kUnimplemented},
      {R"(, "hidden_act": "gelu", "rope_scaling": {"mrope_section": [2, 3, 3]}})",
       StatusCode::kUnimplemented},
  };
  // Qwen2.5-VL: the vision config's own names (hidden_size is the ViT's, out_hidden_size the
  // merger's output) and the window fields.
  auto v25 = qwen2vl::ParseQwen2VLConfig(
      R"({"model_type": "qwen2_5_vl", "hidden_size": 64, "num_attention_heads": 4,
          "vision_config": {"hidden_size": 32, "out_hidden_size": 64, "num_heads": 2,
          "intermediate_size": 40, "depth": 4, "fullatt_block_indexes": [1, 3],
          "window_size": 112}, "vocab_size": 200000,
          "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}})",
      "c25");
  ASSERT_TRUE(v25.ok()) << v25.status().ToString();
  EXPECT_TRUE(v25->qwen25());
  EXPECT_EQ(v25->vision.embed_dim, 32);
  EXPECT_EQ(v25->vision.hidden_size, 64);
  EXPECT_EQ(v25->vision.mlp_dim(), 40);
  EXPECT_EQ(v25->vision.window_merged(), 4);  // 112 px / 2 / 14
  EXPECT_TRUE(v25->vision.full_attention(3));
  EXPECT_FALSE(v25->vision.full_attention(2));
  for (const Bad& b : bad) {
    auto r = qwen2vl::ParseQwen2VLConfig(base + b.tail, "config.json");
    ASSERT_FALSE(r.ok()) << b.tail;
    EXPECT_EQ(r.status().code(), b.code) << r.status().ToString();
  }
}

// The released configs' shapes (Qwen/Qwen2-VL-2B-Instruct's flat config.json, Qwen/Qwen2.5-VL-
// 3B-Instruct's), keys ocular does not read included (in_chans, spatial_patch_size, sliding_window
// with use_sliding_window false, vision_token_id).
TEST(Qwen2VLConfigTest, ReleasedConfigsParse) {
  auto q2 = qwen2vl::ParseQwen2VLConfig(R"({"architectures": ["Qwen2VLForConditionalGeneration"],
      "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
      "vision_start_token_id": 151652, "vision_end_token_id": 151653, "vision_token_id": 151654,
      "image_token_id": 151655, "video_token_id": 151656, "hidden_act": "silu",
      "hidden_size": 1536, "intermediate_size": 8960, "max_position_embeddings": 32768,
      "max_window_layers": 28, "model_type": "qwen2_vl", "num_attention_heads": 12,
      "num_hidden_layers": 28, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
      "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
      "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
      "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16,
        "in_chans": 3, "hidden_size": 1536, "patch_size": 14, "spatial_merge_size": 2,
        "spatial_patch_size": 14, "temporal_patch_size": 2},
      "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}, "vocab_size": 151936})",
                                        "Qwen2-VL-2B-Instruct");
  ASSERT_TRUE(q2.ok()) << q2.status().ToString();
  EXPECT_FALSE(q2->qwen25());
  EXPECT_TRUE(q2->tie_word_embeddings);  // flat config: the top level's
  EXPECT_EQ(q2->text.head_dim(), 128);
  EXPECT_EQ(q2->vision.mlp_dim(), 5120);
  EXPECT_EQ(q2->text.eos_token_id, 151645);
  auto q25 = qwen2vl::ParseQwen2VLConfig(R"({"model_type": "qwen2_5_vl", "hidden_size": 2048,
      "intermediate_size": 11008, "num_attention_heads": 16, "num_hidden_layers": 36,
      "num_key_value_heads": 2, "max_position_embeddings": 128000, "rms_norm_eps": 1e-06,
      "rope_theta": 1000000.0, "tie_word_embeddings": true, "vocab_size": 151936,
      "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default", "type": "default"},
      "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280,
        "intermediate_size": 3420, "num_heads": 16, "in_chans": 3, "out_hidden_size": 2048,
        "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14, "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2,
        "temporal_patch_size": 2}})",
                                         "Qwen2.5-VL-3B-Instruct");
  ASSERT_TRUE(q25.ok()) << q25.status().ToString();
  EXPECT_TRUE(q25->qwen25());
  EXPECT_EQ(q25->vision.embed_dim, 1280);
  EXPECT_EQ(q25->vision.hidden_size, 2048);
  EXPECT_EQ(q25->vision.window_merged(), 4);
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
    // make_qwen2vl.py input_images: inputs/<name>.png, or a path under testdata/golden.
    const std::string dir = names[i].find('/') != std::string::npos ? "" : "inputs/";
    OCULAR_ASSIGN_OR_RETURN(Image im, LoadImage("testdata/golden/" + dir + names[i] + ".png"));
    OCULAR_RETURN_IF_ERROR(p.AddImage(im, false, static_cast<int32_t>(i), &with_images));
  }
  PromptOptions o;
  o.chat = chat;
  return p.MakePrompt(std::move(with_images), static_cast<int>(names.size()), text, nullptr, o);
}

// Qwen2-VL: LayerNorm + QuickGELU ViT, untied lm_head. Qwen2.5-VL: RMSNorm + SwiGLU ViT with
// window attention (uneven windows), tied embeddings. qwen2vl-bf16: Qwen2-VL's weights in
// bfloat16, against torch's bf16 run (two cases).
struct Checkpoint {
  const char* name;
  double tolerance;  // relative error per tap
  size_t cases;
};

class Qwen2VLGoldenTest : public testing::TestWithParam<Checkpoint> {};

TEST_P(Qwen2VLGoldenTest, EveryTapLogitsAndGreedyDecodeMatchTransformers) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  auto m = LoadTiny(GetParam().name);
  ASSERT_NE(m, nullptr);
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
    // Processor: ids, pixel values, grids, get_rope_index's positions and rope_deltas.
    ASSERT_EQ(prompt->ids, Ids(*g.Find("input_ids")));
    const std::vector<int64_t> want_pos = I64(*g.Find("position_ids"));
    const int64_t T = prompt->size();
    for (int a = 0; a < 3; ++a) {
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(prompt->positions.At(a, t, T), want_pos[a * T + t])
            << "axis " << a << " row " << t;
      }
    }
    EXPECT_EQ(prompt->positions.decode_offset, g.Find("rope_deltas")->as<int64_t>()[0]);
    if (const TensorView* pv = g.Find("pixel_values")) {
      EXPECT_EQ(Differ(prompt->pixels, *pv), 0) << "pixel values differ";
      const std::vector<int64_t> grids = I64(*g.Find("image_grid_thw"));
      ASSERT_EQ(grids.size(), 3 * prompt->images.size());
      for (size_t i = 0; i < prompt->images.size(); ++i) {
        for (int k = 0; k < 3; ++k) EXPECT_EQ(prompt->images[i].grid[k], grids[3 * i + k]);
      }
    } else {
      EXPECT_TRUE(prompt->images.empty());
    }
    // Model: every tap, the logits and the greedy continuation.
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

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, Qwen2VLGoldenTest,
                         testing::Values(Checkpoint{"qwen2vl", 1e-5, 8},
                                         Checkpoint{"qwen25vl", 1e-5, 8},
                                         Checkpoint{"qwen2vl-bf16", 1e-2, 2},
                                         Checkpoint{"qwen25vl-bf16", 1e-2, 2}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Sequences at different rope_deltas decode together in one [B, H] pass: an image prompt
// (delta -6) and a text-only one (delta 0) give transformers' tokens as when alone.
TEST(Qwen2VLBatchTest, SequencesOfOtherRopeDeltasDecodeTogether) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  auto m = LoadTiny("qwen25vl");
  ASSERT_NE(m, nullptr);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::vector<int32_t>> want;
  std::vector<std::vector<float>> features;
  for (const char* c : {"two", "text_only"}) {
    auto taps =
        fixture::GoldenTaps::Open(std::string("testdata/golden/qwen25vl/") + c + ".safetensors");
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
    if (!p.prompt->images.empty()) {
      m->runner->EncodeImages(*p.prompt, 0, p.prompt->images.size(), features.back().data(),
                              nullptr);
    }
    auto cache = m->kv->Acquire(p.prompt->size() + p.max_new_tokens, 0);
    ASSERT_TRUE(cache.ok());
    const bool images = !p.prompt->images.empty();
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

TEST(Qwen2VLPromptTest, PromptsWithTheWrongTagsAreRefused) {
  auto m = LoadModel(kTiny);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Processor& p = *m->processor;
  const std::string tag = qwen2vl::Qwen2VLProcessor::kImageTag;
  EXPECT_FALSE(CasePrompt(p, "photo", tag + tag + "two tags, one image").ok());
  EXPECT_FALSE(CasePrompt(p, "photo", "<|image_pad|> a pad without its vision_start").ok());
  EXPECT_FALSE(CasePrompt(p, "", tag + "a tag, no image").ok());
  // No tag at all: the images go first, as "<tag><tag>text".
  auto first = CasePrompt(p, "photo,gray", "what differs?");
  auto tagged = CasePrompt(p, "photo,gray", tag + tag + "what differs?");
  ASSERT_TRUE(first.ok() && tagged.ok());
  EXPECT_EQ(first->ids, tagged->ids);
  EXPECT_EQ(first->positions.ids, tagged->positions.ids);
}

// As `ocular run -m testdata/tiny/qwen25vl -i photo.png -i gray.png -p "..."` runs it: files ->
// processor -> scheduler -> model, transformers' tokens (the runtime's own prompt path).
TEST(Qwen2VLEngineTest, TwoImagesFromFilesGiveTransformersTokens) {
  auto engine = Engine::Load("testdata/tiny/qwen25vl", EngineOptions{.threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto taps = fixture::GoldenTaps::Open("testdata/golden/qwen25vl/two.safetensors");
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

}  // namespace
}  // namespace ocular

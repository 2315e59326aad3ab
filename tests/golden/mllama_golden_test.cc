// Llama 3.2 Vision (mllama) against transformers, tap by tap, in f32 and bf16 (fixtures:
// tools/reference/make_mllama.py, with Meta's intermediate-feature definition). The model is
// checked with the golden input_ids, pixel_values and aspect_ratio_ids; the processor
// separately: prompt ids from each case's prompt (raw prompts in Meta's format, BOS first),
// pixels from MllamaImageProcessor on 44 images.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "image/image.h"
#include "kernels/exec.h"
#include "models/mllama/config.h"
#include "models/mllama/decoder.h"
#include "models/mllama/mllama.h"
#include "models/mllama/processor.h"
#include "models/registry.h"
#include "ocular/quantize.h"
#include "runtime/generator.h"
#include "runtime/kv_pool.h"
#include "runtime/parity.h"
#include "runtime/recorder.h"
#include "runtime/runner.h"
#include "support/cases.h"
#include "support/fixture.h"
#include "support/golden.h"
#include "support/harness.h"
#include "support/prompts.h"

namespace ocular {
namespace {

using testing_support::CaseFiles;
using testing_support::FloatGguf;
using testing_support::Ids;
using testing_support::Split;

namespace fs = std::filesystem;

struct Checkpoint {
  const char* name;
  double tolerance;  // relative error per tap
  // Run from a GGUF file that `ocular quantize` writes in the checkpoint's own float type: the
  // GGUF reader, name table and embedded config/tokenizer must change nothing.
  bool via_gguf = false;
};
// bf16 (the tiny checkpoint in bfloat16, run as torch runs it): every tap is bit-identical to
// torch's bf16 run with the avx2 and avx512 kernels; the scalar kernels accumulate some dot
// products in another order, which flips single bf16 roundings (measured up to 9.2e-5 relative,
// cross.3.v; greedy tokens identical). 1e-3 leaves room for that, far below the 1e-2 bound.
constexpr Checkpoint kCheckpoints[] = {{"mllama", 1e-5},
                                       {"mllama-1x", 1e-5},
                                       {"mllama-bf16", 1e-3},
                                       {"mllama", 1e-5, true},
                                       {"mllama-bf16", 1e-3, true}};
constexpr const char* kProcessorCheckpoints[] = {"mllama", "mllama-1x"};

// The tiny checkpoint's runner (as the engine's "auto": a bf16 checkpoint runs in bf16 with a
// bf16 KV cache) and its mllama model.
struct Loaded : testing_support::LoadedRunner {
  const mllama::Mllama& model() const { return dynamic_cast<const mllama::Mllama&>(*m.model); }
};

std::unique_ptr<Loaded> Load(const std::string& path) {
  auto l = std::make_unique<Loaded>();
  const Status loaded =
      testing_support::LoadRunnerInto(path, RunnerLimits{.max_batch = 2, .max_images = 3}, l.get());
  EXPECT_TRUE(loaded.ok()) << loaded.ToString();
  return loaded.ok() ? std::move(l) : nullptr;
}

// make_mllama.py synthetic(): the pattern of the images that are not PNG files.
Image Synthetic(int width, int height, int seed) {
  Image im(width, height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        im.pixel(x, y)[c] = static_cast<uint8_t>(
            (x * (7 + c) + y * (13 + 2 * c) + seed * 31 + (x * y) % (17 + c)) % 256);
      }
    }
  }
  return im;
}

Image CaseImage(const std::string& name) {
  if (name == "small") return Synthetic(20, 20, 1);
  if (name == "strip") return Synthetic(50, 28, 2);
  if (name == "wide") return Synthetic(60, 25, 3);
  // make_mllama.py make_images: inputs/<name>.png, or <name>.png under testdata/golden for a path
  const std::string dir = name.find('/') != std::string::npos ? "" : "inputs/";
  auto image = LoadImage("testdata/golden/" + dir + name + ".png");
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? *image : Image();
}

// Each case's golden input_ids, pixel_values and aspect_ratio_ids through `m`: every tap, the
// logits and the greedy continuation.
void ExpectCasesMatch(Loaded* m, const std::vector<std::string>& cases, double tolerance) {
  for (const std::string& file : cases) {
    SCOPED_TRACE(file);
    auto taps = fixture::GoldenTaps::Open(file);
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    const SafetensorsFile* golden = &taps->file();
    const TensorView* ids = golden->Find("input_ids");
    const TensorView* gen = golden->Find("generated_ids");
    ASSERT_TRUE(ids && gen);
    const TensorView* pv = golden->Find("pixel_values");
    const ModelSpec& spec = m->m.model->spec();
    GenerationRequest req;
    req.prompt = pv ? testing_support::MllamaFixturePrompt(spec, Ids(*ids), *pv,
                                                           *golden->Find("aspect_ratio_ids"))
                    : std::make_shared<Prompt>(TextPrompt(Ids(*ids)));
    req.max_new_tokens = static_cast<int>(gen->numel());
    req.record_prompt_logits = true;
    req.record_decode_logits = true;
    RecordingTracer tracer;
    auto out = Generate(*m->runner, *m->kv, req, &tracer);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    tracer.Add("decode_logits", out->decode_logits);

    if (std::getenv("OCULAR_PRINT_TAPS")) std::printf("%s\n", file.c_str());
    const int compared = testing_support::ExpectEveryTapWithin(*taps, tracer, tolerance);
    EXPECT_GE(compared, pv ? 15 : 6);
    EXPECT_EQ(out->generated, Ids(*gen)) << "greedy continuation differs";
  }
}

// The processor rebuilds a case's input_ids from its prompt (raw: Meta's format) and, for a
// chat case, from its one user turn through the chat template.
void ExpectPromptIds(const LoadedModel& loaded, const SafetensorsFile& golden) {
  const auto& meta = golden.metadata();
  const int n_images = static_cast<int>(Split(meta.at("images")).size());
  auto prompt = loaded.processor->BuildPrompt(n_images, meta.at("prompt"), {});
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_EQ(prompt->ids, Ids(*golden.Find("input_ids")));
  if (meta.count("chat_text")) {
    PromptOptions chat;
    chat.chat = true;
    auto turn = loaded.processor->BuildPrompt(n_images, meta.at("chat_text"), chat);
    ASSERT_TRUE(turn.ok()) << turn.status().ToString();
    EXPECT_EQ(turn->ids, Ids(*golden.Find("input_ids"))) << "chat template";
  }
}

class MllamaGoldenTest : public testing::TestWithParam<Checkpoint> {};

TEST_P(MllamaGoldenTest, EveryTapLogitsAndGreedyDecodeMatchTransformers) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  const std::string ck = GetParam().name;
  const std::vector<std::string> cases = CaseFiles(ck);
  ASSERT_GE(cases.size(), 2u);
  const std::string path = GetParam().via_gguf
                               ? FloatGguf("testdata/tiny/" + ck, ck, ck.ends_with("bf16"))
                               : "testdata/tiny/" + ck;
  auto m = Load(path);
  if (GetParam().via_gguf) fs::remove(path);  // mapped: the data stays until unmapped
  ASSERT_TRUE(m);
  ExpectCasesMatch(m.get(), cases, GetParam().tolerance);
}

// The tiny checkpoint with a tokenizer.json whose post_processor prepends <|begin_of_text|>, as
// the hub's does: a raw prompt is still [BOS, <|image|>, ...] (Meta's format; transformers'
// processor gives [BOS, <|image|>, BOS, ...]), a chat turn is tokenized as transformers does,
// and transformers' model on those ids gives the goldens.
TEST(MllamaBosTokenizerTest, MetaFormatIdsAndTheModelOnThem) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  const fs::path dir =
      fs::temp_directory_path() / ("ocular_mllama_bos_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy("testdata/tiny/mllama", dir);
  fs::copy_file("testdata/golden/mllama-bos/tokenizer.json", dir / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  auto m = Load(dir.string());
  fs::remove_all(dir);  // mapped: the data stays until unmapped
  ASSERT_TRUE(m);
  const Tokenizer& tok = m->m.processor->tokenizer();
  const int32_t bos = tok.TokenToId("<|begin_of_text|>");
  ASSERT_EQ(tok.AddSpecialTokens(std::vector<int32_t>{7}), (std::vector<int32_t>{bos, 7}));
  const std::vector<std::string> cases = CaseFiles("mllama-bos");
  ASSERT_EQ(cases.size(), 2u);
  for (const std::string& file : cases) {
    SCOPED_TRACE(file);
    auto taps = fixture::GoldenTaps::Open(file);
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    ExpectPromptIds(m->m, taps->file());
    const std::vector<int32_t> ids = Ids(*taps->file().Find("input_ids"));
    EXPECT_EQ(std::count(ids.begin(), ids.end(), bos), 1);
    EXPECT_EQ(ids.front(), bos);
  }
  ExpectCasesMatch(m.get(), cases, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, MllamaGoldenTest, testing::ValuesIn(kCheckpoints),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return info.param.via_gguf ? n + "_gguf" : n;
                         });

// The cross-attention K/V of a request's images are computed once per image and cross layer
// (at the prefill), never again while decoding; a text-only request computes none.
TEST(MllamaCrossKvTest, ComputedOncePerImagePerLayer) {
  auto m = Load("testdata/tiny/mllama");
  ASSERT_TRUE(m);
  auto taps = fixture::GoldenTaps::Open("testdata/golden/mllama/three.safetensors");
  ASSERT_TRUE(taps.ok());
  const SafetensorsFile& g = taps->file();
  GenerationRequest req;
  req.prompt =
      testing_support::MllamaFixturePrompt(m->m.model->spec(), Ids(*g.Find("input_ids")),
                                           *g.Find("pixel_values"), *g.Find("aspect_ratio_ids"));
  req.max_new_tokens = 12;
  const int64_t before = m->model().cross_kv_computed();
  auto out = Generate(*m->runner, *m->kv, req, nullptr);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->generated.size(), 12u);
  const int64_t layers =
      static_cast<int64_t>(m->model().config().text.cross_attention_layers.size());
  EXPECT_EQ(m->model().cross_kv_computed() - before, 3 * layers);  // 3 images
  GenerationRequest text;
  text.prompt =
      std::make_shared<Prompt>(TextPrompt({m->m.processor->tokenizer().bos_id(), 100, 101}));
  text.max_new_tokens = 5;
  ASSERT_TRUE(Generate(*m->runner, *m->kv, text, nullptr).ok());
  EXPECT_EQ(m->model().cross_kv_computed() - before, 3 * layers);
}

// A sequence with images and a text-only one decoded in one batch give what each gives alone.
TEST(MllamaBatchTest, MixedBatchEqualsAlone) {
  auto m = Load("testdata/tiny/mllama");
  ASSERT_TRUE(m);
  auto taps = fixture::GoldenTaps::Open("testdata/golden/mllama/two.safetensors");
  ASSERT_TRUE(taps.ok());
  const SafetensorsFile& g = taps->file();
  const ModelSpec& spec = m->m.model->spec();
  const std::shared_ptr<Prompt> image_prompt = testing_support::MllamaFixturePrompt(
      spec, Ids(*g.Find("input_ids")), *g.Find("pixel_values"), *g.Find("aspect_ratio_ids"));
  std::vector<float> features(2 * spec.image_tokens * spec.hidden_size);
  m->runner->EncodeImages(*image_prompt, 0, 2, features.data(), nullptr);
  auto text_taps = fixture::GoldenTaps::Open("testdata/golden/mllama/text_only.safetensors");
  ASSERT_TRUE(text_taps.ok());
  std::vector<Sequence> seqs;
  seqs.reserve(2);
  for (int q = 0; q < 2; ++q) {
    SequenceParams p;
    p.prompt =
        q == 0 ? image_prompt
               : std::make_shared<Prompt>(TextPrompt(Ids(*text_taps->file().Find("input_ids"))));
    p.max_new_tokens = 8;
    auto kv = m->kv->Acquire(p.prompt->size() + 8, p.prompt->feature_rows());
    ASSERT_TRUE(kv.ok());
    seqs.emplace_back(std::move(p), std::move(*kv), m->runner->vocab(), m->m.model->NewState());
    ASSERT_TRUE(m->runner->Prefill(seqs.back(), q == 0 ? features.data() : nullptr, nullptr).ok());
  }
  std::vector<Sequence*> batch = {&seqs[0], &seqs[1]};
  while (!seqs[0].done() || !seqs[1].done()) m->runner->DecodeStep(batch);
  const std::vector<int32_t> image_gen = Ids(*g.Find("generated_ids"));
  EXPECT_EQ(seqs[0].generated(), std::vector<int32_t>(image_gen.begin(), image_gen.begin() + 8));
  const std::vector<int32_t> text_gen = Ids(*text_taps->file().Find("generated_ids"));
  EXPECT_EQ(seqs[1].generated(), std::vector<int32_t>(text_gen.begin(), text_gen.begin() + 8));
}

// The processor rebuilds every case's input_ids from its prompt, and its pixels from the images.
TEST(MllamaProcessorTest, PromptIdsAndCasePixelsMatchMllamaProcessor) {
  for (const char* ck : kProcessorCheckpoints) {
    auto loaded = LoadModel(std::string("testdata/tiny/") + ck);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    for (const std::string& file : CaseFiles(ck)) {
      SCOPED_TRACE(file);
      auto taps = fixture::GoldenTaps::Open(file);
      ASSERT_TRUE(taps.ok());
      const auto& meta = taps->file().metadata();
      const std::vector<std::string> images = Split(meta.at("images"));
      ExpectPromptIds(*loaded, taps->file());
      const TensorView* pv = taps->file().Find("pixel_values");
      ASSERT_EQ(pv != nullptr, !images.empty());
      if (!pv) continue;
      const auto want = testing_support::MllamaFixturePrompt(
          loaded->model->spec(), {}, *pv, *taps->file().Find("aspect_ratio_ids"));
      for (size_t i = 0; i < images.size(); ++i) {
        Prompt got;
        ASSERT_TRUE(
            loaded->processor->AddImage(CaseImage(images[i]), ImageOptions{}, 0, &got).ok());
        ASSERT_EQ(got.images.size(), 1u);
        ASSERT_EQ(got.images[0].pixel_count, want->images[i].pixel_count);
        EXPECT_EQ(got.images[0].grid, want->images[i].grid) << images[i] << ": aspect ratio";
        int64_t differ = 0;
        for (int64_t k = 0; k < got.images[0].pixel_count; ++k) {
          differ += got.pixels[k] != want->image_pixels(i)[k];
        }
        EXPECT_EQ(differ, 0) << images[i] << ": pixels differ from MllamaImageProcessor";
        auto px = loaded->processor->Pixels(CaseImage(images[i]));
        ASSERT_TRUE(px.ok()) << px.status().ToString();
        EXPECT_TRUE(std::equal(px->data.begin(), px->data.end(), got.pixels.begin()));
      }
    }
  }
}

// MllamaImageProcessor on 44 images of every canvas (10-px tiles, max_image_tiles 4): the
// same tiles, bit for bit, and the same aspect ratio ids.
TEST(MllamaProcessorTest, TilesMatchMllamaImageProcessorOnManyImages) {
  auto file = SafetensorsFile::Open("testdata/golden/mllama-pixels.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  mllama::TileConfig config;
  config.pp.height = config.pp.width = 10;
  config.pp.resample = ResampleFilter::kBilinear;
  config.pp.image_mean = {0.48145466, 0.4578275, 0.40821073};
  config.pp.image_std = {0.26862954, 0.26130258, 0.27577711};
  config.max_image_tiles = 4;
  int images = 0;
  for (const auto& [name, view] : file->tensors()) {
    if (!name.ends_with("/pixel_values")) continue;
    SCOPED_TRACE(name);
    int w = 0, h = 0, seed = 0;  // "<w>x<h>s<seed>/pixel_values"
    ASSERT_EQ(std::sscanf(name.c_str(), "%dx%ds%d/", &w, &h, &seed), 3);
    const TensorView* id = file->Find(name.substr(0, name.find('/')) + "/aspect_ratio_id");
    ASSERT_NE(id, nullptr);
    const mllama::TiledImage t = mllama::TileImage(Synthetic(w, h, seed), config);
    ASSERT_EQ(t.pixels.numel(), view.numel()) << "tile count differs";
    int64_t differ = 0;
    for (int64_t k = 0; k < view.numel(); ++k) differ += t.pixels.data[k] != view.as<float>()[k];
    EXPECT_EQ(differ, 0) << "pixels differ from MllamaImageProcessor";
    EXPECT_EQ(t.aspect_ratio_id, id->as<int64_t>()[0]);
    ++images;
  }
  EXPECT_GE(images, 30);
}

// MllamaImageProcessor on every transparent source of make_alpha_fixtures.py (RGBA 8/16-bit,
// LA, palettes with tRNS, grey with tRNS, GIF, WebP, BMP bitfields; an RGB PNG with a tRNS
// colour it does not composite): its convert_to_rgb composites onto white, so the decoded
// image's alpha must reach the processor. The same tiles, bit for bit.
TEST(MllamaProcessorTest, TransparentImagesAreCompositedOntoWhite) {
  auto file = SafetensorsFile::Open("testdata/golden/alpha.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  mllama::TileConfig config;
  config.pp.height = config.pp.width = std::stoi(file->metadata().at("mllama_tile"));
  config.pp.resample = ResampleFilter::kBilinear;
  config.pp.image_mean = {0.48145466, 0.4578275, 0.40821073};
  config.pp.image_std = {0.26862954, 0.26130258, 0.27577711};
  config.max_image_tiles = 4;
  int images = 0, composited = 0;
  for (const auto& entry : std::filesystem::directory_iterator("testdata/golden/alpha")) {
    const std::string source = entry.path().filename().string();
    if (!entry.is_regular_file() || source == "composite.png") continue;
    SCOPED_TRACE(source);
    const std::string key = source.substr(0, source.find('.'));
    const TensorView* want = file->Find(key + "/mllama/pixel_values");
    const TensorView* id = file->Find(key + "/mllama/aspect_ratio_id");
    ASSERT_TRUE(want != nullptr && id != nullptr);
    auto image = LoadImage(entry.path().string());
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    composited += !image->alpha.empty();
    const mllama::TiledImage t = mllama::TileImage(*image, config);
    ASSERT_EQ(t.pixels.numel(), want->numel()) << "tile count differs";
    int64_t differ = 0;
    for (int64_t k = 0; k < want->numel(); ++k) differ += t.pixels.data[k] != want->as<float>()[k];
    EXPECT_EQ(differ, 0) << "pixels differ from MllamaImageProcessor";
    EXPECT_EQ(t.aspect_ratio_id, id->as<int64_t>()[0]);
    ++images;
  }
  EXPECT_GE(images, 12);
  EXPECT_GE(composited, 10);
}

TEST(MllamaProcessorTest, RefusesMismatchedMarkersAndTooManyImages) {
  auto m = LoadModel("testdata/tiny/mllama");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Processor& p = *m->processor;
  EXPECT_EQ(p.BuildPrompt(2, "<|image|> one marker", {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(p.BuildPrompt(1, "no marker", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.BuildPrompt(5, "<|image|><|image|><|image|><|image|><|image|>", {}).status().code(),
            StatusCode::kInvalidArgument);
  auto text = p.BuildPrompt(0, "hello", {});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->ids.front(), p.tokenizer().TokenToId("<|begin_of_text|>"));
  auto lead = p.BuildPrompt(2, "<|image|><|image|>hi", {});  // Meta's format: BOS first
  ASSERT_TRUE(lead.ok());
  EXPECT_EQ(lead->ids[0], p.tokenizer().TokenToId("<|begin_of_text|>"));
  EXPECT_EQ(lead->ids[1], p.tokenizer().TokenToId("<|image|>"));
}

// llama3 RoPE scaling: the tiny config's three frequencies fall in each band.
TEST(MllamaRopeTest, Llama3ScalingBands) {
  mllama::TextConfig c;
  c.hidden_size = 48;
  c.num_attention_heads = 4;  // head_dim 12
  c.rope_theta = 500000.0f;
  c.rope_factor = 8;
  c.original_max_position_embeddings = 64;
  const std::vector<float> scaled = mllama::RopeInvFreq(c);
  c.rope_factor = 0;
  const std::vector<float> plain = mllama::RopeInvFreq(c);
  ASSERT_EQ(scaled.size(), 6u);
  EXPECT_EQ(scaled[0], plain[0]);      // wavelength 6.3 < 16: kept
  EXPECT_GT(scaled[1], plain[1] / 8);  // 56: between, smoothed
  EXPECT_LT(scaled[1], plain[1]);
  for (int k = 2; k < 6; ++k) EXPECT_EQ(scaled[k], plain[k] / 8) << k;  // > 64: divided
}

// Instruct configs list several end ids; generation stops on any of them (ModelSpec::eos_ids).
TEST(MllamaConfigTest, EveryEosTokenIdOfAList) {
  std::ifstream in("testdata/tiny/mllama/config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string json = text.str();
  const std::string from = "\"eos_token_id\": 424";
  const size_t at = json.find(from);
  ASSERT_NE(at, std::string::npos);
  auto with = [&](const std::string& value) {
    std::string j = json;
    return j.replace(at, from.size(), "\"eos_token_id\": " + value);
  };
  auto c = mllama::ParseMllamaConfig(with("[424, 3, 7]"), "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->text.eos_token_id, 424);
  EXPECT_EQ(c->text.eos_token_ids, (std::vector<int>{424, 3, 7}));
  EXPECT_EQ(mllama::ParseMllamaConfig(with("[424, 100000]"), "c").status().code(),
            StatusCode::kDataLoss);  // past the embedding table
  EXPECT_EQ(mllama::ParseMllamaConfig(with("[]"), "c").status().code(), StatusCode::kDataLoss);
}

TEST(MllamaConfigTest, RefusesWhatIsNotImplemented) {
  std::ifstream in("testdata/tiny/mllama/config.json");
  std::stringstream text;
  text << in.rdbuf();
  const std::string good = text.str();
  ASSERT_TRUE(mllama::ParseMllamaConfig(good, "c").ok());
  struct Bad {
    std::string from, to;
    StatusCode code;
  };
  const Bad bad[] = {
      {"\"llama3\"", "\"dynamic\"", StatusCode::kUnimplemented},
      {"\"silu\"", "\"gelu\"", StatusCode::kUnimplemented},
      {"\"image_size\": 28", "\"image_size\": 30", StatusCode::kDataLoss},  // not a multiple of 14
      {"\"max_num_tiles\": 4", "\"max_num_tiles\": 2", StatusCode::kUnimplemented},
      {"\"vision_output_dim\": 96", "\"vision_output_dim\": 64", StatusCode::kDataLoss},
      {"\"cross_attention_layers\": [\n      1,", "\"cross_attention_layers\": [\n      9,",
       StatusCode::kDataLoss},
  };
  for (const Bad& b : bad) {
    std::string json = good;
    const size_t at = json.find(b.from);
    ASSERT_NE(at, std::string::npos) << b.from;
    json.replace(at, b.from.size(), b.to);
    auto c = mllama::ParseMllamaConfig(json, "c");
    EXPECT_EQ(c.status().code(), b.code) << b.to << ": " << c.status().ToString();
  }
}

}  // namespace
}  // namespace ocular

// The public Engine API on the tiny checkpoints: prompt layout for 0, 1 and 2 images, and the
// full pipeline (image file + tokenizer) reproducing the reference's greedy answer.
#include "ocular/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "io/safetensors.h"
#include "ocular/quantize.h"
#include "support/fixture.h"

namespace ocular {
namespace {

TEST(Engine, ImageAndPromptFilesGiveTheReferenceGreedyTokens) {
  auto manifest = fixture::GoldenManifest::Load();
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  for (const char* ck : {"pg1", "pg2", "pg2-bf16"}) {
    const fixture::GoldenCheckpoint* g = manifest->Find(ck);
    ASSERT_NE(g, nullptr);
    auto engine = Engine::Load(g->model_dir, {});
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    for (const fixture::GoldenCase& c : g->cases) {
      SCOPED_TRACE(c.path);
      auto taps = fixture::GoldenTaps::Open(c.path);
      ASSERT_TRUE(taps.ok());
      GenerateOptions o;
      o.max_tokens = 16;
      o.stop_at_eos = false;
      auto r = (*engine)->Generate({c.image_path}, c.prompt, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->prompt_ids, *taps->Ids("input_ids"));
      EXPECT_EQ(r->output_ids, *taps->Ids("generated_ids"));
    }
  }
}

TEST(Engine, PromptLayoutForZeroOneAndTwoImages) {
  auto engine = Engine::Load("testdata/tiny/pg1", {});
  ASSERT_TRUE(engine.ok());
  const ModelInfo info = (*engine)->Info();
  const std::string img = "testdata/golden/inputs/photo.png";
  GenerateOptions o;
  o.max_tokens = 4;
  auto body = (*engine)->Tokenize("caption en\n").value();
  for (int n : {0, 1, 2}) {
    SCOPED_TRACE(n);
    std::vector<ImageInput> images(n, img);
    auto r = (*engine)->Generate(images, "caption en", o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // "<image>" × (N per image × n) + <bos> + prompt + "\n" (processing_paligemma.py).
    const size_t n_img = static_cast<size_t>(n) * info.image_tokens;
    ASSERT_EQ(r->prompt_ids.size(), n_img + 1 + body.size());
    EXPECT_EQ(r->prompt_ids[n_img], 2);  // <bos>
    EXPECT_EQ(std::vector<int32_t>(r->prompt_ids.begin() + n_img + 1, r->prompt_ids.end()), body);
    EXPECT_EQ(r->image_sizes.size(), static_cast<size_t>(n));
    EXPECT_FALSE(r->output_ids.empty());
  }
  // big_vision style: "\n" tokenized on its own.
  o.separate_newline = true;
  auto sep = (*engine)->Generate({img}, "caption en", o);
  ASSERT_TRUE(sep.ok());
  auto nl = (*engine)->Tokenize("\n").value();
  EXPECT_EQ(std::vector<int32_t>(sep->prompt_ids.end() - nl.size(), sep->prompt_ids.end()), nl);
}

TEST(Engine, RejectsBadRequestsClearly) {
  auto engine = Engine::Load("testdata/tiny/pg1", {});
  ASSERT_TRUE(engine.ok());
  GenerateOptions o;
  o.max_tokens = 9000;  // beyond max_position_embeddings (8192)
  auto r = (*engine)->Generate({"testdata/golden/inputs/photo.png"}, "caption en", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  auto inj = (*engine)->Generate({}, "<image> caption", {});
  ASSERT_FALSE(inj.ok());
  EXPECT_NE(inj.status().message().find("image token"), std::string::npos);
  EngineOptions small;
  small.max_image_pixels = 100;
  auto tight = Engine::Load("testdata/tiny/pg1", small);
  ASSERT_TRUE(tight.ok());
  auto big = (*tight)->Generate({"testdata/golden/inputs/photo.png"}, "caption en", {});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  // Qwen2VLImageProcessor's min_pixels / max_pixels: PaliGemma has no such bounds and refuses
  // them at load and per request (text-only too), never ignores them.
  EngineOptions resized;
  resized.image_resize.max_pixels = 50176;
  auto refused = Engine::Load("testdata/tiny/pg1", resized);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("Qwen2VLImageProcessor"), std::string::npos);
  GenerateOptions per_request;
  per_request.image_resize.min_pixels = 3136;
  for (const std::vector<ImageInput>& images :
       {std::vector<ImageInput>{"testdata/golden/inputs/photo.png"}, std::vector<ImageInput>{}}) {
    auto r2 = (*engine)->Generate(images, "caption en", per_request);
    ASSERT_FALSE(r2.ok());
    EXPECT_EQ(r2.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(Engine, RejectsNanAndOutOfRangeSamplingOptions) {
  auto engine = Engine::Load("testdata/tiny/pg1", {});
  ASSERT_TRUE(engine.ok());
  const float nan = std::nanf("");
  GenerateOptions bad[5];
  bad[0].temperature = nan;
  bad[1].temperature = -1.0f;
  bad[2].top_p = nan;
  bad[3].top_p = 0.0f;
  bad[4].top_k = -3;
  for (const GenerateOptions& o : bad) {
    auto r = (*engine)->Generate({}, "caption en", o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
}

// NaN weights give NaN logits: a clear runtime error, never an empty answer with success.
TEST(Engine, NanLogitsAreAnErrorNotAnEmptyAnswer) {
  const std::string dir = fixture::ScratchPath("nan");
  std::filesystem::copy("testdata/tiny/pg1", dir);
  // The same weights with one NaN in the final norm.
  std::vector<NamedTensor> tensors;
  auto src = SafetensorsFile::Open("testdata/tiny/pg1/model.safetensors");
  ASSERT_TRUE(src.ok());
  std::vector<float> poisoned;
  for (const auto& [name, view] : src->tensors()) {
    if (name == "language_model.model.norm.weight") {
      poisoned.assign(view.as<float>(), view.as<float>() + view.numel());
      poisoned[0] = std::nanf("");
      tensors.push_back({name, {poisoned.data(), DType::kF32, view.shape}});
    } else {
      tensors.push_back({name, view});
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors).ok());
  auto engine = Engine::Load(dir, {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto r = (*engine)->Generate({"testdata/golden/inputs/photo.png"}, "caption en", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("NaN logits"), std::string::npos) << r.status().message();
}

TEST(Engine, PrecisionOptionsAreCheckedAgainstTheCheckpoint) {
  for (const char* bad : {"bf16", "bf16-fast"}) {
    EngineOptions o;
    o.precision = bad;  // pg1 stores f32 weights
    auto e = Engine::Load("testdata/tiny/pg1", o);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), StatusCode::kUnimplemented);
  }
  EngineOptions o;
  o.precision = "f16";
  EXPECT_EQ(Engine::Load("testdata/tiny/pg1", o).status().code(), StatusCode::kInvalidArgument);
  o.precision = "auto";
  o.kv_cache = "int4";
  EXPECT_EQ(Engine::Load("testdata/tiny/pg1", o).status().code(), StatusCode::kInvalidArgument);
  auto bf16 = Engine::Load("testdata/tiny/pg2-bf16", {});
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ((*bf16)->Info().precision, "bf16");
  EXPECT_EQ((*bf16)->Info().kv_cache, "bf16");
  auto f32 = Engine::Load("testdata/tiny/pg1", {});
  EXPECT_EQ((*f32)->Info().precision, "f32");
  EXPECT_EQ((*f32)->Info().kv_cache, "f32");
}

// A GGUF quantized from a bf16 checkpoint keeps its vision tower bf16; the bf16 precisions run
// it (the default), so its image features are those of the bf16 directory, bit for bit. A file
// quantized from an f32 checkpoint stays f32-only.
TEST(Engine, QuantizedFilesOfBf16CheckpointsRunUnderBf16) {
  namespace fs = std::filesystem;
  const std::string tmp =
      (fs::temp_directory_path() / ("ocular_q_bf16_" + std::to_string(::getpid()))).string();
  fs::create_directories(tmp);
  auto quantize = [&](const char* dir, const char* name) {
    QuantizeOptions q;
    q.input = dir;
    q.output = tmp + "/" + name + ".gguf";
    q.type = "q8_0";
    EXPECT_TRUE(QuantizeModel(q).ok());
    return q.output;
  };
  const std::string from_bf16 = quantize("testdata/tiny/pg2-bf16", "pg2-bf16-q8_0");
  const std::string from_f32 = quantize("testdata/tiny/pg2", "pg2-q8_0");
  auto projector = [&](const std::string& model, const std::string& out) {
    auto engine = Engine::Load(model, {});
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (!engine.ok()) return std::string();
    EXPECT_EQ((*engine)->Info().precision, "bf16");
    GenerateOptions o;
    o.max_tokens = 2;
    EXPECT_TRUE((*engine)->Trace({"testdata/golden/inputs/photo.png"}, "caption en", o, out).ok());
    auto f = SafetensorsFile::Open(out);
    const TensorView* t = f.ok() ? f->Find("projector") : nullptr;
    EXPECT_NE(t, nullptr);
    return t ? std::string(static_cast<const char*>(t->data), t->nbytes()) : std::string();
  };
  const std::string want = projector("testdata/tiny/pg2-bf16", tmp + "/dir.safetensors");
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(projector(from_bf16, tmp + "/gguf.safetensors"), want);
  EngineOptions f32;
  f32.precision = "f32";
  EXPECT_TRUE(Engine::Load(from_bf16, f32).ok());
  auto plain = Engine::Load(from_f32, {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->Info().precision, "f32");
  EngineOptions bf16;
  bf16.precision = "bf16";
  EXPECT_EQ(Engine::Load(from_f32, bf16).status().code(), StatusCode::kUnimplemented);
  fs::remove_all(tmp);
}

TEST(Engine, QuantActivationsOptionIsCheckedAndReported) {
  EngineOptions o;
  for (const char* bad : {"int4", "F32", ""}) {
    o.quant_activations = bad;
    auto e = Engine::Load("testdata/tiny/pg1", o);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("quant_activations"), std::string::npos);
  }
  auto int8 = Engine::Load("testdata/tiny/pg1", {});
  ASSERT_TRUE(int8.ok());
  EXPECT_EQ((*int8)->Info().quant_activations, "int8");
  o.quant_activations = "f32";
  auto f32 = Engine::Load("testdata/tiny/pg1", o);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ((*f32)->Info().quant_activations, "f32");
}

// An image given as bytes gives the answer of the same image given as a file; a bad byte
// string is an error naming the input.
TEST(Engine, ImagesFromBytesEqualImagesFromFiles) {
  auto engine = Engine::Load("testdata/tiny/pg2", {});
  ASSERT_TRUE(engine.ok());
  const std::string path = "testdata/golden/inputs/photo.png";
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  GenerateOptions o;
  o.max_tokens = 8;
  auto from_file = (*engine)->Generate({path}, "caption en", o);
  auto from_bytes =
      (*engine)->Generate({ImageInput::FromBytes(bytes, "upload.png")}, "caption en", o);
  ASSERT_TRUE(from_file.ok() && from_bytes.ok());
  EXPECT_EQ(from_file->output_ids, from_bytes->output_ids);
  EXPECT_EQ(from_bytes->image_sizes[0].width, from_file->image_sizes[0].width);
  auto bad = (*engine)->Generate({ImageInput::FromBytes({1, 2, 3}, "junk.bin")}, "caption en", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("junk.bin"), std::string::npos) << bad.status().message();
}

// The token callback stops generation by returning false: the answer ends there and says why.
TEST(Engine, CallbackCancelsGeneration) {
  auto engine = Engine::Load("testdata/tiny/pg1", {});
  ASSERT_TRUE(engine.ok());
  GenerateOptions o;
  o.max_tokens = 16;
  o.stop_at_eos = false;
  auto full = (*engine)->Generate({"testdata/golden/inputs/photo.png"}, "caption en", o);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->finish_reason, "length");
  int pieces = 0;
  auto cut = (*engine)->Generate({"testdata/golden/inputs/photo.png"}, "caption en", o,
                                 [&](const std::string&) { return ++pieces < 3; });
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->finish_reason, "cancelled");
  EXPECT_EQ(pieces, 3);
  ASSERT_LT(cut->output_ids.size(), full->output_ids.size());
  EXPECT_EQ(cut->output_ids,
            std::vector<int32_t>(full->output_ids.begin(),
                                 full->output_ids.begin() + cut->output_ids.size()));
}

// Many threads on one Engine: every answer equals the one-thread answer for its input.
TEST(Engine, ConcurrentCallsFromManyThreadsGiveTheSingleThreadAnswers) {
  auto engine = Engine::Load("testdata/tiny/pg2", {});
  ASSERT_TRUE(engine.ok());
  const std::vector<std::string> images = {"testdata/golden/inputs/photo.png",
                                           "testdata/golden/inputs/gray.png",
                                           "testdata/golden/inputs/rgba.png"};
  const std::vector<std::string> prompts = {"caption en", "detect cat", "answer en what is it?"};
  GenerateOptions o;
  o.max_tokens = 10;
  std::vector<std::vector<int32_t>> want;
  for (size_t i = 0; i < images.size(); ++i) {
    auto r = (*engine)->Generate({images[i]}, prompts[i], o);
    ASSERT_TRUE(r.ok());
    want.push_back(r->output_ids);
  }
  constexpr int kThreads = 6, kRounds = 3;
  std::vector<std::vector<std::vector<int32_t>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kRounds; ++k) {
        const size_t i = static_cast<size_t>(t + k) % images.size();
        auto r = (*engine)->Generate({images[i]}, prompts[i], o);
        got[t].push_back(r.ok() ? r->output_ids : std::vector<int32_t>{-1});
        (void)(*engine)->Tokenize("caption en");  // read-only calls interleave freely
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kRounds; ++k)
      EXPECT_EQ(got[t][k], want[(t + k) % images.size()]) << t << "," << k;
  }
}

}  // namespace
}  // namespace ocular

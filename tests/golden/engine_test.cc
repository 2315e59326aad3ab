// The public Engine API on the tiny checkpoints: prompt layout for 0, 1 and 2 images, and the
// full pipeline (image file + tokenizer) reproducing the reference's greedy answer.
#include "ocular/engine.h"

#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace ocular

// Qwen2-VL, Qwen2.5-VL and Qwen3-VL against transformers, tap by tap (fixtures:
// tools/reference/make_qwen2vl.py, make_qwen3vl.py): the processor's pixels, image_grid_thw,
// ids, get_rope_index positions and rope_deltas exactly; then the vision tower, every decoder
// layer, the logits and 32 greedy tokens from the prompt the processor built. One row per tiny
// checkpoint (support/qwen_golden.h); a new checkpoint or case set is a new row.
#include "support/qwen_golden.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "support/harness.h"

namespace ocular {
namespace {

using qwen_golden::Checkpoint;

// qwen2vl: LayerNorm + QuickGELU ViT, untied lm_head. qwen25vl: RMSNorm + SwiGLU ViT with
// window attention (uneven windows), tied embeddings. qwen3vl: DeepStack after ViT blocks 0
// and 2, tied. qwen3vl-b: another Qwen3-VL configuration (attention biases, MHA, head_dim =
// hidden / heads, legacy rope "type", DeepStack after block 1 only, untied). -bf16: the
// weights in bfloat16, against torch's bf16 run. qwen25vl's "resized" case: the processor
// called with min_pixels / max_pixels (`--min-pixels` / `--max-pixels`).
const Checkpoint kCheckpoints[] = {
    {"qwen2vl", 1e-5, 8, 0},       {"qwen25vl", 1e-5, 9, 0}, {"qwen2vl-bf16", 1e-2, 2, 0},
    {"qwen25vl-bf16", 1e-2, 2, 0}, {"qwen3vl", 1e-5, 8, 2},  {"qwen3vl-bf16", 1e-2, 2, 2},
    {"qwen3vl-b", 1e-5, 2, 1},
};

class QwenGoldenTest : public testing::TestWithParam<Checkpoint> {};

TEST_P(QwenGoldenTest, EveryTapLogitsAndGreedyDecodeMatchTransformers) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  qwen_golden::ExpectCasesMatchTransformers(GetParam());
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, QwenGoldenTest, testing::ValuesIn(kCheckpoints),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Sequences at different rope_deltas decode together in one [B, H] pass: an image prompt
// (delta -6; Qwen3-VL: with DeepStack rows) and a text-only one (delta 0) give transformers'
// tokens as when alone.
TEST(QwenBatchTest, ImageAndTextPromptsDecodeTogether) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  for (const char* checkpoint : {"qwen25vl", "qwen3vl"}) {
    SCOPED_TRACE(checkpoint);
    qwen_golden::ExpectImageAndTextDecodeTogether(checkpoint);
  }
}

// As `ocular run -m testdata/tiny/<checkpoint> -i photo.png -i gray.png -p "..."` runs it:
// files -> processor -> scheduler (Qwen3-VL: feature rows of feature_width floats) -> model,
// transformers' tokens (the runtime's own prompt path).
TEST(QwenEngineTest, TwoImagesFromFilesGiveTransformersTokens) {
  for (const char* checkpoint : {"qwen25vl", "qwen3vl"}) {
    SCOPED_TRACE(checkpoint);
    qwen_golden::ExpectEngineRunsTwoImages(checkpoint);
  }
}

// `--min-pixels 6272 --max-pixels 9408` as the engine's bounds (the workspace planned for
// them) and as one request's (vLLM's mm_processor_kwargs) under the checkpoint's: the
// "resized" case's ids and tokens either way. A request's bounds over the engine's are refused.
TEST(QwenEngineTest, MinMaxPixelsGiveTransformersTokens) {
  const ImageResize resize{28 * 28 * 8, 28 * 28 * 12};
  qwen_golden::ExpectEngineRunsCase("qwen25vl", "resized", EngineOptions{.image_resize = resize},
                                    {});
  GenerateOptions request;
  request.image_resize = resize;
  qwen_golden::ExpectEngineRunsCase("qwen25vl", "resized", {}, request);

  auto small = Engine::Load("testdata/tiny/qwen25vl",
                            EngineOptions{.threads = 2, .image_resize = {0, 28 * 28 * 4}});
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  auto r = (*small)->Generate({"testdata/golden/inputs/photo.png"}, "hi", request);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("more than the"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace ocular

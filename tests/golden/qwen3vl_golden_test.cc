// Qwen3-VL (qwen3_vl, dense): interleaved M-RoPE, the position table's linspace against
// torch's, the released configs, embedding of image pads, grounding frames. The tap-by-tap
// goldens (vision tower with DeepStack, every decoder layer, logits, greedy tokens) are
// qwen_golden_test.cc's table.
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
#include "support/qwen_golden.h"

namespace ocular {
namespace {

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

// A small config.json up to its open text_config (callers add rope_scaling and close it), and
// the rope_scaling it takes.
constexpr char kSmallBase[] = R"({"model_type": "qwen3_vl", "vision_config": {"hidden_size": 32,
      "num_heads": 4, "out_hidden_size": 64, "depth": 2, "deepstack_visual_indexes": [1]},
      "text_config": {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 200000)";
constexpr char kSmallRope[] =
    R"(, "rope_scaling": {"rope_type": "default", "mrope_section": [2, 3, 3]})";

// Qwen/Qwen3-VL-4B-Instruct's config.json (keys ocular does not read included) and the
// rope_scaling forms transformers accepts.
TEST(Qwen3VLConfigTest, ReleasedConfigParses) {
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

  const std::string base = kSmallBase, rope = kSmallRope;
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
}

// What transformers refuses, and what ocular does not implement.
TEST(Qwen3VLConfigTest, UnimplementedAndCorruptAreRefused) {
  const std::string base = kSmallBase, rope = kSmallRope;
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

// --min-pixels / --max-pixels: Qwen2.5-VL's boxes are in the frame the image was resized to with
// those bounds (60x40 -> 112x84 with min 6272, the "resized" golden's grid 6x8 x 14), set at
// load (LoadGroundingFormat) or per request (WithImageResize); other frames are unchanged.
TEST(GroundingTest, ResizeBoundsMoveQwen25Frame) {
  const ImageResize resize{28 * 28 * 8, 28 * 28 * 12};
  const std::string answer = "[{\"bbox_2d\": [56, 42, 112, 84], \"label\": \"cat\"}]";
  auto loaded = LoadGroundingFormat("testdata/tiny/qwen25vl", resize);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto plain = LoadGroundingFormat("testdata/tiny/qwen25vl");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  for (const GroundingFormat& f : {*loaded, WithImageResize(*plain, resize)}) {
    auto b = ParseGroundedDetections(f, answer, 60, 40);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_FLOAT_EQ(b[0].x0, 30.0f);  // 56 / 112 * 60
    EXPECT_FLOAT_EQ(b[0].y0, 20.0f);  // 42 / 84 * 40
    EXPECT_FLOAT_EQ(b[0].x1, 60.0f);
    EXPECT_FLOAT_EQ(b[0].y1, 40.0f);
  }
  auto bad = LoadGroundingFormat("testdata/tiny/qwen25vl", {100, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto q3 = LoadGroundingFormat("testdata/tiny/qwen3vl");
  ASSERT_TRUE(q3.ok()) << q3.status().ToString();
  EXPECT_EQ(WithImageResize(*q3, resize).kind, GroundingFormat::Kind::kQwenGrid1000);
}

}  // namespace
}  // namespace ocular

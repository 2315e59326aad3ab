// Qwen2-VL (qwen2_vl) and Qwen2.5-VL (qwen2_5_vl): the processor (smart_resize, pixels and
// grids against Qwen2VLImageProcessor, configs) and the prompt rules. The tap-by-tap goldens
// of every Qwen checkpoint are qwen_golden_test.cc's table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
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
#include "support/qwen_golden.h"

namespace ocular {
namespace {

using qwen_golden::CasePrompt;
using qwen_golden::Differ;
using qwen_golden::I64;

constexpr char kTiny[] = "testdata/tiny/qwen2vl";

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
// The pixel fixture's processor settings (make_qwen2vl.py make_pixel_fixture): the defaults,
// as make_processor's (CLIP mean/std, BICUBIC), with its patch size and bounds.
qwen2vl::ImageConfig PixelFixtureConfig(const fixture::GoldenTaps& fx) {
  const auto& meta = fx.file().metadata();
  qwen2vl::ImageConfig c;
  c.patch_size = std::stoi(meta.at("patch_size"));
  c.min_pixels = std::stoll(meta.at("min_pixels"));
  c.max_pixels = std::stoll(meta.at("max_pixels"));
  auto parsed = qwen2vl::ParseImageConfig("{}", "defaults");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (parsed.ok()) c.pp = parsed->pp;
  return c;
}

// Patchify of the fixture image `key` under `c` is byte-identical to the taps `prefix`/.
void ExpectPatches(const fixture::GoldenTaps& fx, const std::string& key, const std::string& prefix,
                   const qwen2vl::ImageConfig& c) {
  SCOPED_TRACE(prefix);
  const std::string stem = "testdata/golden/qwen2vl-pixels/" + key;
  auto image = LoadImage(std::filesystem::exists(stem + ".png") ? stem + ".png" : stem + ".jpg");
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  auto patches = qwen2vl::Patchify(*image, c);
  ASSERT_TRUE(patches.ok()) << patches.status().ToString();
  const std::vector<int64_t> grid = I64(*fx.file().Find(prefix + "/image_grid_thw"));
  EXPECT_EQ(std::vector<int64_t>(patches->grid.begin(), patches->grid.end()), grid);
  EXPECT_EQ(Differ(patches->values, *fx.file().Find(prefix + "/pixel_values")), 0);
}

TEST(Qwen2VLProcessorTest, PixelsAndGridsMatchQwen2VLImageProcessor) {
  auto fx = fixture::GoldenTaps::Open("testdata/golden/qwen2vl-pixels.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().ToString();
  const qwen2vl::ImageConfig c = PixelFixtureConfig(*fx);
  int images = 0;
  for (const std::string& name : fx->TapNames()) {
    const std::string key = name.substr(0, name.find('/'));
    if (name != key + "/pixel_values") continue;  // <key>/<resize>/...: the test below
    ExpectPatches(*fx, key, key, c);
    ++images;
  }
  EXPECT_GE(images, 46);
}

// --min-pixels / --max-pixels: the processor called with min_pixels= / max_pixels= (taps
// <key>/min<lo>_max<hi>/..., 0 = not given) on 5 of those files, 3 bounds each (a narrow band,
// max only, both above the defaults): WithResize of the defaults, byte-identical.
TEST(Qwen2VLProcessorTest, ResizeBoundsMatchQwen2VLImageProcessor) {
  auto fx = fixture::GoldenTaps::Open("testdata/golden/qwen2vl-pixels.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().ToString();
  const qwen2vl::ImageConfig defaults = PixelFixtureConfig(*fx);
  int cases = 0;
  for (const std::string& name : fx->TapNames()) {
    const size_t a = name.find('/'), b = name.find('/', a + 1);
    if (b == std::string::npos || !name.ends_with("/pixel_values")) continue;
    const std::string bounds = name.substr(a + 1, b - a - 1);  // min<lo>_max<hi>
    ImageResize r;
    ASSERT_EQ(
        std::sscanf(bounds.c_str(), "min%" SCNd64 "_max%" SCNd64, &r.min_pixels, &r.max_pixels), 2)
        << name;
    auto c = qwen2vl::WithResize(defaults, r);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ExpectPatches(*fx, name.substr(0, a), name.substr(0, b), *c);
    ++cases;
  }
  EXPECT_EQ(cases, 15);
}

// What WithResize refuses: a bound under one merge window or over 2^28, min over max; what it
// keeps: the other bound when one is 0.
TEST(Qwen2VLProcessorTest, ResizeBoundsRefused) {
  qwen2vl::ImageConfig c;  // factor 28, min 3136, max 1003520
  auto keep = qwen2vl::WithResize(c, {0, 28 * 28 * 4});
  ASSERT_TRUE(keep.ok()) << keep.status().ToString();
  EXPECT_EQ(keep->min_pixels, 56 * 56);
  EXPECT_EQ(keep->max_pixels, 28 * 28 * 4);
  for (ImageResize bad : {ImageResize{100, 0}, ImageResize{0, 783}, ImageResize{-5, 0},
                          ImageResize{0, int64_t{1} << 29}, ImageResize{28 * 28 * 8, 28 * 28 * 4},
                          ImageResize{28 * 28 * 2000, 0}}) {
    auto r = qwen2vl::WithResize(c, bad);
    ASSERT_FALSE(r.ok()) << bad.min_pixels << " " << bad.max_pixels;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("[image]"), std::string::npos) << r.status().message();
  }
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

}  // namespace
}  // namespace ocular

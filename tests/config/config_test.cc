// config.json validation (src/models/config.cc): every bad value is refused with the documented
// code and a message naming the file and the key or rule. Lives here rather than beside config.cc
// so that src/models/CMakeLists.txt stays untouched by this test.
#include "models/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace ocular {
namespace {

using Json = nlohmann::json;

Json TinyConfig(const char* ck) {
  std::ifstream in(std::string("testdata/tiny/") + ck + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

TEST(ConfigTest, TinyCheckpointsParse) {
  for (const char* ck : {"pg1", "pg2", "pg2-bf16"}) {
    auto c = LoadPaliGemmaConfig(std::string("testdata/tiny/") + ck);
    ASSERT_TRUE(c.ok()) << ck << ": " << c.status().ToString();
  }
  auto c = LoadPaliGemmaConfig("testdata/tiny/pg2");
  EXPECT_TRUE(c->text.is_gemma2());
  EXPECT_EQ(c->text.num_hidden_layers, 3);
  EXPECT_EQ(c->text.layer_is_sliding, (std::vector<bool>{true, false, true}));
  EXPECT_FLOAT_EQ(c->text.attn_logit_softcapping, 50.0f);
}

TEST(ConfigTest, NullSoftcapsDisable) {
  Json j = TinyConfig("pg2");
  j["text_config"]["attn_logit_softcapping"] = nullptr;
  auto c = ParsePaliGemmaConfig(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->text.attn_logit_softcapping, 0.0f);
}

struct Case {
  const char* section;  // "" = top level
  const char* key;
  Json value;
  StatusCode code;
  const char* mentions;
};

TEST(ConfigTest, BadValuesAreRefused) {
  const Case cases[] = {
      // Sizes: checked before anything is allocated from them.
      {"text_config", "num_hidden_layers", -1, StatusCode::kDataLoss,
       "text_config.num_hidden_layers"},
      {"text_config", "num_hidden_layers", 0, StatusCode::kDataLoss, "below the minimum 1"},
      {"text_config", "num_hidden_layers", 2000000000, StatusCode::kResourceExhausted,
       "limit of 1024"},
      {"text_config", "num_hidden_layers", 1e300, StatusCode::kResourceExhausted, "1e+300"},
      {"text_config", "num_hidden_layers", 2.5, StatusCode::kDataLoss, "must be an integer"},
      {"text_config", "num_hidden_layers", "3", StatusCode::kDataLoss, "must be an integer"},
      {"vision_config", "num_hidden_layers", -5, StatusCode::kDataLoss,
       "vision_config.num_hidden_layers"},
      {"text_config", "hidden_size", 4294967296.0, StatusCode::kResourceExhausted,
       "text_config.hidden_size"},
      {"text_config", "vocab_size", 0, StatusCode::kDataLoss, "vocab_size"},
      {"text_config", "head_dim", 25, StatusCode::kDataLoss, "must be even"},
      {"text_config", "num_key_value_heads", 3, StatusCode::kDataLoss,
       "multiple of num_key_value_heads"},
      {"text_config", "max_position_embeddings", 1e12, StatusCode::kResourceExhausted,
       "max_position_embeddings"},
      {"vision_config", "image_size", 50, StatusCode::kDataLoss, "multiple of patch_size"},
      {"vision_config", "num_attention_heads", 5, StatusCode::kDataLoss,
       "multiple of num_attention_heads"},
      {"vision_config", "image_size", 100000, StatusCode::kResourceExhausted, "image_size"},
      {"vision_config", "num_channels", 4, StatusCode::kUnimplemented, "num_channels"},
      // Floats: finite and in range.
      {"text_config", "rms_norm_eps", 0, StatusCode::kDataLoss, "rms_norm_eps"},
      {"text_config", "rms_norm_eps", -1e-6, StatusCode::kDataLoss, "rms_norm_eps"},
      {"text_config", "rope_theta", 0, StatusCode::kDataLoss, "rope_theta"},
      {"text_config", "rope_theta", 1e300, StatusCode::kDataLoss, "rope_theta"},
      {"text_config", "query_pre_attn_scalar", 0, StatusCode::kDataLoss, "query_pre_attn_scalar"},
      {"vision_config", "layer_norm_eps", "tiny", StatusCode::kDataLoss, "must be a number"},
      // Keys that change the math and are not implemented: refused, never ignored.
      {"text_config", "attention_bias", true, StatusCode::kUnimplemented,
       "text_config.attention_bias"},
      {"text_config", "mlp_bias", true, StatusCode::kUnimplemented, "mlp_bias"},
      {"text_config", "use_bidirectional_attention", true, StatusCode::kUnimplemented,
       "use_bidirectional_attention"},
      {"text_config", "rope_scaling", Json{{"rope_type", "linear"}, {"factor", 2.0}},
       StatusCode::kUnimplemented, "rope_scaling"},
      {"text_config", "partial_rotary_factor", 0.5, StatusCode::kUnimplemented,
       "partial_rotary_factor"},
      {"text_config", "hidden_activation", "quick_gelu", StatusCode::kUnimplemented, "quick_gelu"},
      {"vision_config", "hidden_act", "quick_gelu", StatusCode::kUnimplemented,
       "vision_config.hidden_act"},
      {"vision_config", "vision_use_head", true, StatusCode::kUnimplemented, "vision_use_head"},
      {"vision_config", "model_type", "clip_vision_model", StatusCode::kUnimplemented,
       "clip_vision_model"},
      {"text_config", "model_type", "llama", StatusCode::kUnimplemented, "llama"},
      {"text_config", "layer_types", Json::array({"full_attention"}), StatusCode::kDataLoss,
       "one per layer"},
      {"text_config", "layer_types", Json::array({"chunked", "full_attention", "full_attention"}),
       StatusCode::kUnimplemented, "layer_types[0]"},
      // Consistency rules between sections.
      {"", "image_token_index", 999999, StatusCode::kDataLoss, "image_token_index"},
      {"", "projection_dim", 64, StatusCode::kDataLoss, "projection_dim (64) must equal"},
      {"", "eos_token_id", 5000, StatusCode::kDataLoss, "eos_token_id"},
      {"", "eos_token_id", Json::array({1, 107}), StatusCode::kUnimplemented,
       "eos_token_id = [1,107]"},
      {"", "text_config", "gemma2", StatusCode::kDataLoss, "text_config must be an object"},
      {"", "model_type", "llava", StatusCode::kUnimplemented, "llava"},
      {"", "model_type", 7, StatusCode::kDataLoss, "model_type must be a string"},
  };
  for (const Case& c : cases) {
    Json j = TinyConfig("pg2");
    if (*c.section) {
      j[c.section][c.key] = c.value;
    } else {
      j[c.key] = c.value;
    }
    SCOPED_TRACE(std::string(c.section) + "." + c.key + " = " + c.value.dump());
    auto config = ParsePaliGemmaConfig(j.dump(), "dir/config.json");
    ASSERT_FALSE(config.ok());
    const std::string& m = config.status().message();
    EXPECT_EQ(config.status().code(), c.code) << m;
    EXPECT_EQ(m.rfind("[config] dir/config.json: ", 0), 0u) << m;
    EXPECT_NE(m.find(c.mentions), std::string::npos) << m;
    EXPECT_LT(m.size(), 300u) << m;  // no 300-digit numbers, no dumped objects
  }
}

TEST(ConfigTest, GemmaOneReadsHiddenAct) {
  Json j = TinyConfig("pg1");
  j["text_config"]["hidden_act"] = "quick_gelu";
  auto c = ParsePaliGemmaConfig(j.dump(), "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  // Keys transformers ignores at inference are accepted.
  j = TinyConfig("pg1");
  j["text_config"]["attention_dropout"] = 0.1;
  j["text_config"]["attn_implementation"] = "sdpa";
  j["text_config"]["attention_bias"] = false;
  EXPECT_TRUE(ParsePaliGemmaConfig(j.dump(), "config.json").ok());
}

TEST(ConfigTest, MalformedJsonIsCorruptWithPosition) {
  auto c = ParsePaliGemmaConfig("{\n  \"model_type\": \"paligemma\",\n  \"vocab_size\": ,\n}",
                                "m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find("invalid JSON at line 3, column"), std::string::npos)
      << c.status().message();
  auto arr = ParsePaliGemmaConfig("[1]", "m/config.json");
  EXPECT_EQ(arr.status().code(), StatusCode::kDataLoss);
  auto missing = ParsePaliGemmaConfig("{}", "m/config.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kDataLoss);
}

TEST(ConfigTest, HugeNumberIsShownShort) {
  Json j = TinyConfig("pg2");
  const std::string text = j.dump();
  std::string huge = text;
  const std::string key = "\"num_hidden_layers\":3";
  const size_t at = huge.find(key);
  ASSERT_NE(at, std::string::npos);
  huge.replace(at, key.size(), "\"num_hidden_layers\":" + std::string(300, '9'));
  auto c = ParsePaliGemmaConfig(huge, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_LT(c.status().message().size(), 200u) << c.status().message();
}

}  // namespace
}  // namespace ocular

// Gemma 3 from llama.cpp's GGUF files: what the loader derives from the metadata (config,
// vocabulary, end-of-generation ids) on a slice of the real 270M file, and what it refuses.
// The slice's taps against transformers are in gemma3_golden_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/model_files.h"
#include "models/gemma3/gemma3.h"
#include "models/gemma3/llamacpp_gguf.h"
#include "models/registry.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSlice = "testdata/gguf/gemma3_270m_slice.gguf";

TEST(Gemma3LlamaCppTest, ConfigVocabularyAndStopIdsFromTheMetadata) {
  auto loaded = LoadModel(kSlice);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto& model = static_cast<const gemma3::Gemma3&>(*loaded->model);
  const gemma3::Gemma3TextConfig& t = model.config().text;
  EXPECT_EQ(model.config().model_type, "gemma3_text");
  EXPECT_EQ(t.gemma.hidden_size, 64);
  EXPECT_EQ(t.gemma.num_attention_heads, 2);
  EXPECT_EQ(t.gemma.head_dim, 32);
  EXPECT_EQ(t.gemma.vocab_size, 640);  // token_embd's rows
  EXPECT_EQ(t.gemma.sliding_window, 4);
  EXPECT_EQ(t.gemma.layer_is_sliding, (std::vector<bool>{true, false}));  // pattern 2
  EXPECT_FLOAT_EQ(t.attention_scale(), 1.0f / std::sqrt(32.0f));          // 1/sqrt(head_dim)
  EXPECT_FLOAT_EQ(t.rope_local_base_freq, 10000.0f);
  EXPECT_FLOAT_EQ(t.gemma.rope_theta, 1e6f);
  EXPECT_EQ(t.gemma.final_logit_softcapping, 0.0f);
  // eos and <end_of_turn>, as llama.cpp's end-of-generation set.
  EXPECT_EQ(model.spec().eos_ids, (std::vector<int32_t>{1, 106}));

  const Tokenizer& tok = loaded->processor->tokenizer();
  EXPECT_EQ(tok.vocab_size(), 640);
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.TokenToId("<end_of_turn>"), 106);
  // Control pieces in the text are matched whole (llama.cpp's parse_special); the rest is
  // SentencePiece BPE with byte fallback ("é" is not among the slice's 640 pieces).
  auto ids = tok.Encode("<start_of_turn>user\n\xC3\xA9<end_of_turn>");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_GE(ids->size(), 5u);
  EXPECT_EQ(ids->front(), 105);
  EXPECT_EQ(ids->back(), 106);
  EXPECT_EQ(tok.IdToPiece((*ids)[ids->size() - 3]), "<0xC3>");
  EXPECT_EQ(tok.IdToPiece((*ids)[ids->size() - 2]), "<0xA9>");
  EXPECT_EQ(tok.Decode(*ids, /*skip_special=*/true), "user\n\xC3\xA9");
  EXPECT_EQ(tok.Decode(*ids, /*skip_special=*/false), "<start_of_turn>user\n\xC3\xA9<end_of_turn>");
}

// Writes a GGUF of architecture `arch` with the given metadata (one token_embd tensor).
std::string Write(const std::string& name, const std::function<void(GgufWriter&)>& keys,
                  const char* arch = "gemma3") {
  const std::string path =
      (fs::temp_directory_path() / ("ocular_g3lc_" + name + std::to_string(::getpid()) + ".gguf"))
          .string();
  GgufWriter w;
  w.SetString("general.architecture", arch);
  keys(w);
  w.AddTensor("token_embd.weight", {8, 32}, WFormat::kF32);
  const Status s = w.Write(path, [](size_t, std::byte* out, size_t n) {
    std::fill_n(out, n, std::byte{0});
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

TEST(Gemma3LlamaCppTest, RefusesWhatItDoesNotRead) {
  struct Case {
    const char* name;
    std::function<void(GgufWriter&)> keys;
    const char* says;
  };
  const Case cases[] = {
      {"key", [](GgufWriter& w) { w.SetU32("gemma3.expert_count", 8); }, "gemma3.expert_count"},
      {"vocab",
       [](GgufWriter& w) {
         w.SetU32("gemma3.block_count", 1);
         w.SetString("tokenizer.ggml.model", "gpt2");
       },
       "tokenizer.ggml.model 'gpt2'"},
      {"eos",
       [](GgufWriter& w) {
         w.SetString("tokenizer.ggml.model", "llama");
         w.SetBool("tokenizer.ggml.add_eos_token", true);
       },
       "add_eos_token"},
      {"tok_key", [](GgufWriter& w) { w.SetString("tokenizer.ggml.merges_v2", "x"); },
       "tokenizer.ggml.merges_v2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = Write(c.name, c.keys);
    auto m = LoadModel(path);
    fs::remove(path);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented) << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status().ToString();
  }
  // Another architecture: refused by name.
  const std::string path = Write(
      "arch", [](GgufWriter&) {}, "llama");
  auto m = LoadModel(path);
  fs::remove(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(m.status().message().find("'llama'"), std::string::npos) << m.status().ToString();
}

}  // namespace
}  // namespace ocular

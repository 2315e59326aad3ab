// Gemma 3 from llama.cpp's GGUF files: what the loader derives from the metadata (config,
// vocabulary, end-of-generation ids) on a slice of the real 270M file, and what it refuses.
// The slice's taps against transformers are in gemma3_golden_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
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

constexpr const char* kPairText = "testdata/llamacpp/gemma3-lc-f16.gguf";
constexpr const char* kPairMmproj = "testdata/llamacpp/mmproj-gemma3-lc-f16.gguf";

TEST(Gemma3LlamaCppPairTest, TheVisionModelFromTheTwoFilesMetadata) {
  auto loaded = LoadModel(kPairText, kPairMmproj);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto& model = static_cast<const gemma3::Gemma3&>(*loaded->model);
  const gemma3::Gemma3Config& c = model.config();
  EXPECT_TRUE(c.has_vision);
  EXPECT_EQ(c.vision.image_size, 56);  // clip.vision.*
  EXPECT_EQ(c.vision.patch_size, 14);
  EXPECT_EQ(c.vision.hidden_size, 48);
  EXPECT_EQ(c.vision.intermediate_size, 72);
  EXPECT_EQ(c.vision.num_hidden_layers, 2);
  EXPECT_EQ(c.mm_tokens_per_image, 4);  // (56 / 14 / scale_factor 2)^2
  const Tokenizer& tok = loaded->processor->tokenizer();
  EXPECT_EQ(c.image_token_index, tok.TokenToId("<image_soft_token>"));
  EXPECT_EQ(c.boi_token_index, tok.TokenToId("<start_of_image>"));
  EXPECT_EQ(model.spec().image_tokens, 4);
  EXPECT_EQ(c.text.gemma.num_hidden_layers, 6);
  EXPECT_EQ(c.text.gemma.layer_is_sliding,
            (std::vector<bool>{true, true, true, true, true, false}));  // llama.cpp's pattern 6
}

// A copy of `from` with metadata edited by `edit` (false: drop the key; it may also add
// keys) and tensors renamed by `rename`.
std::string Rewrite(const std::string& from, const std::string& name,
                    const std::function<bool(const std::string&, GgufWriter&)>& edit,
                    const std::function<std::string(const std::string&)>& rename = nullptr) {
  auto src = GgufFile::Open(from);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) {
    if (edit(key, w)) w.SetValue(key, value);
  }
  edit("", w);  // additions
  for (const GgufTensor& t : (*src)->tensors()) {
    WFormat f;
    EXPECT_TRUE(WFormatFromGgml(t.type, &f));
    w.AddTensor(rename ? rename(t.name) : t.name, t.shape(), f);
  }
  const std::string path =
      (fs::temp_directory_path() / ("ocular_pair_" + name + std::to_string(::getpid()) + ".gguf"))
          .string();
  const GgufFile& file = **src;
  const Status s = w.Write(path, [&](size_t i, std::byte* out, size_t n) {
    std::memcpy(out, file.tensors()[i].data, n);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

TEST(Gemma3LlamaCppPairTest, RefusesProjectorsKeysAndSizesItDoesNotImplement) {
  struct Case {
    const char* name;
    std::function<bool(const std::string&, GgufWriter&)> edit;
    const char* says;
  };
  auto set_u32 = [](const char* which, uint32_t v) {
    return [=](const std::string& key, GgufWriter& w) {
      if (key != which) return true;
      w.SetU32(key, v);
      return false;
    };
  };
  const Case cases[] = {
      {"qwen",
       [](const std::string& key, GgufWriter& w) {
         if (key != "clip.projector_type") return true;
         w.SetString(key, "qwen2vl_merger");
         return false;
       },
       "clip.projector_type 'qwen2vl_merger'"},
      {"key",
       [](const std::string& key, GgufWriter& w) {
         if (key.empty()) w.SetU32("clip.vision.spatial_merge_size", 2);
         return true;
       },
       "clip.vision.spatial_merge_size"},
      {"audio",
       [](const std::string& key, GgufWriter& w) {
         if (key.empty()) w.SetBool("clip.has_audio_encoder", true);
         return key != "clip.has_audio_encoder";
       },
       "clip.has_audio_encoder"},
      {"dim", set_u32("clip.vision.projection_dim", 64), "clip.vision.projection_dim = 64"},
      {"pool", set_u32("clip.vision.image_size", 42), "clip.vision.projector.scale_factor"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = Rewrite(kPairMmproj, c.name, c.edit);
    auto m = LoadModel(kPairText, path);
    fs::remove(path);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented) << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status().ToString();
  }
}

TEST(Gemma3LlamaCppPairTest, RefusesFilesThatDoNotPair) {
  struct Case {
    std::string model, mmproj;
    StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {kPairMmproj, "", StatusCode::kInvalidArgument, "is an mmproj file"},
      {"testdata/tiny/gemma3", kPairMmproj, StatusCode::kInvalidArgument, "model directory"},
      {kPairText, kPairText, StatusCode::kInvalidArgument, "not an mmproj file"},
      {kPairText, "testdata/llamacpp/none.gguf", StatusCode::kNotFound, "none.gguf"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + " + " + c.mmproj);
    auto m = LoadModel(c.model, c.mmproj);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), c.code) << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status().ToString();
  }
}

// Files of older converters name fc1 ffn_down and fc2 ffn_up; clip.cpp swaps them back by
// shape, and so does ocular: the same matrices land in the same places.
TEST(Gemma3LlamaCppPairTest, ReadsTheSwappedFfnNamesOfOlderMmprojFiles) {
  const std::string swapped = Rewrite(
      kPairMmproj, "swapped", [](const std::string&, GgufWriter&) { return true; },
      [](const std::string& name) {
        for (auto [from, to] : {std::pair{".ffn_up.", ".ffn_down."}, {".ffn_down.", ".ffn_up."}}) {
          if (const size_t at = name.find(from); at != std::string::npos) {
            return name.substr(0, at) + to + name.substr(at + std::strlen(from));
          }
        }
        return name;
      });
  auto a = LoadModel(kPairText, kPairMmproj);
  auto b = LoadModel(kPairText, swapped);
  fs::remove(swapped);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::map<std::string, std::string> bytes;
  auto collect = [&](const VlModel& m, bool check) {
    return m.ForEachWeight(
        [&](const std::string& name, const Shape&, const Matrix* mat, const TensorView*) {
          if (mat == nullptr || !name.starts_with("v.blk.")) return Status::Ok();
          std::string data(reinterpret_cast<const char*>(mat->row(0)), mat->bytes());
          if (!check) {
            bytes[name] = data;
          } else {
            EXPECT_EQ(bytes[name], data) << name;
          }
          return Status::Ok();
        });
  };
  ASSERT_TRUE(collect(*a->model, false).ok());
  ASSERT_TRUE(collect(*b->model, true).ok());
  EXPECT_EQ(bytes.size(), 12u);  // 2 layers x q, k, v, out, up, down
}

}  // namespace
}  // namespace ocular

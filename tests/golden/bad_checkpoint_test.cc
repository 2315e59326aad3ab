// Corrupt checkpoints must give a clear error naming the file/tensor — never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "models/paligemma/paligemma.h"
#include "support/fixture.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

// Copies testdata/tiny/pg1 to a fresh directory and lets `corrupt` damage it.
std::string CorruptCopy(const std::string& name,
                        const std::function<void(const std::string&)>& corrupt) {
  const std::string dir = fixture::ScratchPath("bad_" + name);
  fs::copy("testdata/tiny/pg1", dir);
  corrupt(dir);
  return dir;
}

std::string ReadAll(const std::string& path) { return ReadFileToString(path).value(); }
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Rewrites the safetensors header of dir/model.safetensors through `edit`.
void EditHeader(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = dir + "/model.safetensors";
  std::string bytes = ReadAll(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  edit(h);
  // Offsets are relative to the data section, so the header may change length.
  const std::string hs = h.dump();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((hs.size() >> (8 * i)) & 0xff);
  WriteAll(path, len + hs + bytes.substr(8 + n));
}

const char* kEmbed = "language_model.model.embed_tokens.weight";

struct Case {
  const char* name;
  std::function<void(const std::string&)> corrupt;
  const char* expect;  // substring of the error message
};

TEST(BadCheckpoint, EachCorruptionGivesAClearError) {
  const Case cases[] = {
      {"truncated",
       [](const std::string& d) {
         std::string b = ReadAll(d + "/model.safetensors");
         WriteAll(d + "/model.safetensors", b.substr(0, b.size() / 2));
       },
       "outside the data section"},
      {"offsets_past_eof",
       [](const std::string& d) {
         EditHeader(d, [](nlohmann::json& h) { h[kEmbed]["data_offsets"][1] = 1ull << 40; });
       },
       "outside the data section"},
      {"overlap",
       [](const std::string& d) {
         EditHeader(d, [](nlohmann::json& h) {
           h["language_model.model.norm.weight"]["data_offsets"] = h[kEmbed]["data_offsets"];
           h["language_model.model.norm.weight"]["shape"] = h[kEmbed]["shape"];
         });
       },
       "overlap"},
      {"wrong_shape",
       [](const std::string& d) {
         EditHeader(d, [](nlohmann::json& h) {
           auto s = h[kEmbed]["shape"];
           h[kEmbed]["shape"] = {s[1], s[0]};
         });
       },
       "config expects"},
      {"unknown_dtype",
       [](const std::string& d) {
         EditHeader(d, [](nlohmann::json& h) { h[kEmbed]["dtype"] = "F8_E9M9"; });
       },
       "unknown dtype"},
      {"missing_tensor",
       [](const std::string& d) {
         EditHeader(d, [](nlohmann::json& h) { h.erase("language_model.model.norm.weight"); });
       },
       "missing tensor 'language_model.model.norm.weight'"},
      {"garbage_header",
       [](const std::string& d) {
         std::string b = ReadAll(d + "/model.safetensors");
         b[8] = '#';
         WriteAll(d + "/model.safetensors", b);
       },
       "well-formed JSON"},
      {"garbage_config",
       [](const std::string& d) { WriteAll(d + "/config.json", "{\"model_type\": "); },
       "not a JSON object"},
      {"unknown_architecture",
       [](const std::string& d) { WriteAll(d + "/config.json", R"({"model_type": "llava"})"); },
       "model_type 'llava' is not supported"},
      {"no_weights", [](const std::string& d) { fs::remove(d + "/model.safetensors"); },
       "no model.safetensors"},
      // A tensor the model does not read (here an attention bias, as a checkpoint saved with
      // attention_bias: true has): refused, never silently ignored.
      {"unused_tensor",
       [](const std::string& d) {
         EditHeader(d, [](nlohmann::json& h) {
           uint64_t end = 0;  // an empty tensor at the end of the data section
           for (auto& [name, t] : h.items()) {
             if (name != "__metadata__") end = std::max<uint64_t>(end, t["data_offsets"][1]);
           }
           h["language_model.model.layers.0.self_attn.q_proj.bias"] = {
               {"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {end, end}}};
         });
       },
       "tensor 'language_model.model.layers.0.self_attn.q_proj.bias' is not used"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = CorruptCopy(c.name, c.corrupt);
    auto m = paligemma::PaliGemma::Load(dir);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos) << m.status().message();
  }
}

TEST(BadCheckpoint, IntactCopyLoads) {
  auto m = paligemma::PaliGemma::Load(CorruptCopy("intact", [](const std::string&) {}));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
}

}  // namespace
}  // namespace ocular

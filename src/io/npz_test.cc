#include "io/npz.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/mapped_file.h"

namespace ocular {
namespace {

// An .npy of format 1.0 with `dict` as its header (padded like numpy) and `data_bytes` zeros.
std::string Npy(const std::string& dict, size_t data_bytes, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t n = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + std::string(data_bytes, '\0');
}

// The file at `path`, or "" when it cannot be read (the checks on it then fail).
std::string ReadAll(const std::string& path) {
  StatusOr<std::string> bytes = ReadFileToString(path);
  return bytes.ok() ? std::move(*bytes) : std::string();
}

TEST(Npy, ParsesTheHeadersNumpyWrites) {
  struct Case {
    std::string dict;
    DType dtype;
    Shape shape;
    int major;
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (128, 512), }",
       DType::kF32,
       {128, 512},
       1},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", DType::kF64, {3}, 1},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (), }", DType::kI64, {}, 2},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 0, 4), }", DType::kU8, {2, 0, 4}, 3},
      {"{'shape': (1, 1, 1, 1), 'fortran_order': False, 'descr': '<f2'}",
       DType::kF16,
       {1, 1, 1, 1},
       1},
      {"{\"descr\": \"|b1\", \"fortran_order\": False, \"shape\": (5L,)}", DType::kBool, {5}, 1},
  };
  for (const Case& c : cases) {
    const size_t bytes = static_cast<size_t>(NumElements(c.shape)) * DTypeSize(c.dtype);
    auto a = ParseNpy(Npy(c.dict, bytes, c.major), "t.npy");
    ASSERT_TRUE(a.ok()) << c.dict << ": " << a.status().ToString();
    EXPECT_EQ(a->dtype, c.dtype) << c.dict;
    EXPECT_EQ(a->shape, c.shape) << c.dict;
    EXPECT_EQ(a->bytes.size(), bytes);
  }
}

TEST(Npy, RefusesMalformedHeadersWithClearErrors) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  struct Case {
    std::string npy;
    StatusCode code;
    const char* message;
  };
  std::string long_len = Npy(f4, 8);
  long_len[8] = '\xff';
  long_len[9] = '\x7f';  // header length 32767 > file
  const Case cases[] = {
      {"not an array at all", StatusCode::kDataLoss, "magic"},
      {std::string("\x93NUMPY\x04\x00\x10\x00", 10), StatusCode::kUnimplemented, "version 4.0"},
      {long_len, StatusCode::kDataLoss, "runs past the end"},
      {Npy(f4, 4), StatusCode::kDataLoss, "needs 8 data bytes, the array has 4"},
      {Npy(f4, 12), StatusCode::kDataLoss, "needs 8 data bytes, the array has 12"},
      {Npy("['descr', '<f4']", 8), StatusCode::kDataLoss, "not a dict"},
      {Npy("{'descr': '<f4', 'shape': (2,), }", 8), StatusCode::kDataLoss, "missing"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8),
       StatusCode::kDataLoss, "unknown key 'x'"},
      {Npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8),
       StatusCode::kDataLoss, "descr"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8), StatusCode::kDataLoss,
       "non-negative"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, }", 8), StatusCode::kDataLoss,
       "shape"},
      {Npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8), StatusCode::kDataLoss,
       "True/False"},
      {Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8),
       StatusCode::kUnimplemented, "'>f4' is not supported"},
      {Npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 8),
       StatusCode::kUnimplemented, "not supported"},
      {Npy("{'descr': 'hello', 'fortran_order': False, 'shape': (2,), }", 8), StatusCode::kDataLoss,
       "not a numpy dtype"},
      {Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8),
       StatusCode::kUnimplemented, "Fortran-order"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000, 1000000), }", 0),
       StatusCode::kResourceExhausted, "limit"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", 8), StatusCode::kDataLoss,
       "text after the dict"},
  };
  for (const Case& c : cases) {
    auto a = ParseNpy(c.npy, "vae.npz:x.npy");
    ASSERT_FALSE(a.ok()) << c.message;
    EXPECT_EQ(a.status().code(), c.code) << a.status().ToString();
    EXPECT_NE(a.status().message().find(c.message), std::string::npos) << a.status().ToString();
    EXPECT_NE(a.status().message().find("[npz] vae.npz:x.npy"), std::string::npos);
  }
  // A missing '\n' after padding: numpy always writes one.
  std::string no_newline = Npy(f4, 8);
  no_newline[no_newline.size() - 9] = ' ';
  EXPECT_EQ(ParseNpy(no_newline, "x").status().code(), StatusCode::kDataLoss);
}

TEST(Npz, ReadsStoredAndDeflatedArchives) {
  // vae-small.npz is stored (np.savez), vae-full.npz deflated (np.savez_compressed); both
  // carry the zip64 extras numpy writes (tools/reference/make_seg_fixtures.py).
  for (const char* path : {"testdata/seg/vae-small.npz", "testdata/seg/vae-full.npz"}) {
    auto npz = NpzFile::Open(path);
    ASSERT_TRUE(npz.ok()) << npz.status().ToString();
    const NpyArray* emb = npz->Find("_vq_vae._embedding");
    ASSERT_NE(emb, nullptr) << path;
    EXPECT_EQ(emb->dtype, DType::kF32);
    EXPECT_EQ(emb->shape[0], 128);
    EXPECT_NE(npz->Find("decoder.12.bias"), nullptr);
    EXPECT_EQ(npz->Find("decoder.12.bias.npy"), nullptr);           // names lose ".npy"
    EXPECT_EQ(npz->arrays().size(), 1u + 2 * (1 + 6 + 4 + 1) + 2);  // + the encoder stand-ins
  }
  auto full = NpzFile::Open("testdata/seg/vae-full.npz");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->Find("_vq_vae._embedding")->shape, (Shape{128, 512}));
  EXPECT_EQ(full->Find("decoder.4.weight")->shape, (Shape{128, 128, 4, 4}));
}

TEST(Npz, RefusesMissingAndCorruptArchives) {
  auto missing = NpzFile::Open("testdata/seg/no-such.npz");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto not_zip = NpzFile::FromBytes("PK\x03\x04 but nothing else", "bad.npz");
  EXPECT_EQ(not_zip.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(not_zip.status().message().find("[npz] bad.npz: not a readable .npz"),
            std::string::npos)
      << not_zip.status().ToString();
  // A flipped byte inside deflated data: the CRC (or inflate) catches it.
  const std::string full = ReadAll("testdata/seg/vae-full.npz");
  ASSERT_GT(full.size(), 600000u);
  std::string flipped = full;
  flipped[500000] = static_cast<char>(flipped[500000] ^ 0x10);
  auto f = NpzFile::FromBytes(flipped, "flipped.npz");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << f.status().ToString();
  // Every truncation is an error, never a crash.
  for (size_t cut :
       {size_t{0}, size_t{4}, size_t{100}, full.size() / 2, full.size() - 22, full.size() - 1}) {
    auto t = NpzFile::FromBytes(std::string_view(full).substr(0, cut), "cut.npz");
    EXPECT_FALSE(t.ok()) << cut;
  }
}

TEST(Npz, SurvivesRandomByteFlipsInAStoredArchive) {
  // Stored members put the .npy headers in plain sight of the flips: each result is a Status
  // or an archive whose arrays hold exactly what their shapes say.
  const std::string small = ReadAll("testdata/seg/vae-small.npz");
  ASSERT_FALSE(small.empty());
  std::mt19937 rng(17);
  int errors = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::string b = small;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] ^= static_cast<char>(1 + rng() % 255);
    auto npz = NpzFile::FromBytes(b, "flip.npz");
    if (!npz.ok()) {
      ++errors;
      continue;
    }
    for (const auto& [name, a] : npz->arrays()) {
      EXPECT_EQ(a.bytes.size(), static_cast<size_t>(a.view().numel()) * DTypeSize(a.dtype));
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace ocular

// Block formats against gguf-py (tools/reference/make_quant_fixtures.py): quantize bit for bit
// (bf16, f16, q8_0, q4_0), dequantize bit for bit (every format); error bounds and
// idempotence of our Q4_K / Q6_K quantizers (gguf-py has none to compare with).
#include "kernels/quant/blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "io/safetensors.h"

namespace ocular::quant {
namespace {

constexpr WFormat kAll[] = {WFormat::kF32,  WFormat::kBF16, WFormat::kF16,  WFormat::kQ8_0,
                            WFormat::kQ4_0, WFormat::kQ5_0, WFormat::kQ4_K, WFormat::kQ6_K};
constexpr WFormat kQuantized[] = {WFormat::kQ8_0, WFormat::kQ4_0, WFormat::kQ5_0, WFormat::kQ4_K,
                                  WFormat::kQ6_K};

// A fixture tensor; fails the test (and returns an empty view) when it is missing.
const TensorView& Get(const std::string& name) {
  static const StatusOr<SafetensorsFile>* file =
      new StatusOr<SafetensorsFile>(SafetensorsFile::Open("testdata/quant/blocks.safetensors"));
  static const TensorView kEmpty{};
  if (!file->ok()) {
    ADD_FAILURE() << file->status().ToString()
                  << " HINT: .venv/bin/python -m tools.reference.make_quant_fixtures";
    return kEmpty;
  }
  const TensorView* t = (*file)->Find(name);
  if (t == nullptr) ADD_FAILURE() << "no tensor " << name << " in the fixture";
  return t != nullptr ? *t : kEmpty;
}

std::vector<std::byte> Quantize(WFormat f, const float* x, int64_t cols) {
  std::vector<std::byte> q(static_cast<size_t>(WFormatRowBytes(f, cols)));
  QuantizeRow(f, x, cols, q.data());
  return q;
}

std::vector<float> Dequantize(WFormat f, const std::vector<std::byte>& q, int64_t cols) {
  std::vector<float> y(static_cast<size_t>(cols));
  DequantizeRow(f, q.data(), cols, y.data());
  return y;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(BlocksTest, QuantizeEqualsGgufPyBitForBit) {
  const TensorView& x = Get("x");
  const int64_t rows = x.shape[0], cols = x.shape[1];
  for (WFormat f :
       {WFormat::kBF16, WFormat::kF16, WFormat::kQ8_0, WFormat::kQ4_0, WFormat::kQ5_0}) {
    const TensorView& want = Get(std::string("quantize/") + WFormatName(f));
    const int64_t row_bytes = WFormatRowBytes(f, cols);
    ASSERT_EQ(want.shape[1], row_bytes) << WFormatName(f);
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<std::byte> got = Quantize(f, x.as<float>() + r * cols, cols);
      const auto* w = static_cast<const std::byte*>(want.data) + r * row_bytes;
      for (int64_t i = 0; i < row_bytes; ++i) {
        ASSERT_EQ(got[i], w[i]) << WFormatName(f) << " row " << r << " byte " << i << " (block "
                                << i / WFormatBlockBytes(f) << ")";
      }
    }
  }
}

TEST(BlocksTest, DequantizeEqualsGgufPyBitForBit) {
  for (WFormat f : kAll) {
    const std::string name = std::string("dequantize/") + WFormatName(f);
    const TensorView& blocks = Get(name + "/blocks");
    const TensorView& want = Get(name + "/values");
    const int64_t rows = want.shape[0], cols = want.shape[1];
    ASSERT_EQ(blocks.shape[1], WFormatRowBytes(f, cols)) << name;
    std::vector<float> got(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(f, static_cast<const std::byte*>(blocks.data) + r * blocks.shape[1], cols,
                    got.data());
      for (int64_t i = 0; i < cols; ++i) {
        ASSERT_EQ(Bits(got[i]), Bits(want.as<float>()[r * cols + i]))
            << name << " row " << r << " value " << i << ": got " << got[i] << " want "
            << want.as<float>()[r * cols + i];
      }
    }
  }
}

TEST(BlocksTest, FloatFormatsRoundTrip) {
  const TensorView& x = Get("x");
  const int64_t cols = x.shape[1];
  const float* row = x.as<float>();  // row 0: plain normal values
  EXPECT_EQ(Dequantize(WFormat::kF32, Quantize(WFormat::kF32, row, cols), cols),
            std::vector<float>(row, row + cols));
  for (WFormat f : {WFormat::kBF16, WFormat::kF16}) {  // a second rounding changes nothing
    const std::vector<float> once = Dequantize(f, Quantize(f, row, cols), cols);
    EXPECT_EQ(Dequantize(f, Quantize(f, once.data(), cols), cols), once) << WFormatName(f);
  }
}

// Relative RMS error ||x - dq(q(x))|| / ||x|| per format on Gaussian rows.
// Measured (64 Gaussian rows of 4352): q8_0 0.0054, q4_0 0.086, q5_0 0.043, q4_k 0.071,
// q6_k 0.0177 — about step / sqrt(12) of each grid; the bounds leave ~25 % headroom.
TEST(BlocksTest, QuantizationErrorIsBounded) {
  const int64_t cols = 4352;  // 17 super-blocks
  struct Bound {
    WFormat f;
    double gaussian;
  };
  const Bound bounds[] = {{WFormat::kQ8_0, 0.007},
                          {WFormat::kQ4_0, 0.11},
                          {WFormat::kQ5_0, 0.055},
                          {WFormat::kQ4_K, 0.09},
                          {WFormat::kQ6_K, 0.022}};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (const Bound& b : bounds) {
    double err = 0, norm = 0;
    for (int r = 0; r < 64; ++r) {
      std::vector<float> x(cols);
      for (float& v : x) v = normal(rng) * 0.02f;
      const std::vector<float> y = Dequantize(b.f, Quantize(b.f, x.data(), cols), cols);
      for (int64_t i = 0; i < cols; ++i) {
        err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
        norm += double(x[i]) * x[i];
      }
    }
    const double rel = std::sqrt(err / norm);
    EXPECT_LE(rel, b.gaussian) << WFormatName(b.f);
    EXPECT_GE(rel, b.gaussian / 4) << WFormatName(b.f) << ": suspiciously exact";
  }
}

// Every fixture row, every format: finite output, zeros stay zero, and the error of each value
// bounded by its block's scale (what makes the K formats' requantization step trustworthy).
TEST(BlocksTest, OddRowsQuantizeSanely) {
  const TensorView& x = Get("x");
  const int64_t rows = x.shape[0], cols = x.shape[1];
  for (WFormat f : kQuantized) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.as<float>() + r * cols;
      const std::vector<float> y = Dequantize(f, Quantize(f, xr, cols), cols);
      const int64_t bv = WFormatBlockValues(f);
      for (int64_t b = 0; b < cols / bv; ++b) {
        float amax = 0;
        for (int64_t i = 0; i < bv; ++i) amax = std::max(amax, std::fabs(xr[b * bv + i]));
        // Half a step of the block's grid (Q4_0: a whole step at +max, which clips to 7),
        // plus f16 rounding of the scales; the K formats' sub-block scales are 6-bit
        // approximations of the fitted ones, hence 1.5 steps of a 16- or 32-level grid.
        const double tol = (f == WFormat::kQ8_0   ? amax / 127.0 * 0.51
                            : f == WFormat::kQ4_0 ? amax / 8.0 * 1.01
                            : f == WFormat::kQ5_0 ? amax / 16.0 * 1.01
                            : f == WFormat::kQ4_K ? amax / 15.0 * 1.5
                                                  : amax / 31.0 * 1.5) +
                           amax * 1e-3 +
                           // f16 scales are absolute to 2^-25 (subnormals), times the
                           // largest multiplier: |q| <= 128, or sc·q + m <= 63·16
                           std::ldexp(1.0, -25) * (bv == 32 ? 128 : 63 * 16);
        for (int64_t i = 0; i < bv; ++i) {
          const int64_t k = b * bv + i;
          if (r == 5 && (f == WFormat::kQ8_0 || f == WFormat::kQ4_0)) break;  // f16 d overflows
          ASSERT_TRUE(std::isfinite(y[k])) << WFormatName(f) << " row " << r << " value " << k;
          ASSERT_LE(std::fabs(y[k] - xr[k]), tol) << WFormatName(f) << " row " << r << " value "
                                                  << k << ": x " << xr[k] << " got " << y[k];
        }
      }
    }
  }
}

// Quantizing the dequantized values again reproduces them: the grid the first pass chose is
// found again — exactly for Q8_0, Q4_0 and Q6_K (measured: identical values); Q4_K's
// least-squares refit of scale and min may land one 6-bit step away on a few sub-blocks
// (measured: 0.3 % of the first pass's error).
TEST(BlocksTest, RequantizingDequantizedValuesIsStable) {
  const int64_t cols = 2304;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (WFormat f : kQuantized) {
    double first = 0, second = 0;
    for (int r = 0; r < 16; ++r) {
      std::vector<float> x(cols);
      for (float& v : x) v = normal(rng);
      const std::vector<float> y1 = Dequantize(f, Quantize(f, x.data(), cols), cols);
      const std::vector<float> y2 = Dequantize(f, Quantize(f, y1.data(), cols), cols);
      for (int64_t i = 0; i < cols; ++i) {
        first += (double(y1[i]) - x[i]) * (double(y1[i]) - x[i]);
        second += (double(y2[i]) - y1[i]) * (double(y2[i]) - y1[i]);
      }
    }
    const double ratio = std::sqrt(second / first);
    const double max_ratio = f == WFormat::kQ4_K ? 0.02 : 0.0;
    EXPECT_LE(ratio, max_ratio) << WFormatName(f);
  }
}

TEST(BlocksTest, ZeroRowsGiveZeroBlocks) {
  const std::vector<float> zeros(512, 0.0f);
  for (WFormat f : kAll) {
    const std::vector<std::byte> q = Quantize(f, zeros.data(), 512);
    EXPECT_EQ(Dequantize(f, q, 512), zeros) << WFormatName(f);
  }
}

TEST(BlocksTest, F32ToF16MatchesTheExactConversionOnEveryHalf) {
  // Every finite half converts back to itself; midpoints between neighbours go to the even one.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    ASSERT_EQ(F32ToF16(f), h) << h;
    ASSERT_EQ(F32ToF16(-f), h | 0x8000u) << h;
    if (h + 1 < 0x7c00) {
      const float next = F16ToF32(static_cast<uint16_t>(h + 1));
      const double mid = (double(f) + next) / 2;
      const float midf = static_cast<float>(mid);
      if (double(midf) == mid) {
        ASSERT_EQ(F32ToF16(midf), (h & 1) ? h + 1 : h) << h;
        ASSERT_EQ(F32ToF16(std::nextafter(midf, 0.0f)), h) << h;
        ASSERT_EQ(F32ToF16(std::nextafter(midf, 1e9f)), h + 1) << h;
      }
    }
  }
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);
  EXPECT_EQ(F32ToF16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(F32ToF16(INFINITY), 0x7c00);
  EXPECT_EQ(F32ToF16(-INFINITY), 0xfc00);
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(NAN))));
}

}  // namespace
}  // namespace ocular::quant

// Quantized weights × f32 activations (QuantActivations::kF32): the kernels' in-register
// dequantization against quant::DequantizeRow (gguf-py's values) bit for bit, the scalar
// reference against a double-precision product with the dequantized rows, every ISA against
// the reference on odd shapes, batch / thread / tile independence bit for bit, and the option's
// effect through ops::MatMul.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "io/safetensors.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/ops.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant_test_util.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/test_util.h"

namespace ocular {
namespace {

using namespace ::ocular::kernel_test;  // NOLINT: test helpers

using DequantizeFn = void (*)(WFormat, const std::byte*, int64_t, float*);

// The SIMD dequantizations this CPU runs.
std::vector<std::pair<std::string, DequantizeFn>> SimdDequantizers() {
  std::vector<std::pair<std::string, DequantizeFn>> out = {{"avx2", cpu::DequantizeRowAvx2}};
  if (cpu::QuantF32Avx512Supported()) out.emplace_back("avx512", cpu::DequantizeRowAvx512);
  return out;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void ExpectSameBits(DequantizeFn fn, WFormat f, const std::byte* row, int64_t cols,
                    const float* want, const std::string& what) {
  std::vector<float> got(static_cast<size_t>(cols), NAN);
  fn(f, row, cols, got.data());
  for (int64_t i = 0; i < cols; ++i) {
    ASSERT_EQ(Bits(got[i]), Bits(want[i]))
        << what << " value " << i << ": got " << got[i] << " want " << want[i];
  }
}

TEST(QuantF32Test, KernelsAreInEveryTable) {
  ForEachIsa([&](const std::string& isa) {
    TestExec t(1);
    const kernels::KernelTable& table = t.backend.table();
    for (WFormat f : kQuantFormats) EXPECT_NE(table.matmul_f32_act[static_cast<int>(f)], nullptr);
    for (WFormat f : {WFormat::kF32, WFormat::kBF16, WFormat::kF16}) {
      EXPECT_EQ(table.matmul_f32_act[static_cast<int>(f)], nullptr);
    }
    const kernels::MatMulFn q8 = table.matmul_f32_act[static_cast<int>(WFormat::kQ8_0)];
    if (isa == "avx512" || isa == "amx") {  // amx: the avx512 table, its GEMM on AMX
      EXPECT_EQ(q8 == cpu::MatMulQuantF32Avx512, cpu::QuantF32Avx512Supported());
    } else if (isa == "avx2") {
      EXPECT_EQ(q8, cpu::MatMulQuantF32Avx2);
    } else {
      EXPECT_EQ(q8, ref::MatMulQuantF32);
    }
  });
}

TEST(QuantF32Test, ParseQuantActivations) {
  QuantActivations q = QuantActivations::kInt8;
  EXPECT_TRUE(ParseQuantActivations("f32", &q));
  EXPECT_EQ(q, QuantActivations::kF32);
  EXPECT_STREQ(QuantActivationsName(q), "f32");
  EXPECT_TRUE(ParseQuantActivations("int8", &q));
  EXPECT_EQ(q, QuantActivations::kInt8);
  for (const char* bad : {"", "F32", "int4", "bf16", "auto"}) {
    EXPECT_FALSE(ParseQuantActivations(bad, &q)) << bad;
  }
}

// Random bytes are valid blocks of every format once the f16 scales are finite: every nibble,
// fifth bit, 6-bit scale and min, and signed Q6_K scale occurs. The SIMD dequantization equals
// DequantizeRow bit for bit.
TEST(QuantF32Test, InRegisterDequantizationIsExactOnRandomBlocks) {
  std::mt19937 rng(7);
  for (WFormat f : kQuantFormats) {
    const int64_t cols = WFormatBlockValues(f) == 256 ? 256 * 9 : 32 * 37;
    const int64_t bytes = WFormatRowBytes(f, cols), block = WFormatBlockBytes(f);
    std::vector<std::byte> row(static_cast<size_t>(bytes));
    for (std::byte& b : row) b = static_cast<std::byte>(rng());
    // f16 fields at offsets 0 (and 2: Q4_K's dmin) of a block, 208 for Q6_K: exponent < 31.
    std::vector<int64_t> f16_offsets = {0};
    if (f == WFormat::kQ4_K) f16_offsets = {0, 2};
    if (f == WFormat::kQ6_K) f16_offsets = {208};
    for (int64_t b = 0; b < bytes / block; ++b) {
      for (int64_t off : f16_offsets) {
        std::byte& hi = row[static_cast<size_t>(b * block + off + 1)];
        if ((std::to_integer<int>(hi) & 0x7C) == 0x7C) hi &= std::byte{0xBF};
      }
    }
    std::vector<float> want(static_cast<size_t>(cols));
    quant::DequantizeRow(f, row.data(), cols, want.data());
    for (const auto& [isa, fn] : SimdDequantizers()) {
      ExpectSameBits(fn, f, row.data(), cols, want.data(), isa + " " + WFormatName(f));
    }
  }
}

// The gguf package's own dequantized values: the block fixtures (quant/blocks_test.cc) and rows
// of every type in the real Gemma 3 270M Q4_K_M file.
TEST(QuantF32Test, InRegisterDequantizationEqualsGgufPy) {
  auto blocks = SafetensorsFile::Open("testdata/quant/blocks.safetensors");
  auto real = SafetensorsFile::Open("testdata/gguf/gemma3_270m_rows.safetensors");
  ASSERT_TRUE(blocks.ok() && real.ok());
  int checked = 0;
  for (WFormat f : kQuantFormats) {
    const std::string name = WFormatName(f);
    const std::pair<const SafetensorsFile*, std::string> sources[] = {
        {&*blocks, "dequantize/" + name}, {&*real, name}};
    for (const auto& [file, prefix] : sources) {
      const TensorView* raw = file->Find(prefix + "/blocks");
      const TensorView* values = file->Find(prefix + "/values");
      if (raw == nullptr || values == nullptr) continue;  // the real file has no q4_0
      const int64_t cols = values->shape[1];
      ASSERT_EQ(raw->shape[1], WFormatRowBytes(f, cols));
      for (int64_t r = 0; r < values->shape[0]; ++r) {
        for (const auto& [isa, fn] : SimdDequantizers()) {
          ExpectSameBits(fn, f, static_cast<const std::byte*>(raw->data) + r * raw->shape[1], cols,
                         values->as<float>() + r * cols,
                         isa + " " + prefix + " row " + std::to_string(r));
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 9);  // 5 formats in the block fixtures, 4 in the real file
}

// out and Σ|a·ŵ| per output, in double, from the dequantized rows.
struct Exact {
  std::vector<double> out, scale;
};
Exact ExactProduct(const std::vector<float>& a, int64_t M, int64_t K, int64_t lda,
                   const QuantWeights& w) {
  const int64_t N = w.m.rows;
  Exact e;
  e.out.resize(static_cast<size_t>(M * N));
  e.scale.resize(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = static_cast<double>(a[m * lda + k]) * w.dequant[n * K + k];
        s += t;
        mag += std::fabs(t);
      }
      e.out[m * N + n] = s;
      e.scale[m * N + n] = mag;
    }
  }
  return e;
}

void ExpectNearExact(const std::vector<float>& got, const Exact& want, double rel,
                     const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want.out[i]), rel * want.scale[i] + 1e-30)
        << what << " element " << i << ": got " << got[i] << " want " << want.out[i];
  }
}

// The oracle: the scalar reference is the f32 matmul on the dequantized rows (summed in double),
// called directly on a column range with padded rows and a strided output.
TEST(QuantF32Test, ReferenceIsTheProductWithTheDequantizedRows) {
  const int64_t M = 3, K = 768, N = 11, lda = K + 5, ldo = N + 2;
  const std::vector<float> a = MakeActivations(M, lda, 3);
  for (WFormat f : kQuantFormats) {
    const QuantWeights w = MakeWeights(f, N, K, 4);
    const Exact e = ExactProduct(a, M, K, lda, w);
    std::vector<float> scratch(static_cast<size_t>(kernels::MatMulScratchFloats(K)));
    std::vector<float> out(static_cast<size_t>(M * ldo), NAN);
    ref::MatMulQuantF32(a.data(), M, K, lda, w.m, 2, 9, out.data(), ldo, scratch.data());
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < ldo; ++n) {
        const float got = out[m * ldo + n];
        if (n < 2 || n >= 9) {
          ASSERT_TRUE(std::isnan(got)) << "wrote outside [n0, n1): " << n;
        } else {
          ASSERT_LE(std::fabs(got - e.out[m * N + n]), 1e-6 * e.scale[m * N + n])
              << What(f, M, K, N) << " m=" << m << " n=" << n;
        }
      }
    }
  }
}

// Every ISA through ops::MatMul (3 threads; padded, misaligned activation rows) against the
// exact product, on the odd shapes each format allows (K an odd number of blocks), decode and
// prefill row counts: 1e-6 × Σ|terms|, f32 summation order being the only difference.
TEST(QuantF32Test, EveryIsaIsTheProductWithTheDequantizedRowsOnOddShapes) {
  ForEachOddShape({{32, 5, {1, 2, 3, 5, 8, 9, 13, 64, 67}},  // (K formats skip K = 32)
                   {96, 29, {1, 4, 7, 9, 65}},
                   {256, 17, {1, 2, 3, 7, 8, 9, 64, 65, 131}},
                   {2304, 67, {1, 3, 6, 8, 9, 66}},
                   {4352, 21, {1, 5, 8, 10}}},
                  [](const std::vector<float>& a, int64_t M, int64_t K, int64_t lda,
                     const QuantWeights& w, const std::string& what) {
                    const Exact e = ExactProduct(a, M, K, lda, w);
                    ForEachIsa([&](const std::string&) {
                      TestExec t(3);
                      t.ex.quant_activations = QuantActivations::kF32;
                      std::vector<float> got(static_cast<size_t>(M * w.m.rows), NAN);
                      ops::MatMul(t.ex, a.data(), M, K, lda, w.m, nullptr, got.data(), w.m.rows);
                      ExpectNearExact(got, e, 1e-6, what);
                    });
                  });
}

// A row's result is the same bit for bit whatever the batch (decode sizes 1-8 and prefill
// sizes, where the weights go through the f32 panel), the tile it lands in and the thread
// count: batching never changes a sequence's tokens.
TEST(QuantF32Test, RowsDoNotDependOnTheBatchTileOrThreads) {
  const int64_t K = 2304, N = 83, M = 40;
  const std::vector<float> a = MakeActivations(M, K, 11);
  ForEachQuantMatrixAndIsa(N, K, 12, [&](WFormat f, const QuantWeights& w, const std::string&) {
    TestExec one(1), four(4);
    one.ex.quant_activations = four.ex.quant_activations = QuantActivations::kF32;
    std::vector<float> single(M * N), batch(M * N), threads(M * N);
    for (int64_t m = 0; m < M; ++m) {
      ops::MatMul(one.ex, a.data() + m * K, 1, K, K, w.m, nullptr, single.data() + m * N, N);
    }
    for (int64_t b : {2, 3, 4, 5, 7, 8, 9, 17, 40}) {
      for (int64_t m0 = 0; m0 < M; m0 += b) {
        const int64_t rows = std::min(b, M - m0);
        ops::MatMul(one.ex, a.data() + m0 * K, rows, K, K, w.m, nullptr, batch.data() + m0 * N, N);
        ops::MatMul(four.ex, a.data() + m0 * K, rows, K, K, w.m, nullptr, threads.data() + m0 * N,
                    N);
      }
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_EQ(Bits(batch[i]), Bits(single[i]))
            << WFormatName(f) << " batch " << b << " m=" << i / N << " n=" << i % N;
        ASSERT_EQ(Bits(threads[i]), Bits(single[i])) << WFormatName(f) << " batch " << b;
      }
    }
  });
}

// The option reaches the kernels: with Gemma-like outliers in the activations, int8 activation
// blocks are far from the exact product (a visible part of their error bound, see
// quant_matmul_test.cc) and f32 activations are not; bias and the bf16 epilogue apply as for
// any matmul.
TEST(QuantF32Test, TheOptionSelectsTheActivationsAndEpiloguesApply) {
  const int64_t M = 3, K = 512, N = 37;
  const std::vector<float> a = MakeActivations(M, K, 13);
  std::vector<float> bias = RandomFloats(N, 14);
  const TensorView bias_view{bias.data(), DType::kF32, {N}};
  for (WFormat f : kQuantFormats) {
    const QuantWeights w = MakeWeights(f, N, K, 15);
    const Exact e = ExactProduct(a, M, K, K, w);
    ForEachIsa([&](const std::string&) {
      TestExec int8(2), f32(2), bf16(2, Precision::kBF16);
      f32.ex.quant_activations = bf16.ex.quant_activations = QuantActivations::kF32;
      std::vector<float> got_int8(M * N), got(M * N), got_bf16(M * N);
      ops::MatMul(int8.ex, a.data(), M, K, K, w.m, nullptr, got_int8.data(), N);
      ops::MatMul(f32.ex, a.data(), M, K, K, w.m, nullptr, got.data(), N);
      ops::MatMul(bf16.ex, a.data(), M, K, K, w.m, &bias_view, got_bf16.data(), N);
      double worst_int8 = 0, worst_f32 = 0;
      for (int64_t i = 0; i < M * N; ++i) {
        worst_int8 = std::max(worst_int8, std::fabs(got_int8[i] - e.out[i]) / e.scale[i]);
        worst_f32 = std::max(worst_f32, std::fabs(got[i] - e.out[i]) / e.scale[i]);
        ASSERT_EQ(got_bf16[i], BF16ToF32(F32ToBF16(got[i] + bias[i % N]))) << i;
      }
      EXPECT_LE(worst_f32, 1e-6) << WFormatName(f);
      EXPECT_GT(worst_int8, 1e-4) << WFormatName(f) << ": int8 activations look unquantized";
    });
  }
}

}  // namespace
}  // namespace ocular

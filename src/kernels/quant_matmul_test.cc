// Quantized-weight matmuls: every ISA against the scalar reference (the same integers, f32
// accumulation), the reference against the f32 product with the dequantized weights (the
// activation quantization's error, bounded), batch and thread independence, and the op's
// bias/epilogue and embedding paths on quantized matrices.
#include "kernels/cpu/quant_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/kernel_table.h"
#include "kernels/ops.h"
#include "kernels/quant/activations.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant_test_util.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/test_util.h"

namespace ocular {
namespace {

using namespace ::ocular::kernel_test;  // NOLINT: test helpers

// Per output: Σ_k |a_k|·2·amax(|ŵ| over k's block): the size of the terms the kernels sum
// (a K format's d·sc·q and dmin·m are each up to about twice the block's largest value).
std::vector<float> TermScale(const std::vector<float>& a, int64_t M, int64_t lda,
                             const QuantWeights& w, int64_t K) {
  const int64_t N = w.m.rows, block = quant::ActBlock(w.m.format);
  std::vector<float> wmag(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t b = 0; b < K / block; ++b) {
      float amax = 0;
      for (int64_t i = 0; i < block; ++i)
        amax = std::max(amax, std::fabs(w.dequant[n * K + b * block + i]));
      for (int64_t i = 0; i < block; ++i) wmag[n * K + b * block + i] = 2 * amax;
    }
  }
  std::vector<float> scale(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(a[m * lda + k]) * wmag[n * K + k];
      scale[m * N + n] = static_cast<float>(s);
    }
  }
  return scale;
}

std::vector<float> Reference(const std::vector<float>& a, int64_t M, int64_t K, int64_t lda,
                             const Matrix& w) {
  std::vector<float> out(static_cast<size_t>(M * w.rows));
  std::vector<float> scratch(static_cast<size_t>(kernels::MatMulScratchFloats(K)) + 16);
  // 64-byte aligned, as the arena gives it.
  float* s = scratch.data() + (16 - (reinterpret_cast<uintptr_t>(scratch.data()) % 64) / 4) % 16;
  ref::MatMulQuant(a.data(), M, K, lda, w, 0, w.rows, out.data(), w.rows, s);
  return out;
}

TEST(QuantMatMulTest, KernelsAreInEveryTable) {
  ForEachIsa([&](const std::string& isa) {
    TestExec t(1);
    for (WFormat f : kQuantFormats) {
      EXPECT_NE(t.backend.table().matmul[static_cast<int>(f)], nullptr) << WFormatName(f);
      EXPECT_NE(t.backend.table().row_to_f32[static_cast<int>(f)], nullptr) << WFormatName(f);
    }
    if (isa == "avx512" || isa == "amx") {  // amx: the avx512 table, its GEMM on AMX
      EXPECT_EQ(t.backend.table().matmul[static_cast<int>(WFormat::kQ8_0)] == cpu::MatMulQuantVnni,
                cpu::QuantVnniSupported());
    }
  });
}

// Every ISA's kernel (through ops::MatMul, 3 threads) against the scalar reference on odd
// shapes: the integers are identical, so only f32 accumulation differs — bounded by
// 2e-5 × the sum of the terms' magnitudes (a wrong scale, nibble or offset is O(1)).
TEST(QuantMatMulTest, EveryIsaMatchesTheScalarReferenceOnOddShapes) {
  ForEachOddShape(
      {{32, 5, {1, 2, 3, 7, 8, 9, 64, 65, 300}},  // (K formats skip K = 32)
       {256, 17, {1, 2, 3, 7, 8, 9, 64, 65, 300}},
       {2304, 67, {1, 2, 3, 8, 9, 65}},
       {4352, 21, {1, 3, 7, 8, 64}},
       {9472, 19, {1, 5, 9}}},  // 37 super-blocks: past the K-format decode's block chunks
      [](const std::vector<float>& a, int64_t M, int64_t K, int64_t lda, const QuantWeights& w,
         const std::string& what) {
        const std::vector<float> want = Reference(a, M, K, lda, w.m);
        const std::vector<float> scale = TermScale(a, M, lda, w, K);
        ForEachIsa([&](const std::string&) {
          TestExec t(3);
          std::vector<float> got(static_cast<size_t>(M * w.m.rows), NAN);
          ops::MatMul(t.ex, a.data(), M, K, lda, w.m, nullptr, got.data(), w.m.rows);
          ExpectClose(got.data(), want.data(), scale.data(), M * w.m.rows, 2e-5, 0.0, what);
        });
      });
}

// The reference against the f32 product with the dequantized weights. Its only error is the
// activations' quantization: |a − d·q| <= d/2 per value, d = amax(block) / 127, so
// |ref − a·ŵ| <= Σ_k d_k / 2 · |ŵ_k| (+ f32 rounding). The bound is met, and the error is a
// visible part of it (random-sign roundings add up like √K, measured ~4 % at K = 2304).
TEST(QuantMatMulTest, ReferenceIsTheProductWithDequantizedWeightsUpToActivationRounding) {
  const int64_t M = 5, K = 2304, N = 19;
  const std::vector<float> a = MakeActivations(M, K, 5);
  for (WFormat f : kQuantFormats) {
    const QuantWeights w = MakeWeights(f, N, K, 6);
    const std::vector<float> got = Reference(a, M, K, K, w.m);
    const int64_t block = quant::ActBlock(f);
    double worst_ratio = 0;
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double exact = 0, bound = 0, scale = 0;
        for (int64_t b = 0; b < K / block; ++b) {
          float amax = 0;
          for (int64_t i = 0; i < block; ++i)
            amax = std::max(amax, std::fabs(a[m * K + b * block + i]));
          for (int64_t i = 0; i < block; ++i) {
            const int64_t k = b * block + i;
            exact += double(a[m * K + k]) * w.dequant[n * K + k];
            bound += amax / 127.0 / 2 * std::fabs(w.dequant[n * K + k]);
            scale += std::fabs(double(a[m * K + k]) * w.dequant[n * K + k]);
          }
        }
        const double err = std::fabs(got[m * N + n] - exact);
        ASSERT_LE(err, bound * 1.001 + 1e-6 * scale)
            << What(f, M, K, N) << " m=" << m << " n=" << n;
        worst_ratio = std::max(worst_ratio, err / bound);
      }
    }
    EXPECT_GT(worst_ratio, 0.01) << WFormatName(f) << ": the activations look unquantized";
  }
}

TEST(QuantMatMulTest, ActivationQuantizationIsWithinHalfAStep) {
  for (WFormat f : {WFormat::kQ8_0, WFormat::kQ4_K}) {
    const int64_t K = 512;
    std::vector<float> x = MakeActivations(1, K, 9);
    std::fill(x.begin() + 256, x.begin() + 288, 0.0f);  // an all-zero block
    std::vector<std::byte> buf(static_cast<size_t>(quant::ActRowBytes(f, K)));
    quant::QuantizeActRow(f, x.data(), K, buf.data());
    const quant::ActRow r = quant::ActRowAt(f, buf.data(), K);
    const int64_t block = quant::ActBlock(f);
    for (int64_t b = 0; b < K / block; ++b) {
      float amax = 0.0f;
      for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[b * block + i]));
      // ggml's scales: block_q8_0 keeps amax / 127 in f16, block_q8_K 1 / (127 / amax) in f32.
      const float want = amax == 0.0f          ? 0.0f
                         : f == WFormat::kQ4_K ? 1.0f / (127.0f / amax)
                                               : F16ToF32(quant::F32ToF16(amax / 127.0f));
      EXPECT_EQ(r.d[b], want) << WFormatName(f) << " block " << b;
      // q = round(x · 127 / amax): within half a step of amax / 127, and the stored d differs
      // from amax / 127 by its own rounding (f16 for 32-value blocks) at most 127 times.
      const float step = amax / 127.0f, d = r.d[b];
      const float bound = step * 0.5f * (1 + 1e-5f) + 127.0f * std::fabs(d - step) * (1 + 1e-5f);
      for (int64_t i = 0; i < block; ++i) {
        const int64_t k = b * block + i;
        ASSERT_LE(std::fabs(x[k] - d * r.q[k]), bound) << k;
        ASSERT_LE(std::abs(r.q[k]), 127);
      }
    }
    for (int64_t g = 0; g < K / 16; ++g) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += r.q[16 * g + i];
      if (r.sum16 != nullptr) {
        EXPECT_EQ(r.sum16[g], s);
      } else if (g % 2 == 0) {
        int s2 = s;
        for (int i = 16; i < 32; ++i) s2 += r.q[16 * g + i];
        EXPECT_EQ(r.sum32[g / 2], s2);
      }
    }
  }
}

// The kernels' vectorized activation quantizers write the scalar definition's bytes, ties
// (x·id exactly half-way) included.
TEST(QuantMatMulTest, VectorizedActivationQuantizationIsByteIdentical) {
  const int64_t K = 2304;
  std::vector<float> x = MakeActivations(1, K, 21);
  for (int64_t i = 0; i < 256; ++i)
    x[i] = i == 0 ? 127.0f : (i % 50 - 25) + 0.5f;    // amax 127: id 1
  std::fill(x.begin() + 512, x.begin() + 800, 0.0f);  // zero blocks
  for (WFormat f : {WFormat::kQ8_0, WFormat::kQ4_K}) {
    const size_t bytes = static_cast<size_t>(quant::ActRowBytes(f, K));
    std::vector<std::byte> want(bytes), got(bytes);
    quant::QuantizeActRow(f, x.data(), K, want.data());
    std::vector<quant::QuantizeActRowFn> simd = {cpu::QuantizeActRowAvx2};
    for (quant::QuantizeActRowFn fn : simd) {
      std::fill(got.begin(), got.end(), std::byte{0});
      fn(f, x.data(), K, got.data());
      const quant::ActRow w = quant::ActRowAt(f, want.data(), K),
                          g = quant::ActRowAt(f, got.data(), K);
      for (int64_t k = 0; k < K; ++k) ASSERT_EQ(g.q[k], w.q[k]) << WFormatName(f) << " k=" << k;
      const int64_t blocks = K / quant::ActBlock(f);
      for (int64_t b = 0; b < blocks; ++b) ASSERT_EQ(g.d[b], w.d[b]) << b;
      for (int64_t i = 0; i < K / 32; ++i) {
        if (w.sum32 != nullptr) {
          ASSERT_EQ(g.sum32[i], w.sum32[i]) << i;
        } else {
          ASSERT_EQ(g.sum16[2 * i], w.sum16[2 * i]) << i;
          ASSERT_EQ(g.sum16[2 * i + 1], w.sum16[2 * i + 1]) << i;
        }
      }
    }
  }
}

// A row's result does not depend on the batch it is in, the thread count or the tile it lands
// in (the batched-decode guarantee of the runtime).
TEST(QuantMatMulTest, ResultsDoNotDependOnBatchOrThreads) {
  const int64_t K = 2304, N = 83, M = 9;
  const std::vector<float> a = MakeActivations(M, K, 11);
  ForEachQuantMatrixAndIsa(N, K, 12, [&](WFormat f, const QuantWeights& w, const std::string&) {
    TestExec one(1), four(4);
    std::vector<float> batch(M * N), threads(M * N), single(N);
    ops::MatMul(one.ex, a.data(), M, K, K, w.m, nullptr, batch.data(), N);
    ops::MatMul(four.ex, a.data(), M, K, K, w.m, nullptr, threads.data(), N);
    for (int64_t m = 0; m < M; ++m) {
      ops::MatMul(four.ex, a.data() + m * K, 1, K, K, w.m, nullptr, single.data(), N);
      for (int64_t n = 0; n < N; ++n) {
        ASSERT_EQ(batch[m * N + n], single[n]) << WFormatName(f) << " m=" << m << " n=" << n;
        ASSERT_EQ(batch[m * N + n], threads[m * N + n]) << WFormatName(f);
      }
    }
  });
}

// A row's output is bit-identical whatever M: decode rows (1-8, weights read in place), prefill
// rows (panels; chunks of up to 64 quantized rows, so 65 and 130 span several), any position in
// the batch and any thread count — what merged prefills of different requests need.
void ExpectRowsBitIdentical(int64_t K, int64_t N, const std::vector<int64_t>& Ms) {
  const int64_t max_m = *std::max_element(Ms.begin(), Ms.end());
  const std::vector<float> a = MakeActivations(max_m, K, 31);
  ForEachQuantMatrixAndIsa(N, K, 32, [&](WFormat f, const QuantWeights& w, const std::string& isa) {
    TestExec one(1), three(3);
    std::vector<float> alone(static_cast<size_t>(max_m * N)), got(alone.size());
    for (int64_t m = 0; m < max_m; ++m) {
      ops::MatMul(one.ex, a.data() + m * K, 1, K, K, w.m, nullptr, alone.data() + m * N, N);
    }
    for (int64_t M : Ms) {
      for (TestExec* t : {&one, &three}) {
        // The batch starts at a different row each time: row r sits at position r - start.
        const int64_t start = (M * 7) % (max_m - M + 1);
        ops::MatMul(t->ex, a.data() + start * K, M, K, K, w.m, nullptr, got.data(), N);
        for (int64_t i = 0; i < M * N; ++i) {
          ASSERT_EQ(got[i], alone[start * N + i]) << isa << " " << WFormatName(f) << " K=" << K
                                                  << " M=" << M << " row " << start + i / N;
        }
      }
    }
  });
}

TEST(QuantMatMulTest, RowsAreBitIdenticalAtEveryM) {
  // N: three full 16-row strips and a partial one
  ExpectRowsBitIdentical(1024, 53, {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 31, 64, 65, 130});
  // 37 super-blocks: the K-format decode rows take the weights in chunks of blocks
  ExpectRowsBitIdentical(9472, 19, {1, 4, 5, 8, 9, 17});
}

// The VNNI kernel called directly on f32 rows (quantizing them itself, 64 at a time after the
// panel in its scratch) equals ops::MatMul's path, which quantizes every row once per call and
// runs MatMulQuantRowsVnni: bit for bit, prefill row counts across several chunks.
TEST(QuantMatMulTest, VnniOnF32RowsEqualsTheOnceQuantizedPath) {
  if (!cpu::QuantVnniSupported()) GTEST_SKIP() << "no AVX512-VNNI";
  const int64_t M = 150, K = 2304, N = 37;
  const std::vector<float> a = MakeActivations(M, K, 21);
  const std::string saved = ActiveIsa();
  ASSERT_TRUE(SetIsa("avx512").ok());
  for (WFormat f : kQuantFormats) {
    const QuantWeights w = MakeWeights(f, N, K, 22);
    TestExec t(2);
    std::vector<float> want(M * N), got(M * N, NAN);
    ops::MatMul(t.ex, a.data(), M, K, K, w.m, nullptr, want.data(), N);
    std::vector<float> scratch(kernels::MatMulScratchFloats(K) + 16);
    float* s = scratch.data() + (16 - (reinterpret_cast<uintptr_t>(scratch.data()) % 64) / 4) % 16;
    cpu::MatMulQuantVnni(a.data(), M, K, K, w.m, 0, N, got.data(), N, s);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << WFormatName(f);
  }
  ASSERT_TRUE(SetIsa(saved).ok());
}

// Weights packed at load (ops::PackWeights where the active ISA has a layout: q8_0 under
// AVX512-VNNI) give every row the bits of the stored layout: decode and prefill row counts, a
// partial last strip, an odd block count and K slices with a remainder, three threads, the
// kernel on f32 rows (its own chunks of 64 rows) too; a row slice (whose `packed` no longer
// matches) reads the stored rows.
TEST(QuantMatMulTest, PackedWeightsGiveTheSameBits) {
  const int64_t N = 53;
  int packed_isas = 0;
  ForEachIsa([&](const std::string& isa) {
    for (int64_t K : {96, 544, 2304}) {
      const QuantWeights w = MakeWeights(WFormat::kQ8_0, N, K, 31);
      const size_t bytes = ops::PackedWeightBytes(w.m);
      EXPECT_EQ(bytes > 0, (isa == "avx512" || isa == "amx") && cpu::QuantVnniSupported());
      EXPECT_EQ(ops::PackedWeightBytes(MakeWeights(WFormat::kQ4_K, 16, 256, 1).m), 0u);
      if (bytes == 0) continue;
      EXPECT_EQ(bytes, static_cast<size_t>((N + 15) / 16 * 16 * WFormatRowBytes(w.m.format, K)));
      std::vector<std::byte> buf(bytes);
      ops::PackWeights(w.m, buf.data());
      const PackedMatrix pm{buf.data(), w.m.data, w.m.rows};
      Matrix packed = w.m;
      packed.packed = &pm;
      ASSERT_EQ(packed.packed_bytes(), buf.data());
      for (int64_t M : {1, 3, 8, 9, 17, 70}) {
        const std::vector<float> a = MakeActivations(M, K, static_cast<uint32_t>(32 + M));
        TestExec t(3);
        std::vector<float> want(M * N), got(M * N, NAN), direct(M * N, NAN);
        ops::MatMul(t.ex, a.data(), M, K, K, w.m, nullptr, want.data(), N);
        ops::MatMul(t.ex, a.data(), M, K, K, packed, nullptr, got.data(), N);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "K " << K << " M " << M;
        std::vector<float> scratch(kernels::MatMulScratchFloats(K) + 16);
        float* sp =
            scratch.data() + (16 - (reinterpret_cast<uintptr_t>(scratch.data()) % 64) / 4) % 16;
        cpu::MatMulQuantVnni(a.data(), M, K, K, packed, 16, N, direct.data(), N, sp);
        for (int64_t m = 0; m < M; ++m) {
          EXPECT_EQ(std::memcmp(&direct[m * N + 16], &want[m * N + 16], (N - 16) * sizeof(float)),
                    0)
              << "K " << K << " M " << M << " row " << m;
        }
      }
      Matrix slice = packed;
      slice.data = packed.row(16);
      slice.rows = 20;
      EXPECT_EQ(slice.packed_bytes(), nullptr);
      ++packed_isas;
    }
  });
  if (packed_isas == 0) GTEST_SKIP() << "no ISA here packs weights (AVX512-VNNI)";
}

// ops::MatMul's bias and bf16 epilogue apply to quantized weights as to any other.
TEST(QuantMatMulTest, BiasAndBf16EpilogueApply) {
  const int64_t M = 3, K = 256, N = 37;
  const std::vector<float> a = MakeActivations(M, K, 13);
  std::vector<float> bias = RandomFloats(N, 14);
  const TensorView bias_view{bias.data(), DType::kF32, {N}};
  const QuantWeights w = MakeWeights(WFormat::kQ4_K, N, K, 15);
  ForEachIsa([&](const std::string&) {
    TestExec f32(2), bf16(2, Precision::kBF16), fast(2, Precision::kBF16Fast);
    std::vector<float> plain(M * N), got(M * N), got_fast(M * N);
    ops::MatMul(f32.ex, a.data(), M, K, K, w.m, nullptr, plain.data(), N);
    ops::MatMul(bf16.ex, a.data(), M, K, K, w.m, &bias_view, got.data(), N);
    ops::MatMul(fast.ex, a.data(), M, K, K, w.m, &bias_view, got_fast.data(), N);
    for (int64_t i = 0; i < M * N; ++i) {
      ASSERT_EQ(got[i], BF16ToF32(F32ToBF16(plain[i] + bias[i % N]))) << i;
      ASSERT_EQ(got_fast[i], plain[i] + bias[i % N]) << i;  // bf16-fast: no quantized change
    }
  });
}

TEST(QuantMatMulTest, EmbedRowsDequantizesExactly) {
  const int64_t K = 512, N = 6;
  for (WFormat f : kQuantFormats) {
    const QuantWeights w = MakeWeights(f, N, K, 16);
    const int32_t ids[] = {5, 0, 3};
    ForEachIsa([&](const std::string&) {
      TestExec t(1);
      std::vector<float> out(3 * K);
      ops::EmbedRows(t.ex, w.m, ids, 3, out.data(), K);
      for (int i = 0; i < 3; ++i) {
        for (int64_t k = 0; k < K; ++k) {
          ASSERT_EQ(out[i * K + k], w.dequant[ids[i] * K + k]) << WFormatName(f);
        }
      }
    });
  }
}

}  // namespace
}  // namespace ocular

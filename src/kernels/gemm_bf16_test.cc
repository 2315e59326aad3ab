// The packed bf16 dot-product GEMM (cpu/gemm_bf16.h) behind ops::MatMul for bf16 weights and
// more than 8 rows under the bf16 precisions: its packing, its products against the scalar
// reference, and when MatMul must not use it.
#include "kernels/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/bf16_dot.h"
#include "kernels/cpu/gemm_bf16_amx.h"
#include "kernels/kernel_table.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/test_util.h"

namespace ocular {
namespace {

using namespace ::ocular::kernel_test;  // NOLINT: test helpers

float RoundBf16(float x) { return BF16ToF32(F32ToBF16(x)); }

std::vector<float> Bf16Values(size_t n, uint32_t seed) {
  std::vector<float> v = RandomFloats(n, seed);
  for (float& x : v) x = RoundBf16(x);
  return v;
}

// sum_k |a[m, k] * w[n, k]|: the scale of each output's rounding error.
std::vector<float> AbsScale(const std::vector<float>& a, int64_t M, int64_t K, int64_t lda,
                            const Weights& w, int64_t N) {
  std::vector<float> scale(M * N);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(a[m * lda + k] * BF16ToF32(w.u16[n * K + k]));
      scale[m * N + n] = static_cast<float>(s);
    }
  }
  return scale;
}

TEST(GemmBf16Test, PacksPairsOfColumnsIntoSixteenRowGroups) {
  if (!cpu::Bf16DotSupported()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  for (int64_t M : {1, 15, 16, 17, 40}) {
    for (int64_t K : {2, 30, 32, 34, 66}) {
      const int64_t lda = K + 3, K2 = K / 2, groups = (M + 15) / 16;
      std::vector<float> a = RandomFloats(M * lda, static_cast<uint32_t>(M * 100 + K));
      std::vector<uint32_t> packed(cpu::PackedBf16Words(M, K), 0xDEADBEEFu);
      ASSERT_EQ(packed.size(), static_cast<size_t>(groups * 16 * K2));
      ASSERT_TRUE(cpu::PackBf16Rows(a.data(), M, K, lda, 0, groups, false, packed.data()));
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t p = 0; p < K2; ++p) {
          for (int64_t i = 0; i < 16; ++i) {
            const int64_t m = g * 16 + i;
            const uint32_t want = m < M ? F32ToBF16(a[m * lda + 2 * p]) |
                                              uint32_t{F32ToBF16(a[m * lda + 2 * p + 1])} << 16
                                        : 0u;
            ASSERT_EQ(packed[(g * K2 + p) * 16 + i], want)
                << "M=" << M << " K=" << K << " g=" << g << " p=" << p << " i=" << i;
          }
        }
      }
      // exact_only refuses activations that are not bf16 values, accepts those that are.
      EXPECT_FALSE(cpu::PackBf16Rows(a.data(), M, K, lda, 0, groups, true, packed.data()));
      for (float& x : a) x = RoundBf16(x);
      EXPECT_TRUE(cpu::PackBf16Rows(a.data(), M, K, lda, 0, groups, true, packed.data()));
    }
  }
}

// bf16-fast on bf16 values: every product is exact, so the GEMM equals the f32 reference up to
// the summation order, on every tail of rows (16-row groups, 64-row tiles, 256-row blocks),
// weight rows (6-row tiles) and column pairs (16-pair packing blocks, 384-pair L2 blocks).
TEST(GemmBf16Test, MatchesTheReferenceOnEveryTail) {
  struct Case {
    int64_t M, K, N;
  };
  const Case cases[] = {{9, 2, 1},     {16, 32, 6},   {17, 34, 7},     {63, 30, 5},  {64, 66, 12},
                        {65, 770, 13}, {130, 96, 37}, {272, 1154, 19}, {300, 64, 6}, {20, 2, 300}};
  ForEachIsa([&](const std::string&) {
    TestExec t(2, Precision::kBF16Fast);
    for (const Case& c : cases) {
      const int64_t lda = c.K + 2;
      std::vector<float> a = Bf16Values(c.M * lda, static_cast<uint32_t>(c.M + c.K));
      Weights w = RandomWeights(DType::kBF16, {c.N, c.K}, static_cast<uint32_t>(c.N * 7 + c.K));
      std::vector<float> want(c.M * c.N), got(c.M * c.N);
      ref::MatMulBlock(a.data(), c.M, c.K, lda, w.matrix(), 0, c.N, want.data(), c.N);
      ops::MatMul(t.ex, a.data(), c.M, c.K, lda, w.matrix(), nullptr, got.data(), c.N);
      const std::vector<float> scale = AbsScale(a, c.M, c.K, lda, w, c.N);
      ExpectClose(
          got.data(), want.data(), scale.data(), c.M * c.N, 1e-6, 0.0,
          "M=" + std::to_string(c.M) + " K=" + std::to_string(c.K) + " N=" + std::to_string(c.N));
      if (HasFatalFailure()) return;
    }
  });
}

// The AMX GEMM against the AVX-512 one (the same packed activations, weights in place or with
// strided rows): equal up to the f32 summation order on every tail (16-row blocks of weight
// rows past the matrix, 16-pair steps, L2 depth blocks), and each column bit-identical whatever
// range [n0, n1) of columns the call computes (the thread split, unaligned ranges included).
TEST(GemmBf16Test, AmxMatchesTheAvx512GemmWhateverTheColumnRange) {
  if (!cpu::AmxBf16Supported()) GTEST_SKIP() << "no AMX-BF16 on this CPU/OS";
  struct Case {
    int64_t M, K, N, pad;  // pad: extra bf16 values per weight row (strided rows)
  };
  const Case cases[] = {{9, 2, 1, 0},     {16, 32, 16, 0},  {17, 34, 17, 2},    {40, 96, 33, 0},
                        {64, 66, 31, 64}, {65, 770, 50, 0}, {130, 4304, 23, 0}, {300, 64, 7, 0},
                        {20, 2, 300, 0},  {33, 1154, 64, 6}};
  for (const Case& c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.M) + " K=" + std::to_string(c.K) +
                 " N=" + std::to_string(c.N) + " pad=" + std::to_string(c.pad));
    const int64_t ldw = c.K + c.pad;
    const std::vector<float> a = Bf16Values(c.M * c.K, static_cast<uint32_t>(c.M * 3 + c.K));
    std::vector<uint16_t> wv(c.N * ldw);
    const std::vector<float> wf = RandomFloats(wv.size(), static_cast<uint32_t>(c.N + c.K));
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = F32ToBF16(wf[i]);
    const Matrix w{reinterpret_cast<const std::byte*>(wv.data()), WFormat::kBF16, c.N, c.K,
                   static_cast<size_t>(2 * ldw)};
    std::vector<uint32_t> packed(cpu::PackedBf16Words(c.M, c.K));
    ASSERT_TRUE(
        cpu::PackBf16Rows(a.data(), c.M, c.K, c.K, 0, (c.M + 15) / 16, true, packed.data()));
    std::vector<float> want(c.M * c.N), got(c.M * c.N, NAN), scale(c.M * c.N);
    cpu::GemmBf16(packed.data(), c.M, c.K, w, 0, c.N, want.data(), c.N);
    cpu::GemmBf16Amx(packed.data(), c.M, c.K, w, 0, c.N, got.data(), c.N);
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        double sum = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          sum += std::fabs(a[m * c.K + k] * BF16ToF32(wv[n * ldw + k]));
        }
        scale[m * c.N + n] = static_cast<float>(sum);
      }
    }
    ExpectClose(got.data(), want.data(), scale.data(), c.M * c.N, 1e-6, 0.0, "amx vs avx512");
    for (int64_t split : {1, 5, 16, 17, 33}) {
      if (split >= c.N) continue;
      std::vector<float> parts(c.M * c.N, NAN);
      cpu::GemmBf16Amx(packed.data(), c.M, c.K, w, 0, split, parts.data(), c.N);
      cpu::GemmBf16Amx(packed.data(), c.M, c.K, w, split, c.N, parts.data(), c.N);
      for (size_t i = 0; i < parts.size(); ++i) {
        ASSERT_EQ(parts[i], got[i]) << "split " << split << " element " << i;
      }
    }
  }
}

// Under bf16 a decode row's result does not depend on how many rows share the call (1-8):
// batching must never change a sequence's tokens (each ISA, its own kernels).
TEST(GemmBf16Test, Bf16DecodeRowsDoNotDependOnTheBatch) {
  // Enough outputs that another summation order flips some bf16 roundings (an LM head's 257k
  // outputs flip some per token: a batched answer then differs).
  const int64_t K = 2304, N = 4096;
  std::vector<float> a = Bf16Values(8 * K, 11);
  Weights w = RandomWeights(DType::kBF16, {N, K}, 12);
  ForEachIsa([&](const std::string&) {
    TestExec t(2, Precision::kBF16);
    std::vector<float> alone(8 * N), batch(8 * N);
    for (int64_t m = 0; m < 8; ++m) {
      ops::MatMul(t.ex, a.data() + m * K, 1, K, K, w.matrix(), nullptr, alone.data() + m * N, N);
    }
    for (int64_t M = 2; M <= 8; ++M) {
      ops::MatMul(t.ex, a.data(), M, K, K, w.matrix(), nullptr, batch.data(), N);
      for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(batch[i], alone[i]) << "M=" << M << " " << i;
    }
  });
}

// Under bf16 a row's result does not depend on how many rows share the call: prefill rows (the
// packed GEMM; its depth blocks are fixed by K) always, decode rows (1-8) with
// Exec::batch_invariant (MatMulBf16Rows: the GEMM's order), so merged prefills of different
// requests give each the answer it gets alone. K = 2560 spans two depth blocks. Where a table has
// no matmul_bf16_rows (amx, whose GEMM sums in another order; avx2 and CPUs without AVX512_BF16,
// whose f32 kernels tile decode and prefill rows differently) only M > 8 is compared.
TEST(GemmBf16Test, Bf16RowsAreBitIdenticalAtEveryM) {
  const int64_t K = 2560, N = 200, max_m = 280;
  std::vector<float> a = Bf16Values(max_m * K, 21);
  Weights w = RandomWeights(DType::kBF16, {N, K}, 22);
  ForEachIsa([&](const std::string& isa) {
    TestExec t(2, Precision::kBF16);
    t.ex.batch_invariant = true;
    std::vector<float> all(max_m * N), got(max_m * N);
    ops::MatMul(t.ex, a.data(), max_m, K, K, w.matrix(), nullptr, all.data(), N);
    for (int64_t M : {1, 2, 3, 5, 8, 9, 16, 17, 40, 64, 65, 150, 272}) {
      if (M <= 8 && isa != "scalar" && t.backend.table().matmul_bf16_rows == nullptr) continue;
      const int64_t start = (M * 13) % (max_m - M + 1);
      ops::MatMul(t.ex, a.data() + start * K, M, K, K, w.matrix(), nullptr, got.data(), N);
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_EQ(got[i], all[start * N + i]) << isa << " M=" << M << " row " << start + i / N;
      }
    }
  });
}

// bf16-fast rounds f32 activations to bf16 for the dot products where the CPU has them.
TEST(GemmBf16Test, Bf16FastRoundsActivationsWhereTheCpuHasBf16DotProducts) {
  const int64_t M = 33, K = 64, N = 21;
  std::vector<float> a = RandomFloats(M * K, 3);
  std::vector<float> rounded = a;
  for (float& x : rounded) x = RoundBf16(x);
  Weights w = RandomWeights(DType::kBF16, {N, K}, 4);
  ForEachIsa([&](const std::string&) {
    TestExec t(2, Precision::kBF16Fast);
    const bool gemm = t.backend.table().gemm_bf16 != nullptr;
    const std::vector<float>& used = gemm ? rounded : a;
    std::vector<float> want(M * N), got(M * N);
    ref::MatMulBlock(used.data(), M, K, K, w.matrix(), 0, N, want.data(), N);
    ops::MatMul(t.ex, a.data(), M, K, K, w.matrix(), nullptr, got.data(), N);
    const std::vector<float> scale = AbsScale(used, M, K, K, w, N);
    ExpectClose(got.data(), want.data(), scale.data(), M * N, 1e-6, 0.0, "bf16-fast");
  });
}

// a · wᵀ + b for the [M, K] activations `a` (rows of K) in t's precision: [M, N].
std::vector<float> Linear(const TestExec& t, const std::vector<float>& a, int64_t M, int64_t K,
                          const Weights& w, const Weights& b, int64_t N) {
  std::vector<float> out(M * N);
  ops::MatMul(t.ex, a.data(), M, K, K, w.matrix(), &b.view, out.data(), N);
  return out;
}

// Under kBF16 the bf16 dot products (the GEMM, and the batched-decode kernel for 2-8 rows)
// run only on activations that are bf16 values; any other input takes the f32 kernel, whose
// result rounded to bf16 is what the epilogue gives.
TEST(GemmBf16Test, Bf16PrecisionKeepsF32KernelForInexactActivations) {
  for (int64_t M : {5, 40}) {
    const int64_t K = 70, N = 23;
    std::vector<float> a = Bf16Values(M * K, 5);
    a[M * K - 1] += 1e-4f;  // one value that is not a bf16
    Weights w = RandomWeights(DType::kBF16, {N, K}, 6);
    Weights b = RandomWeights(DType::kBF16, {N}, 7);
    ForEachIsa([&](const std::string&) {
      TestExec f32(2), bf16(2, Precision::kBF16);
      const std::vector<float> want = Linear(f32, a, M, K, w, b, N);
      const std::vector<float> got = Linear(bf16, a, M, K, w, b, N);
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_EQ(got[i], RoundBf16(want[i])) << "M=" << M << " " << i;
    });
  }
}

// On bf16 activations kBF16 takes the bf16 dot products (batched decode or GEMM): the bias
// and the bf16 epilogue still apply, and the result is the rounded f32 product within one
// bf16 rounding step (summation order only).
TEST(GemmBf16Test, Bf16PrecisionOnBf16ActivationsAddsBiasAndRounds) {
  for (int64_t M : {4, 70}) {
    const int64_t K = 1152, N = 45;
    std::vector<float> a = Bf16Values(M * K, 8);
    Weights w = RandomWeights(DType::kBF16, {N, K}, 9);
    Weights b = RandomWeights(DType::kBF16, {N}, 10);
    ForEachIsa([&](const std::string&) {
      TestExec f32(1), bf16(2, Precision::kBF16), bf16_one(1, Precision::kBF16);
      const std::vector<float> want = Linear(f32, a, M, K, w, b, N);
      const std::vector<float> got = Linear(bf16, a, M, K, w, b, N);
      const std::vector<float> got_one = Linear(bf16_one, a, M, K, w, b, N);
      const std::vector<float> scale = AbsScale(a, M, K, K, w, N);
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_EQ(got[i], RoundBf16(got[i])) << i;
        ASSERT_EQ(got[i], got_one[i]) << i;  // the split over threads does not change results
        const double ulp = std::ldexp(std::fabs(want[i]), -7);
        ASSERT_LE(std::fabs(got[i] - want[i]), ulp + 1e-6 * scale[i]) << "M=" << M << " " << i;
      }
    });
  }
}

}  // namespace
}  // namespace ocular

// Every ISA path of ops.h against the scalar reference (kernels/ref), and the reference
// against independent double-precision formulas.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/bf16_dot.h"
#include "kernels/kernel_table.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/test_util.h"

namespace ocular {
namespace {

using namespace ::ocular::kernel_test;  // NOLINT: test helpers

TEST(IsaTest, ScalarFirstAndUnknownNamesRejected) {
  const std::vector<std::string> isas = SupportedIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), "scalar");
  EXPECT_EQ(SetIsa("sse9").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetIsa("").code(), StatusCode::kInvalidArgument);
  for (const char* name : {"avx2", "avx512", "amx"}) {
    bool listed = false;
    for (const std::string& isa : isas) listed |= isa == name;
    const Status status = SetIsa(name);
    EXPECT_EQ(status.ok(), listed) << name << ": " << status.ToString();
    if (!listed) {
      EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
    }
  }
  ASSERT_TRUE(SetIsa(isas.back()).ok());
}

TEST(MatMulTest, EveryIsaMatchesReferenceOnOddSizes) {
  const int64_t Ks[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 257};
  const int64_t Ms[] = {1, 2, 3, 4, 5, 8, 13, 70};  // 70: two row blocks
  const int64_t Ns[] = {1, 3, 17, 64, 67};
  ForEachIsa([&](const std::string&) {
    TestExec t(3);
    for (DType dtype : kWeightDTypes) {
      for (int64_t K : Ks) {
        for (int64_t N : Ns) {
          Weights w = RandomWeights(dtype, {N, K}, static_cast<uint32_t>(K * 131 + N));
          std::vector<float> bias = RandomFloats(N, 7);
          const TensorView bias_view{bias.data(), DType::kF32, {N}};
          const Matrix wm = w.matrix();
          for (int64_t M : Ms) {
            // a and out start one float past an aligned address, with padded row strides.
            const int64_t lda = K + 3, ldo = N + 1;
            std::vector<float> a_buf = RandomFloats(1 + M * lda, static_cast<uint32_t>(M + K));
            const float* a = a_buf.data() + 1;
            std::vector<float> want(M * ldo, 0.0f), scale(M * ldo, 0.0f), got_buf(1 + M * ldo);
            float* got = got_buf.data() + 1;
            for (int64_t m = 0; m < M; ++m) {
              ref::MatMulBlock(a + m * lda, 1, K, lda, wm, 0, N, want.data() + m * ldo, ldo);
              for (int64_t n = 0; n < N; ++n) {
                want[m * ldo + n] += bias[n];
                double s = std::fabs(bias[n]);
                for (int64_t k = 0; k < K; ++k) {
                  s += std::fabs(a[m * lda + k] * ref::ElementAsF32(w.view.data, dtype, n * K + k));
                }
                scale[m * ldo + n] = static_cast<float>(s);
              }
            }
            ops::MatMul(t.ex, a, M, K, lda, wm, &bias_view, got, ldo);
            const std::string what = "M=" + std::to_string(M) + " K=" + std::to_string(K) +
                                     " N=" + std::to_string(N) + " " + DTypeName(dtype);
            for (int64_t m = 0; m < M; ++m) {
              ExpectClose(got + m * ldo, want.data() + m * ldo, scale.data() + m * ldo, N, 1e-6,
                          0.0, what + " row " + std::to_string(m));
              if (HasFatalFailure()) return;
            }
          }
        }
      }
    }
  });
}

TEST(MatMulTest, BiasViewInEveryDTypeAndThreadCountsAgree) {
  const int64_t M = 5, K = 96, N = 200;
  std::vector<float> a = RandomFloats(M * K, 1);
  ForEachIsa([&](const std::string&) {
    for (DType wt : kWeightDTypes) {
      Weights w = RandomWeights(wt, {N, K}, 2);
      for (DType bt : kWeightDTypes) {
        Weights b = RandomWeights(bt, {N}, 3);
        TestExec one(1), four(4);
        std::vector<float> out1(M * N), out4(M * N), nobias(M * N);
        ops::MatMul(one.ex, a.data(), M, K, K, w.matrix(), &b.view, out1.data(), N);
        ops::MatMul(four.ex, a.data(), M, K, K, w.matrix(), &b.view, out4.data(), N);
        ops::MatMul(four.ex, a.data(), M, K, K, w.matrix(), nullptr, nobias.data(), N);
        for (int64_t i = 0; i < M * N; ++i) {
          ASSERT_EQ(out1[i], out4[i]) << i;  // the split over threads does not change results
          ASSERT_EQ(out1[i], nobias[i] + ref::ElementAsF32(b.view.data, bt, i % N)) << i;
        }
      }
    }
  });
}

// Fused products (Q/K/V, gate/up) equal separate MatMul calls bit for bit, at every ISA,
// precision and row count (decode, batched decode, the bf16 GEMM), with biases, and with
// matrices whose column counts split unevenly over the threads.
TEST(MatMulTest, FusedMatMulsEqualSeparateCalls) {
  const int64_t K = 64;
  const int64_t Ns[] = {37, 16, 50};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    std::vector<Weights> ws, bs;
    for (int i = 0; i < 3; ++i) {
      ws.push_back(RandomWeights(dt, {Ns[i], K}, static_cast<uint32_t>(10 + i)));
      bs.push_back(RandomWeights(dt, {Ns[i]}, static_cast<uint32_t>(20 + i)));
    }
    for (Precision prec : {Precision::kF32, Precision::kBF16, Precision::kBF16Fast}) {
      for (int64_t M : {1, 3, 8, 40}) {
        std::vector<float> a = RandomFloats(M * K, static_cast<uint32_t>(M));
        if (prec == Precision::kBF16) {
          for (float& x : a) x = BF16ToF32(F32ToBF16(x));  // as that precision's inputs are
        }
        ForEachIsa([&](const std::string&) {
          TestExec t(2, prec);
          std::vector<std::vector<float>> want(3), got(3);
          std::vector<Matrix> m;
          const TensorView* bias[3] = {&bs[0].view, nullptr, &bs[2].view};
          for (int i = 0; i < 3; ++i) {
            want[i].assign(M * Ns[i], 0.0f);
            got[i].assign(M * Ns[i], -1.0f);
            m.push_back(ws[i].matrix());
            ops::MatMul(t.ex, a.data(), M, K, K, m[i], bias[i], want[i].data(), Ns[i]);
          }
          ops::MatMuls(t.ex, a.data(), M, K, K,
                       {{&m[0], bias[0], got[0].data(), Ns[0]},
                        {&m[1], bias[1], got[1].data(), Ns[1]},
                        {&m[2], bias[2], got[2].data(), Ns[2]}});
          for (int i = 0; i < 3; ++i) {
            for (int64_t j = 0; j < M * Ns[i]; ++j) {
              ASSERT_EQ(got[i][j], want[i][j]) << "part " << i << " M=" << M << " element " << j;
            }
          }
        });
      }
    }
  }
}

TEST(MatMulDeathTest, AliasedOutputIsAnInvariantViolation) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  TestExec t(1);
  std::vector<float> buf(16, 1.0f);
  Weights w = RandomWeights(DType::kF32, {2, 4}, 1);
  EXPECT_DEATH(ops::MatMul(t.ex, buf.data(), 2, 4, 4, w.matrix(), nullptr, buf.data() + 2, 2),
               "must not alias");
}

TEST(MatMulTest, ReferenceComputesTheProduct) {
  // w = rows of the identity (shifted): out[m, n] = a[m, n + 1].
  const int64_t M = 3, K = 6, N = 4;
  std::vector<float> a = RandomFloats(M * K, 9), w(N * K, 0.0f), out(M * N);
  for (int64_t n = 0; n < N; ++n) w[n * K + n + 1] = 1.0f;
  const Matrix wm = MatrixFromView(TensorView{w.data(), DType::kF32, {N, K}}, N, K);
  ref::MatMulBlock(a.data(), M, K, K, wm, 0, N, out.data(), N);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) EXPECT_EQ(out[m * N + n], a[m * K + n + 1]);
  }
}

// Under Precision::kBF16 every output is the f32 result rounded to bf16 (the fused epilogue);
// bf16-fast leaves it in f32 (and, without bf16 dot products, equals f32 exactly).
TEST(MatMulTest, Bf16PrecisionRoundsInTheEpilogue) {
  const int64_t M = 3, K = 40, N = 37;
  std::vector<float> a = RandomFloats(M * K, 4);
  Weights w = RandomWeights(DType::kBF16, {N, K}, 5);
  Weights b = RandomWeights(DType::kBF16, {N}, 6);
  ForEachIsa([&](const std::string&) {
    TestExec f32(2), bf16(2, Precision::kBF16), fast(2, Precision::kBF16Fast);
    std::vector<float> want(M * N), got(M * N), got_fast(M * N);
    ops::MatMul(f32.ex, a.data(), M, K, K, w.matrix(), &b.view, want.data(), N);
    ops::MatMul(bf16.ex, a.data(), M, K, K, w.matrix(), &b.view, got.data(), N);
    ops::MatMul(fast.ex, a.data(), M, K, K, w.matrix(), &b.view, got_fast.data(), N);
    const bool dot = fast.backend.table().matmul_bf16_dot != nullptr;
    for (int64_t i = 0; i < M * N; ++i) {
      ASSERT_EQ(got[i], BF16ToF32(F32ToBF16(want[i]))) << i;
      if (!dot) {
        ASSERT_EQ(got_fast[i], want[i]) << i;
      }
    }
  });
}

// bf16-fast batched decode (2 <= M <= 8) on bf16 weights uses bf16 × bf16 dot products where
// the CPU has them: the activations are rounded to bf16, the products are exact and the sums f32.
// Elsewhere it is the f32 path. Either way it matches the reference on the inputs it actually used.
TEST(MatMulTest, Bf16FastDecodeUsesBf16DotProductsWhereAvailable) {
  const int64_t Ks[] = {1, 2, 31, 32, 33, 64, 100, 2309};
  const int64_t Ns[] = {1, 5, 67};
  ForEachIsa([&](const std::string& isa) {
    TestExec t(2, Precision::kBF16Fast);
    const bool dot = t.backend.table().matmul_bf16_dot != nullptr;
    if (isa == "avx512" || isa == "amx") {  // amx: the avx512 table, its GEMM on AMX
      EXPECT_EQ(dot, cpu::Bf16DotSupported());
    }
    for (int64_t K : Ks) {
      for (int64_t N : Ns) {
        Weights w = RandomWeights(DType::kBF16, {N, K}, static_cast<uint32_t>(K + 7 * N));
        const Matrix wm = w.matrix();
        for (int64_t M = 1; M <= 9; ++M) {
          const int64_t lda = K + 1;
          std::vector<float> a = RandomFloats(M * lda, static_cast<uint32_t>(M * 31 + K));
          std::vector<float> used = a;  // what the kernel multiplies
          // (and, for more rows on even K, the packed bf16 GEMM: gemm_bf16_test.cc)
          if (dot && M >= 2 && (M <= 8 || K % 2 == 0)) {
            for (float& x : used) x = BF16ToF32(F32ToBF16(x));
          }
          std::vector<float> want(M * N), scale(M * N), got(M * N);
          ref::MatMulBlock(used.data(), M, K, lda, wm, 0, N, want.data(), N);
          for (int64_t m = 0; m < M; ++m) {
            for (int64_t n = 0; n < N; ++n) {
              double sum = 0;
              for (int64_t k = 0; k < K; ++k) {
                sum += std::fabs(used[m * lda + k] * BF16ToF32(w.u16[n * K + k]));
              }
              scale[m * N + n] = static_cast<float>(sum);
            }
          }
          ops::MatMul(t.ex, a.data(), M, K, lda, wm, nullptr, got.data(), N);
          ExpectClose(
              got.data(), want.data(), scale.data(), M * N, 1e-6, 0.0,
              "M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N));
          if (HasFatalFailure()) return;
        }
      }
    }
  });
}

TEST(RoundBF16Test, EveryIsaRoundsToNearestEvenLikeTheScalarConversion) {
  std::vector<float> x = RandomFloats(1000, 3, -1e3f, 1e3f);
  // Ties, NaN, infinities, subnormals and the largest finite values.
  const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xffa00000u, 0x7f800000u,
                              0xff800000u, 0x00008000u, 0x00018000u, 0x7f7fffffu, 0x80000001u};
  for (uint32_t bits : special) {
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  ForEachIsa([&](const std::string&) {
    TestExec t(1, Precision::kBF16);
    for (int64_t n :
         {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{17}, static_cast<int64_t>(x.size())}) {
      std::vector<float> got(x.begin(), x.begin() + n);
      ops::CastToActivation(t.ex, got.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t want = F32ToBF16(x[i]);
        uint32_t got_bits;
        std::memcpy(&got_bits, &got[i], 4);
        ASSERT_EQ(got_bits >> 16, want) << "element " << i << " n=" << n;
        ASSERT_EQ(got_bits & 0xffffu, 0u) << i;
      }
    }
  });
}

}  // namespace
}  // namespace ocular

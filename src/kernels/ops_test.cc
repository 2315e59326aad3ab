// Every ISA path of ops.h against the scalar reference (kernels/ref), and the reference
// against independent double-precision formulas.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
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
  for (const char* name : {"avx2", "avx512"}) {
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
  ThreadPool pool(3);
  const int64_t Ks[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 257};
  const int64_t Ms[] = {1, 2, 3, 4, 5, 8, 13, 70};  // 70: two row blocks
  const int64_t Ns[] = {1, 3, 17, 64, 67};
  ForEachIsa([&](const std::string&) {
    for (DType dtype : kWeightDTypes) {
      for (int64_t K : Ks) {
        for (int64_t N : Ns) {
          Weights w = RandomWeights(dtype, {N, K}, static_cast<uint32_t>(K * 131 + N));
          std::vector<float> bias = RandomFloats(N, 7);
          for (int64_t M : Ms) {
            // a and out start one float past an aligned address, with padded row strides.
            const int64_t lda = K + 3, ldo = N + 1;
            std::vector<float> a_buf = RandomFloats(1 + M * lda, static_cast<uint32_t>(M + K));
            const float* a = a_buf.data() + 1;
            std::vector<float> want(M * ldo, 0.0f), scale(M * ldo, 0.0f), got_buf(1 + M * ldo);
            float* got = got_buf.data() + 1;
            for (int64_t m = 0; m < M; ++m) {
              ref::MatMulBlock(a + m * lda, 1, K, lda, w.view.data, dtype, 0, N,
                               want.data() + m * ldo, ldo);
              for (int64_t n = 0; n < N; ++n) {
                want[m * ldo + n] += bias[n];
                double s = std::fabs(bias[n]);
                for (int64_t k = 0; k < K; ++k) {
                  s += std::fabs(a[m * lda + k] * ref::ElementAsF32(w.view.data, dtype, n * K + k));
                }
                scale[m * ldo + n] = static_cast<float>(s);
              }
            }
            ops::MatMul(pool, a, M, K, lda, w.view, bias.data(), got, ldo);
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
        ThreadPool one(1), four(4);
        std::vector<float> out1(M * N), out4(M * N), nobias(M * N);
        ops::MatMulBias(one, a.data(), M, K, K, w.view, &b.view, out1.data(), N);
        ops::MatMulBias(four, a.data(), M, K, K, w.view, &b.view, out4.data(), N);
        ops::MatMul(four, a.data(), M, K, K, w.view, nullptr, nobias.data(), N);
        for (int64_t i = 0; i < M * N; ++i) {
          ASSERT_EQ(out1[i], out4[i]) << i;  // the split over threads does not change results
          ASSERT_EQ(out1[i], nobias[i] + ref::ElementAsF32(b.view.data, bt, i % N)) << i;
        }
      }
    }
  });
}

TEST(MatMulDeathTest, AliasedOutputIsAnInvariantViolation) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  ThreadPool pool(1);
  std::vector<float> buf(16, 1.0f);
  Weights w = RandomWeights(DType::kF32, {2, 4}, 1);
  EXPECT_DEATH(ops::MatMul(pool, buf.data(), 2, 4, 4, w.view, nullptr, buf.data() + 2, 2),
               "must not alias");
}

TEST(MatMulTest, ReferenceComputesTheProduct) {
  // w = rows of the identity (shifted): out[m, n] = a[m, n + 1].
  const int64_t M = 3, K = 6, N = 4;
  std::vector<float> a = RandomFloats(M * K, 9), w(N * K, 0.0f), out(M * N);
  for (int64_t n = 0; n < N; ++n) w[n * K + n + 1] = 1.0f;
  ref::MatMulBlock(a.data(), M, K, K, w.data(), DType::kF32, 0, N, out.data(), N);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) EXPECT_EQ(out[m * N + n], a[m * K + n + 1]);
  }
}

}  // namespace
}  // namespace ocular

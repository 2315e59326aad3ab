// Norms, activations, RoPE and dtype conversion: every ISA against the scalar reference, and
// the reference against double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/test_util.h"

namespace ocular {
namespace {

using namespace ::ocular::kernel_test;  // NOLINT: test helpers

const int64_t kLengths[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000};

TEST(NormTest, RmsNormMatchesDoubleFormulaAndReference) {
  for (DType dtype : kWeightDTypes) {
    for (int64_t dim : {1, 3, 16, 17, 33, 64, 257, 2048}) {
      const int64_t rows = 3;
      std::vector<float> x_buf = RandomFloats(1 + rows * dim, 5, -3.0f, 3.0f);
      const float* x = x_buf.data() + 1;  // misaligned
      Weights w = RandomWeights(dtype, {dim}, 6);
      for (bool add_one : {true, false}) {
        const std::string what = std::string(DTypeName(dtype)) + " dim=" + std::to_string(dim) +
                                 (add_one ? " gemma" : " llama");
        std::vector<float> want(rows * dim), exact(rows * dim);
        ref::RmsNorm(x, rows, dim, w.view, 1e-6f, add_one, want.data());
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
          const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
          for (int64_t i = 0; i < dim; ++i) {
            const double wi = ref::ElementAsF32(w.view.data, dtype, i);
            exact[r * dim + i] = static_cast<float>(x[r * dim + i] * inv * (add_one ? 1 + wi : wi));
          }
        }
        ExpectClose(want.data(), exact.data(), nullptr, rows * dim, 1e-6, 1e-30, what + " ref");
        ForEachIsa([&](const std::string&) {
          std::vector<float> got(x, x + rows * dim);
          TestExec t;
          ops::RmsNorm(t.ex, got.data(), rows, dim, w.view, 1e-6f, add_one,
                       got.data());  // in place
          ExpectClose(got.data(), want.data(), nullptr, rows * dim, 1e-6, 1e-30, what);
        });
      }
    }
  }
}

TEST(NormTest, LayerNormMatchesDoubleFormulaAndReference) {
  for (DType dtype : kWeightDTypes) {
    for (int64_t dim : {1, 3, 16, 17, 33, 64, 257, 1152}) {
      const int64_t rows = 3;
      // An offset mean makes the two-pass variance matter.
      std::vector<float> x_buf = RandomFloats(1 + rows * dim, 8, 9.0f, 11.0f);
      const float* x = x_buf.data() + 1;
      Weights w = RandomWeights(dtype, {dim}, 10), b = RandomWeights(dtype, {dim}, 11);
      const std::string what = std::string(DTypeName(dtype)) + " dim=" + std::to_string(dim);
      std::vector<float> want(rows * dim), exact(rows * dim), scale(rows * dim);
      ref::LayerNorm(x, rows, dim, w.view, b.view, 1e-6f, want.data());
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i];
        mean /= dim;
        for (int64_t i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
        var /= dim;
        for (int64_t i = 0; i < dim; ++i) {
          const double wi = ref::ElementAsF32(w.view.data, dtype, i);
          const double bi = ref::ElementAsF32(b.view.data, dtype, i);
          const double norm = (x[r * dim + i] - mean) / std::sqrt(var + 1e-6);
          exact[r * dim + i] = static_cast<float>(norm * wi + bi);
          // Rounding x (≈10) to f32 before subtracting the mean costs ~|x|·2^-24 / std.
          scale[r * dim + i] = static_cast<float>(std::fabs(norm * wi) + std::fabs(bi) +
                                                  std::fabs(wi) * 10.0 / std::sqrt(var + 1e-6));
        }
      }
      ExpectClose(want.data(), exact.data(), scale.data(), rows * dim, 4e-7, 1e-30, what + " ref");
      ForEachIsa([&](const std::string&) {
        std::vector<float> got(x, x + rows * dim);
        TestExec t;
        ops::LayerNorm(t.ex, got.data(), rows, dim, w.view, b.view, 1e-6f, got.data());
        ExpectClose(got.data(), want.data(), scale.data(), rows * dim, 1e-6, 1e-30, what);
      });
    }
  }
}

// Elementwise op `op` on every ISA vs the reference `ref_op`:
// |got - want| <= rel * |want| + abs_per_x * |x| (the second term covers 1 + tanh(·) near 0).
template <typename Op, typename RefOp>
void CheckUnary(Op op, RefOp ref_op, float lo, float hi, double rel, double abs_per_x,
                const char* name) {
  for (int64_t n : kLengths) {
    std::vector<float> buf = RandomFloats(1 + n, static_cast<uint32_t>(n + 1), lo, hi);
    std::vector<float> want(buf.begin() + 1, buf.end());
    ref_op(want.data(), n);
    std::vector<float> scale(n);
    for (int64_t i = 0; i < n; ++i) {
      scale[i] = static_cast<float>(std::fabs(want[i]) + abs_per_x / rel * std::fabs(buf[i + 1]));
    }
    ForEachIsa([&](const std::string&) {
      std::vector<float> got_buf = buf;
      TestExec t;
      op(t.ex, got_buf.data() + 1, n);  // misaligned
      ExpectClose(got_buf.data() + 1, want.data(), scale.data(), n, rel, 1e-30,
                  std::string(name) + " n=" + std::to_string(n));
      EXPECT_EQ(got_buf[0], buf[0]) << "wrote before the start";
    });
  }
}

// The scalar oracle `ref_op` over 4000 values in [-12, 12] (seed `seed`) against `exact(x)` in
// double: within 4e-7 relative + 1.2e-7 |x| (the f32 rounding of 1 + tanh / erf(.) dominates
// where it is near 0: |0.5 x| * 2^-23).
template <typename RefOp, typename Exact>
void ExpectOracleMatchesFormula(uint32_t seed, RefOp ref_op, Exact exact) {
  std::vector<float> x = RandomFloats(4000, seed, -12.0f, 12.0f);
  std::vector<float> y = x;
  ref_op(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = exact(static_cast<double>(x[i]));
    ASSERT_NEAR(y[i], want, 4e-7 * std::fabs(want) + 1.2e-7 * std::fabs(x[i])) << x[i];
  }
}

TEST(ActivationTest, GeluTanhMatchesDoubleFormulaAndReference) {
  ExpectOracleMatchesFormula(12, ref::GeluTanh, [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  });
  CheckUnary(ops::GeluTanh, ref::GeluTanh, -12.0f, 12.0f, 1e-6, 2e-7, "gelu_tanh");
  CheckUnary(ops::GeluTanh, ref::GeluTanh, -0.01f, 0.01f, 1e-6, 0.0, "gelu_tanh small");
}

TEST(ActivationTest, GeluErfMatchesDoubleFormulaAndReference) {
  ExpectOracleMatchesFormula(13, ref::GeluErf,
                             [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  CheckUnary(ops::GeluErf, ref::GeluErf, -12.0f, 12.0f, 1e-6, 0.0, "gelu_erf");
}

TEST(ActivationTest, SoftCapMatchesReference) {
  for (float cap : {30.0f, 50.0f}) {
    CheckUnary([cap](const Exec& ex, float* x, int64_t n) { ops::SoftCap(ex, x, n, cap); },
               [cap](float* x, int64_t n) { ref::SoftCap(x, n, cap); }, -200.0f, 200.0f, 1e-6, 0.0,
               "softcap");
  }
  std::vector<float> x = {0.0f, 1.0f, -1000.0f, 1000.0f};
  ref::SoftCap(x.data(), 4, 30.0f);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_NEAR(x[1], 30.0 * std::tanh(1.0 / 30.0), 1e-6);
  EXPECT_EQ(x[2], -30.0f);
  EXPECT_EQ(x[3], 30.0f);
}

TEST(ElementwiseTest, MulAddScaleAreExact) {
  for (int64_t n : kLengths) {
    std::vector<float> a = RandomFloats(n + 1, 14), b = RandomFloats(n + 1, 15);
    ForEachIsa([&](const std::string&) {
      std::vector<float> prod(n + 1, -7.0f), sum(n + 1, -7.0f), scaled = a;
      TestExec t;
      ops::Mul(t.ex, a.data() + 1, b.data() + 1, prod.data() + 1, n);
      ops::Add(t.ex, a.data() + 1, b.data() + 1, sum.data() + 1, n);
      ops::Scale(t.ex, scaled.data() + 1, n, 0.37f);
      EXPECT_EQ(prod[0], -7.0f);
      EXPECT_EQ(scaled[0], a[0]);
      for (int64_t i = 1; i <= n; ++i) {
        ASSERT_EQ(prod[i], a[i] * b[i]);
        ASSERT_EQ(sum[i], a[i] + b[i]);
        ASSERT_EQ(scaled[i], a[i] * 0.37f);
      }
      std::vector<float> inplace(a.begin() + 1, a.end());
      ops::Add(t.ex, inplace.data(), b.data() + 1, inplace.data(), n);  // residual in place
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(inplace[i], a[i + 1] + b[i + 1]);
    });
  }
}

TEST(RopeTest, MatchesNaiveDoubleRotationWithHfAngles) {
  const int64_t rows = 5, ld_pad = 3;
  for (int64_t head_dim : {2, 4, 16, 72, 128, 256}) {
    for (int64_t n_heads : {1, 3, 8}) {
      const int64_t ld = n_heads * head_dim + ld_pad;
      const std::vector<int64_t> pos = {0, 1, 1, 4095, 8191};
      std::vector<float> x0 = RandomFloats(rows * ld, 16, -2.0f, 2.0f);
      // Naive: angle as HF computes it (f32 inv_freq, f32 product), the rest in double.
      std::vector<float> want = x0;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < n_heads; ++h) {
          float* xh = want.data() + r * ld + h * head_dim;
          const std::vector<float> orig(xh, xh + head_dim);
          for (int64_t k = 0; k < head_dim / 2; ++k) {
            const float inv_freq =
                1.0f / std::pow(10000.0f, static_cast<float>(2 * k) / static_cast<float>(head_dim));
            const double angle = static_cast<float>(pos[r]) * inv_freq;
            const double x1 = orig[k], x2 = orig[k + head_dim / 2];
            xh[k] = static_cast<float>(x1 * std::cos(angle) - x2 * std::sin(angle));
            xh[k + head_dim / 2] = static_cast<float>(x2 * std::cos(angle) + x1 * std::sin(angle));
          }
        }
      }
      ForEachIsa([&](const std::string&) {
        std::vector<float> got = x0;
        TestExec t;
        ops::Rope(t.ex, got.data(), rows, n_heads, head_dim, ld, pos.data(), 10000.0f);
        for (int64_t r = 0; r < rows; ++r) {
          ExpectClose(got.data() + r * ld, want.data() + r * ld, nullptr, n_heads * head_dim, 0.0,
                      1e-6, "rope d=" + std::to_string(head_dim) + " row " + std::to_string(r));
          for (int64_t p = n_heads * head_dim; p < ld; ++p) {
            ASSERT_EQ(got[r * ld + p], x0[r * ld + p]) << "row padding modified";
          }
        }
      });
    }
  }
}

// Under Precision::kBF16, RoPE follows torch on bf16 tensors: cos/sin rounded to bf16, each
// product and the sum rounded. Every ISA equals the scalar twin exactly (same f32 operations).
TEST(RopeTest, Bf16OrderEqualsScalarTwinAndDiffersFromF32) {
  const int64_t rows = 4;
  const std::vector<int64_t> pos = {1, 2, 300, 8191};
  for (int64_t head_dim : {2, 6, 18, 72, 256}) {
    const int64_t n_heads = 3, ld = n_heads * head_dim + 1;
    std::vector<float> x0 = RandomFloats(rows * ld, 18, -2.0f, 2.0f);
    {  // inputs are bf16 values, as torch's q/k would be
      TestExec t(1, Precision::kBF16);
      ops::CastToActivation(t.ex, x0.data(), rows * ld);
    }
    std::vector<float> want = x0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> cos(head_dim / 2), sin(head_dim / 2);
      ref::RopeCosSin(pos[r], head_dim, 10000.0f, cos.data(), sin.data());
      ref::RoundBF16(cos.data(), head_dim / 2);
      ref::RoundBF16(sin.data(), head_dim / 2);
      ref::RopeRowBF16(want.data() + r * ld, n_heads, head_dim, cos.data(), sin.data());
    }
    ForEachIsa([&](const std::string&) {
      std::vector<float> got = x0, got_f32 = x0;
      TestExec t(1, Precision::kBF16), f(1, Precision::kF32);
      ops::Rope(t.ex, got.data(), rows, n_heads, head_dim, ld, pos.data(), 10000.0f);
      ops::Rope(f.ex, got_f32.data(), rows, n_heads, head_dim, ld, pos.data(), 10000.0f);
      bool differs = false;
      for (int64_t i = 0; i < rows * ld; ++i) {
        ASSERT_EQ(got[i], want[i]) << "head_dim " << head_dim << " element " << i;
        differs |= got[i] != got_f32[i];
      }
      EXPECT_TRUE(differs || head_dim <= 2) << "bf16 RoPE should round where f32 does not";
    });
  }
}

TEST(ToF32Test, ConvertsEveryDTypeExactly) {
  // Every 16-bit pattern, as bf16 and as f16 (subnormals, inf, NaN included).
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const TensorView t{all.data(), dtype, {65536}};
    ForEachIsa([&](const std::string&) {
      for (int64_t offset : {0, 1, 3}) {
        std::vector<float> got(65536 - offset);
        TestExec te;
        ops::ToF32(te.ex, t, offset, 65536 - offset, got.data());
        for (int64_t i = 0; i < 65536 - offset; ++i) {
          const uint16_t h = all[i + offset];
          const float want = dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
          uint32_t got_bits, want_bits;
          std::memcpy(&got_bits, &got[i], 4);
          std::memcpy(&want_bits, &want, 4);
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got[i])) << std::hex << h;
          } else {
            ASSERT_EQ(got_bits, want_bits) << DTypeName(dtype) << " 0x" << std::hex << h;
          }
        }
      }
    });
  }
  std::vector<float> f = RandomFloats(40, 17);
  const TensorView t{f.data(), DType::kF32, {4, 10}};
  std::vector<float> row(10);
  TestExec te;
  ops::ToF32(te.ex, t, 20, 10, row.data());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(row[i], f[20 + i]);
}

}  // namespace
}  // namespace ocular

// Helpers shared by the kernel tests (random inputs, per-ISA loops, tolerant comparisons).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/half.h"
#include "core/matrix.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/exec.h"
#include "kernels/ops.h"

namespace ocular::kernel_test {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Weights of one dtype: raw storage plus a view of shape `shape` (and, for 2-D shapes, the
// same storage as a Matrix).
struct Weights {
  std::vector<float> f32;
  std::vector<uint16_t> u16;
  TensorView view;
  Matrix matrix() const {
    return MatrixFromView(view, view.shape[0], view.numel() / view.shape[0]);
  }
};

// An execution context on the ISA active at construction (build it inside ForEachIsa).
struct TestExec {
  explicit TestExec(int threads = 1, Precision precision = Precision::kF32,
                    size_t arena_bytes = size_t{64} << 20)
      : pool(threads), arena(arena_bytes), backend(pool), ex{backend, precision, arena} {}
  ThreadPool pool;
  Arena arena;
  Backend backend;
  Exec ex;
};

inline Weights RandomWeights(DType dtype, Shape shape, uint32_t seed) {
  Weights w;
  const size_t n = static_cast<size_t>(NumElements(shape));
  w.f32 = RandomFloats(n, seed);
  if (dtype == DType::kBF16) {
    for (float x : w.f32) w.u16.push_back(F32ToBF16(x));
  } else if (dtype == DType::kF16) {
    std::mt19937 rng(seed);  // random finite halves in roughly [-2, 2], including tiny ones
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = rng();
      const uint16_t exp = static_cast<uint16_t>(bits % 16);  // 2^-15 .. 2^0 (0 = subnormal)
      w.u16.push_back(
          static_cast<uint16_t>(((bits >> 8) & 0x8000u) | (exp << 10) | ((bits >> 4) & 0x3ffu)));
    }
  }
  w.view = TensorView{dtype == DType::kF32 ? static_cast<const void*>(w.f32.data())
                                           : static_cast<const void*>(w.u16.data()),
                      dtype, std::move(shape)};
  return w;
}

inline constexpr DType kWeightDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// Runs body once per ISA this machine supports, restoring the default afterwards.
template <typename Body>
void ForEachIsa(Body body) {
  const std::string saved = ActiveIsa();
  for (const std::string& isa : SupportedIsas()) {
    SCOPED_TRACE("isa=" + isa);
    ASSERT_TRUE(SetIsa(isa).ok());
    ASSERT_EQ(isa, ActiveIsa());
    body(isa);
  }
  ASSERT_TRUE(SetIsa(saved).ok());
}

// |got - want| <= rel * scale + abs for each element, reporting the first failure.
inline void ExpectClose(const float* got, const float* want, const float* scale, int64_t n,
                        double rel, double abs, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    const double s = scale ? scale[i] : std::fabs(want[i]);
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    ASSERT_LE(err, rel * s + abs) << what << " element " << i << ": got " << got[i] << " want "
                                  << want[i];
  }
}

}  // namespace ocular::kernel_test

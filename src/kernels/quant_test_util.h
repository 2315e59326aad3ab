// Quantized test matrices and activations shared by the quantized-matmul tests.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/matrix.h"
#include "kernels/quant/blocks.h"
#include "kernels/test_util.h"

namespace ocular::kernel_test {

inline constexpr WFormat kQuantFormats[] = {WFormat::kQ8_0, WFormat::kQ4_0, WFormat::kQ5_0,
                                            WFormat::kQ4_K, WFormat::kQ6_K};

// A [N, K] quantized matrix from random weights (one zero block per row, to exercise d = 0)
// and its exact dequantization.
struct QuantWeights {
  std::vector<std::byte> bytes;
  std::vector<float> dequant;  // [N, K]
  Matrix m;
};

inline QuantWeights MakeWeights(WFormat f, int64_t N, int64_t K, uint32_t seed) {
  QuantWeights q;
  const int64_t row_bytes = WFormatRowBytes(f, K);
  q.bytes.resize(static_cast<size_t>(N * row_bytes));
  q.dequant.resize(static_cast<size_t>(N * K));
  std::vector<float> x = RandomFloats(static_cast<size_t>(N * K), seed, -0.05f, 0.05f);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t zero = (n * 7) % (K / 32);  // a zero 32-value block in every row
    std::fill(x.begin() + n * K + 32 * zero, x.begin() + n * K + 32 * zero + 32, 0.0f);
    quant::QuantizeRow(f, x.data() + n * K, K, q.bytes.data() + n * row_bytes);
    quant::DequantizeRow(f, q.bytes.data() + n * row_bytes, K, q.dequant.data() + n * K);
  }
  q.m = MatrixFromBlocks(q.bytes.data(), f, N, K);
  return q;
}

// Activations with the spread real ones have: most values small, a few channels large.
inline std::vector<float> MakeActivations(int64_t M, int64_t lda, uint32_t seed) {
  std::vector<float> a = RandomFloats(static_cast<size_t>(M * lda), seed, -1.0f, 1.0f);
  for (size_t i = 0; i < a.size(); i += 97) a[i] *= 30.0f;
  return a;
}

// fn(f, w, isa) for every quantized format's [N, K] test matrix (MakeWeights(f, N, K, seed)) at
// every ISA.
template <class Fn>
void ForEachQuantMatrixAndIsa(int64_t N, int64_t K, uint32_t seed, const Fn& fn) {
  for (WFormat f : kQuantFormats) {
    const QuantWeights w = MakeWeights(f, N, K, seed);
    ForEachIsa([&](const std::string& isa) { fn(f, w, isa); });
  }
}

inline std::string What(WFormat f, int64_t M, int64_t K, int64_t N) {
  return std::string(WFormatName(f)) + " M=" + std::to_string(M) + " K=" + std::to_string(K) +
         " N=" + std::to_string(N);
}

// An odd shape: K, N and the row counts M to run it at.
struct OddShape {
  int64_t K, N;
  std::vector<int64_t> Ms;
};
// For every quantized format, shape its block divides, and M: random weights and activations
// (padded rows, a misaligned start: lda = K + 3), then check(a, M, K, lda, w, what). Stops at
// the first fatal failure.
template <class Check>
void ForEachOddShape(std::initializer_list<OddShape> shapes, const Check& check) {
  for (WFormat f : kQuantFormats) {
    for (const OddShape& c : shapes) {
      if (c.K % WFormatBlockValues(f) != 0) continue;
      const QuantWeights w = MakeWeights(f, c.N, c.K, static_cast<uint32_t>(c.K + c.N));
      for (int64_t M : c.Ms) {
        const int64_t lda = c.K + 3;
        const std::vector<float> a = MakeActivations(M, lda, static_cast<uint32_t>(M * 13 + c.K));
        check(a, M, c.K, lda, w, What(f, M, c.K, c.N));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

}  // namespace ocular::kernel_test

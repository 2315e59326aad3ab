// Agreement of two models' next-token distributions, row by row: top-1 and KL(ref || other)
// (quantization quality: tests/golden/quant_quality_test.cc, bench/quant_quality.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ocular::testing_support {

struct Agreement {
  // Rows where the reference's best logit leads its second by less than this are near-ties
  // (any rounding may flip them); decisive_* count the others.
  double tie_margin = 0;
  int positions = 0, top1 = 0, decisive = 0, decisive_top1 = 0;
  double kl_sum = 0, kl_max = 0;
  double flip_margin_max = 0;  // the reference's largest lead among rows whose top-1 differs

  double top1_rate() const { return positions ? static_cast<double>(top1) / positions : 0; }
  double decisive_top1_rate() const {
    return decisive ? static_cast<double>(decisive_top1) / decisive : 0;
  }
  double mean_kl() const { return positions ? kl_sum / positions : 0; }

  // KL(softmax(a) || softmax(b)) over n logits, in double.
  static double KlDivergence(const float* a, const float* b, int64_t n) {
    const double ma = *std::max_element(a, a + n), mb = *std::max_element(b, b + n);
    double za = 0, zb = 0;
    for (int64_t i = 0; i < n; ++i) {
      za += std::exp(a[i] - ma);
      zb += std::exp(b[i] - mb);
    }
    double kl = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double lp = a[i] - ma - std::log(za), lq = b[i] - mb - std::log(zb);
      kl += std::exp(lp) * (lp - lq);
    }
    return std::max(kl, 0.0);
  }

  // Adds the rows from `first_row` on of two [rows, V] logit matrices.
  void Add(const std::vector<float>& ref, const std::vector<float>& other, int64_t V,
           size_t first_row = 0) {
    for (size_t r = first_row; (r + 1) * V <= ref.size(); ++r) {
      const float* x = ref.data() + r * V;
      const float* y = other.data() + r * V;
      const int64_t best = std::max_element(x, x + V) - x;
      const bool same = best == std::max_element(y, y + V) - y;
      float second = -INFINITY;
      for (int64_t i = 0; i < V; ++i) {
        if (i != best) second = std::max(second, x[i]);
      }
      top1 += same;
      if (!same) flip_margin_max = std::max(flip_margin_max, double{x[best] - second});
      if (x[best] - second >= tie_margin) {
        ++decisive;
        decisive_top1 += same;
      }
      const double kl = KlDivergence(x, y, V);
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
      ++positions;
    }
  }
};

}  // namespace ocular::testing_support

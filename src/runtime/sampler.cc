#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace ocular {

void Sampler::Reserve(int32_t vocab) {
  if (p_.temperature <= 0.0f) return;  // greedy needs no scratch
  ids_.reserve(static_cast<size_t>(vocab));
  prob_.reserve(static_cast<size_t>(vocab));
}

int32_t Sampler::Next(const float* logits, int32_t vocab) {
  const int32_t n = p_.suppress_from >= 0 ? std::min(vocab, std::max(1, p_.suppress_from)) : vocab;
  if (p_.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
  }
  // Candidates sorted by logit (descending, ties by id), cut by top-k.
  std::vector<int32_t>& ids = ids_;
  ids.resize(n);
  std::iota(ids.begin(), ids.end(), 0);
  const int32_t k = (p_.top_k > 0 && p_.top_k < n) ? p_.top_k : n;
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), by_logit);
  ids.resize(k);
  // Softmax with temperature in double.
  std::vector<double>& prob = prob_;
  prob.resize(k);
  const double mx = logits[ids[0]];
  double sum = 0;
  for (int32_t i = 0; i < k; ++i) {
    prob[i] = std::exp((logits[ids[i]] - mx) / p_.temperature);
    sum += prob[i];
  }
  // top-p: smallest prefix whose mass reaches top_p (always at least one token).
  int32_t keep = k;
  if (p_.top_p < 1.0f) {
    double acc = 0;
    for (int32_t i = 0; i < k; ++i) {
      acc += prob[i] / sum;
      if (acc >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = std::accumulate(prob.begin(), prob.begin() + keep, 0.0);
  double r = std::uniform_real_distribution<double>(0.0, kept)(rng_);
  for (int32_t i = 0; i < keep; ++i) {
    r -= prob[i];
    if (r < 0) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace ocular

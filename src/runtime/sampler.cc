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

namespace {
bool Allowed(const uint32_t* allowed, int32_t id) { return (allowed[id >> 5] >> (id & 31)) & 1; }
}  // namespace

int32_t Sampler::Next(const float* logits, int32_t vocab, const uint32_t* allowed) {
  const int32_t n = p_.suppress_from >= 0 ? std::min(vocab, std::max(1, p_.suppress_from)) : vocab;
  if (p_.temperature <= 0.0f && allowed == nullptr) {
    return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
  }
  if (p_.temperature <= 0.0f) {  // argmax over the allowed ids (ties: the lowest id)
    int32_t best = -1;
    for (int32_t id = 0; id < n; ++id) {
      if (Allowed(allowed, id) && (best < 0 || logits[id] > logits[best])) best = id;
    }
    return best;
  }
  // Candidates sorted by logit (descending, ties by id), cut by top-k.
  std::vector<int32_t>& ids = ids_;
  ids.clear();
  for (int32_t id = 0; id < n; ++id) {
    if (allowed == nullptr || Allowed(allowed, id)) ids.push_back(id);
  }
  if (ids.empty()) return -1;
  const int32_t m = static_cast<int32_t>(ids.size());
  const int32_t k = (p_.top_k > 0 && p_.top_k < m) ? p_.top_k : m;
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

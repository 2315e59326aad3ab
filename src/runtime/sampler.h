// Next-token selection: greedy, or seeded sampling with temperature, top-k and top-p.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ocular {

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax; ties -> lowest id, as torch.argmax)
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  uint64_t seed = 0;
  // Logits of ids >= this are never chosen (e.g. 257152 hides PaliGemma's untrained
  // padding rows, docs/models.md §1.1). -1: off (HF parity).
  int32_t suppress_from = -1;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  // Reserves the scratch of sampling over `vocab` logits, so Next never allocates.
  void Reserve(int32_t vocab);
  // REQUIRES: vocab > 0. Deterministic for a given seed and logits sequence.
  int32_t Next(const float* logits, int32_t vocab);
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<int32_t> ids_;  // scratch: candidates
  std::vector<double> prob_;  // scratch: their probabilities
};

}  // namespace ocular

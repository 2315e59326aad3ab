// Next-token selection: greedy, or seeded sampling with temperature, top-k and top-p.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "ocular/status.h"

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

// Restricts the tokens one sequence may sample next (constrained decoding: a grammar, a JSON
// schema). Each sequence owns its own; the runner calls it on the decode thread only.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // The ids allowed next as a bitmask: bit (id % 32) of word (id / 32), (vocab + 31) / 32
  // words. Valid until the next call. All zero: nothing may follow (see complete()).
  // `tokens_left` (>= 1, this one included) lets it steer towards a complete answer within
  // the sequence's max_new_tokens.
  virtual const uint32_t* Mask(int tokens_left) = 0;
  // The sampled id (always one Mask allowed) is now part of the text.
  virtual void Accept(int32_t id) = 0;
  // The text so far is a whole answer (an EOS would be allowed, if the sequence has one).
  virtual bool complete() const = 0;
  // Not OK when the constraint gave up (an all-zero mask that is not the end of the text):
  // why, for the client.
  virtual Status status() const { return Status::Ok(); }
  // Milliseconds spent in Mask and Accept so far (Timings::constraint_ms); read once the
  // sequence is done.
  double busy_ms() const { return busy_ms_; }

 protected:
  double busy_ms_ = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  // Reserves the scratch of sampling over `vocab` logits, so Next never allocates.
  void Reserve(int32_t vocab);
  // REQUIRES: vocab > 0. Deterministic for a given seed and logits sequence. With `allowed`
  // (a TokenConstraint mask), the other ids are removed before greedy / temperature / top-k /
  // top-p selection; returns -1 when no id is allowed.
  int32_t Next(const float* logits, int32_t vocab, const uint32_t* allowed = nullptr);
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<int32_t> ids_;  // scratch: candidates
  std::vector<double> prob_;  // scratch: their probabilities
};

}  // namespace ocular

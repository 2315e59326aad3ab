// A generation in progress: its prompt, its KV cache, its sampler and what it has produced.
// Sequences are stepped by a Runner (runtime/runner.h), alone or in a batch with others;
// a sequence can join or leave a batch at any step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/model.h"
#include "runtime/kv_pool.h"
#include "runtime/sampler.h"

namespace ocular {

// kFailed: the model produced NaN logits (NaN weights, an invalid eps or RoPE base), or the
// constraint allowed no token before the answer was complete (Sequence::failure() says why).
enum class FinishReason : uint8_t { kNone, kEos, kLength, kCancelled, kFailed };
const char* FinishReasonName(FinishReason r);  // "", "eos", "length", "cancelled", "failed"

struct SequenceParams {
  std::shared_ptr<const Prompt> prompt;  // the typed prompt (models/prompt.h); REQUIRES: set
  int max_new_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> eos_ids;  // finishes after emitting any of these; empty: never early
  // Constrained decoding: only the ids it allows are sampled (null: any). When it allows
  // none, the sequence ends: kEos if its text is complete, else kFailed.
  std::shared_ptr<TokenConstraint> constraint;
};

class Sequence {
 public:
  // REQUIRES: kv holds at least prompt.size() + max_new_tokens tokens; vocab > 0. `state`: the
  // family's (VlModel::NewState()), or null.
  Sequence(SequenceParams params, KvHandle kv, int32_t vocab,
           std::unique_ptr<SequenceState> state = nullptr);

  const SequenceParams& params() const { return p_; }
  const Prompt& prompt() const { return *p_.prompt; }
  SequenceState* state() { return state_.get(); }
  // The sequence's rows [start, start + count) for a forward pass (features: a prefill's).
  SeqChunk Chunk(int64_t start, int64_t count, const float* features = nullptr) {
    return SeqChunk{cache(), start, count, p_.prompt.get(), state_.get(), features};
  }
  const std::vector<int32_t>& generated() const { return generated_; }
  int32_t last_token() const { return generated_.back(); }
  bool done() const { return finish_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_; }
  // Why a kFailed sequence failed, when its constraint knows (TokenConstraint::status(), or
  // that it allowed no token); OK for NaN logits (the caller names the step).
  const Status& failure() const { return failure_; }
  // Tokens whose K/V are in the cache.
  int64_t position() const { return position_; }
  KvCache* cache() { return kv_.cache(); }

  // Stops the sequence: it leaves the batch at the next step (its cache can be released).
  void Cancel();
  // Returns the KV cache to its pool early (e.g. when done). REQUIRES: done().
  void ReleaseCache() { kv_ = KvHandle(); }

  // For the runner: samples the next token from its logits row and records it. A row with a
  // NaN finishes the sequence as kFailed instead (no token is appended).
  int32_t SampleAndAppend(const float* logits, int32_t vocab);
  void Advance(int64_t tokens) { position_ += tokens; }

 private:
  SequenceParams p_;
  KvHandle kv_;
  std::unique_ptr<SequenceState> state_;
  Sampler sampler_;
  std::vector<int32_t> generated_;  // reserved to max_new_tokens
  int64_t position_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  Status failure_;
};

}  // namespace ocular

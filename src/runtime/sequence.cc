#include "runtime/sequence.h"

#include <algorithm>

#include "core/check.h"
#include "core/enum_names.h"

namespace ocular {

const char* FinishReasonName(FinishReason r) {
  static constexpr EnumName<FinishReason> kNames[] = {{FinishReason::kNone, ""},
                                                      {FinishReason::kEos, "eos"},
                                                      {FinishReason::kLength, "length"},
                                                      {FinishReason::kCancelled, "cancelled"},
                                                      {FinishReason::kFailed, "failed"}};
  return NameOf(r, kNames, "");
}

Sequence::Sequence(SequenceParams params, KvHandle kv, int32_t vocab,
                   std::unique_ptr<SequenceState> state)
    : p_(std::move(params)), kv_(std::move(kv)), state_(std::move(state)), sampler_(p_.sampling) {
  OCULAR_CHECK(vocab > 0 && p_.max_new_tokens >= 0 && p_.prompt != nullptr);
  OCULAR_CHECK(kv_.cache()->capacity() >= p_.prompt->size() + p_.max_new_tokens);
  sampler_.Reserve(vocab);
  generated_.reserve(static_cast<size_t>(p_.max_new_tokens));
  if (p_.max_new_tokens == 0) finish_ = FinishReason::kLength;
}

void Sequence::Cancel() {
  if (!done()) finish_ = FinishReason::kCancelled;
}

int32_t Sequence::SampleAndAppend(const float* logits, int32_t vocab) {
  OCULAR_CHECK(!done());
  bool nan = false;
  for (int32_t i = 0; i < vocab; ++i) nan |= logits[i] != logits[i];
  if (nan) {
    finish_ = FinishReason::kFailed;
    return -1;
  }
  TokenConstraint* c = p_.constraint.get();
  const int tokens_left = p_.max_new_tokens - static_cast<int>(generated_.size());
  const int32_t id = sampler_.Next(logits, vocab, c ? c->Mask(tokens_left) : nullptr);
  if (id < 0) {  // the constraint allows nothing more
    if (c->complete()) {
      finish_ = FinishReason::kEos;
    } else {
      finish_ = FinishReason::kFailed;
      failure_ = c->status();
      if (failure_.ok()) {
        failure_ = Error(StatusCode::kInvalidArgument, "grammar", "after ", generated_.size(),
                         " tokens no token of the vocabulary continues the constrained answer");
      }
    }
    return -1;
  }
  if (c) c->Accept(id);
  generated_.push_back(id);
  if (std::find(p_.eos_ids.begin(), p_.eos_ids.end(), id) != p_.eos_ids.end()) {
    finish_ = FinishReason::kEos;
  } else if (static_cast<int>(generated_.size()) >= p_.max_new_tokens) {
    finish_ = FinishReason::kLength;
  }
  return id;
}

}  // namespace ocular

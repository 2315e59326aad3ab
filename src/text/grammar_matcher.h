// Runs a grammar (text/grammar.h) over the bytes of generated tokens and computes which
// tokens may come next.
//
// How a step stays cheap (docs/structured-output.md):
//  * The pushdown automaton's configurations (a set of stacks, each a path in a hash-consed
//    stack tree, XGrammar's "persistent stack") are numbered as they are met: a lazily built
//    DFA over bytes whose transitions are memoized, as RE2 builds its DFA. A byte step is then
//    one table lookup.
//  * The vocabulary is a byte trie laid out in preorder with subtree-skip links; a mask walks
//    it once from the current state, skipping every subtree whose prefix the grammar rejects.
//  * Masks are cached per DFA state (XGrammar's adaptive token-mask cache, keyed here on the
//    whole configuration, so no token needs a stack check at run time): inside a string, a
//    number or after a key, steps come back to states seen before and cost a lookup.
// A pattern such as `(.{2,6}|.{3,7}|...)` can make its DFA states sets of thousands of stacks,
// and a mask then costs seconds. So each call (NextMask, Accept, AcceptBytes) has a budget
// of work (stacks visited building states, 64 per new state), and a matcher builds at most
// kMaxStates states (1 KB each): past either the matcher fails for good (failed(), error())
// and allows nothing, instead of stalling the decode step that every other sequence of the
// batch waits for, or growing without bound.
// Thread-safety: a TokenVocabulary is immutable and may be shared. A GrammarMatcher is one
// sequence's state; it is not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/grammar.h"

namespace ocular::grammar {

class TokenVocabulary {
 public:
  // bytes[id]: what token id adds to the text (Tokenizer::TokenBytes); nullopt or empty: the
  // token is never allowed (special, control), except as one of a matcher's eos ids.
  explicit TokenVocabulary(const std::vector<std::optional<std::string>>& bytes);

  int32_t size() const { return size_; }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }

 private:
  friend class GrammarMatcher;
  int32_t size_ = 0;
  std::vector<std::string> bytes_;
  // The trie in preorder (the root excluded): node i reads byte_[i] at depth_[i] (1 = the
  // first byte), its subtree ends before end_[i], and tokens_[tok_begin_[i], tok_begin_[i+1])
  // are the ids spelled by the path to it.
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<int32_t> end_;
  std::vector<int32_t> tok_begin_;
  std::vector<int32_t> tokens_;
  int max_depth_ = 0;
};

class GrammarMatcher {
 public:
  // REQUIRES: eos ids < vocab->size(). The eos ids are allowed exactly when the text so far
  // is complete (the root rule has ended).
  // `work_per_call`: the budget above (the default takes 0.05–0.4 s; the JSON Schemas of the
  // test corpus need at most 5 % of it on a 262k vocabulary, docs/structured-output.md).
  GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                 std::shared_ptr<const TokenVocabulary> vocab, std::vector<int32_t> eos_ids,
                 int64_t work_per_call = kDefaultWorkPerCall);
  static constexpr int64_t kDefaultWorkPerCall = int64_t{1} << 22;
  static constexpr size_t kMaxStates = size_t{1} << 16;

  // The tokens allowed next: bit (id % 32) of word (id / 32), (vocab size + 31) / 32 words.
  // Valid until the next call of any method. With `tokens_left` (this one included), a token
  // after which the text cannot be completed within the tokens that remain (counting one
  // byte per token) is left out too, so that an answer cut by max_tokens is still whole;
  // when that leaves nothing, the plain mask is returned.
  const std::vector<uint32_t>& NextMask(int tokens_left = kNoLimit);
  static constexpr int kNoLimit = 1 << 30;
  // Advances over token `id`. False (and no change) when the grammar does not allow it.
  bool Accept(int32_t id);
  // Advances over raw bytes (tests, the fuzz target). False (no change) if rejected.
  bool AcceptBytes(std::string_view bytes);
  // The text so far is a complete output; an eos token was accepted.
  bool complete() const;
  bool finished() const { return finished_; }
  // A call ran past its work budget: the matcher allows nothing from then on, and error()
  // says why ("[grammar] ... too complex ..."; OK while not failed).
  bool failed() const { return !error_.ok(); }
  const Status& error() const { return error_; }

  // Counters for docs and benchmarks: DFA states built, masks computed (cache misses),
  // masks served from the cache.
  // work: the budget's units spent by all calls; max_call_work: the most one call took.
  struct Stats {
    int64_t states = 0, masks_computed = 0, mask_hits = 0, work = 0, max_call_work = 0;
  };
  Stats stats() const { return stats_; }

 private:
  static constexpr int32_t kDead = -1, kUnknown = -2;
  struct StackNode {
    int32_t node, parent, depth;
  };
  struct State {
    std::vector<int32_t> stacks;  // stacks whose top node reads a byte
    bool complete = false;
    int32_t dist = 0;  // the fewest bytes that complete the text from here
  };
  struct Mask {
    std::vector<uint32_t> bits;
    int32_t max_dist = 0;  // the largest State::dist after an allowed token
  };

  int32_t Push(int32_t node, int32_t parent);
  // Starts a call's budget; Spend takes from it and fails the matcher when it runs out.
  void StartCall() { work_left_ = work_per_call_; }
  bool Spend(int64_t work);
  bool Fail(const std::string& what);  // returns false
  void EndCall();
  int32_t MakeState(std::vector<int32_t> seeds);
  int32_t Step(int32_t state, uint8_t byte);
  int32_t StepSlow(int32_t state, uint8_t byte);
  void ComputeMask(int32_t state, int32_t max_dist, Mask* mask);
  void ComputeNodeDistances();

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int32_t> eos_;
  std::vector<int32_t> node_dist_;  // fewest bytes from a node to its rule's end
  std::vector<int32_t> rule_dist_;
  std::vector<StackNode> stacks_;
  std::vector<int32_t> stack_dist_;  // fewest bytes that empty a stack
  std::unordered_map<uint64_t, int32_t> stack_ids_;
  std::vector<uint32_t> seen_;  // MakeState's visited stacks: == mark_
  uint32_t mark_ = 0;
  std::vector<State> states_;
  std::unordered_map<std::string, int32_t> state_ids_;
  std::vector<int32_t> next_;  // [state * 256 + byte]: kUnknown, kDead or a state
  std::unordered_map<int32_t, Mask> masks_;
  Mask limited_;               // the last mask cut by tokens_left
  std::vector<int32_t> walk_;  // scratch: the state at each trie depth
  int32_t state_ = kDead;
  bool finished_ = false;
  int64_t work_per_call_ = 0, work_left_ = 0;
  Status error_;
  Stats stats_;
};

}  // namespace ocular::grammar

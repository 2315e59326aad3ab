#include "text/grammar_matcher.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <span>
#include <string>

#include "core/check.h"

namespace ocular::grammar {
namespace {
// Deeper stacks are dropped: only a left-recursive grammar (which the compilers refuse)
// would nest this far without reading a byte.
constexpr int32_t kMaxStackDepth = 4096;
constexpr int32_t kFar = 1 << 29;  // "no way to the end" (sums of two stay in range)

struct Edge {
  int32_t from, arg;
};
// Edge lists per key in one array (a counting sort of (key, edge) pairs).
class Adjacency {
 public:
  Adjacency(size_t keys, const std::vector<std::pair<int32_t, Edge>>& list)
      : begin_(keys + 1, 0), edges_(list.size()) {
    for (const auto& [key, e] : list) ++begin_[key + 1];
    std::partial_sum(begin_.begin(), begin_.end(), begin_.begin());
    std::vector<int32_t> fill(begin_.begin(), begin_.end() - 1);
    for (const auto& [key, e] : list) edges_[fill[key]++] = e;
  }
  std::span<const Edge> of(int32_t key) const {
    return {edges_.data() + begin_[key], edges_.data() + begin_[key + 1]};
  }

 private:
  std::vector<int32_t> begin_;
  std::vector<Edge> edges_;
};
}  // namespace

TokenVocabulary::TokenVocabulary(const std::vector<std::optional<std::string>>& bytes)
    : size_(static_cast<int32_t>(bytes.size())), bytes_(bytes.size()) {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < size_; ++id) {
    if (bytes[id] && !bytes[id]->empty() && bytes[id]->size() < 65535) {
      bytes_[id] = *bytes[id];
      order.push_back(id);
    }
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b;
  });
  // Sorted strings build the preorder trie directly: each string shares its longest common
  // prefix with the path of the previous one.
  std::vector<int32_t> path;  // node index at each depth - 1
  std::string prev;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      end_[path.back()] = static_cast<int32_t>(byte_.size());
      path.pop_back();
    }
  };
  for (int32_t id : order) {
    const std::string& s = bytes_[id];
    size_t lcp = 0;
    while (lcp < std::min(s.size(), path.size()) && s[lcp] == prev[lcp]) ++lcp;
    close_to(lcp);
    for (size_t d = lcp; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(s[d]));
      depth_.push_back(static_cast<uint16_t>(d + 1));
      end_.push_back(0);
      tok_begin_.push_back(static_cast<int32_t>(tokens_.size()));
      max_depth_ = std::max(max_depth_, static_cast<int>(d + 1));
    }
    tokens_.push_back(id);  // belongs to path.back(): ranges stay contiguous (sorted input)
    prev = s;
  }
  close_to(0);
  tok_begin_.push_back(static_cast<int32_t>(tokens_.size()));
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenVocabulary> vocab,
                               std::vector<int32_t> eos_ids, int64_t work_per_call)
    : g_(std::move(grammar)),
      vocab_(std::move(vocab)),
      eos_(std::move(eos_ids)),
      work_per_call_(work_per_call) {
  walk_.resize(static_cast<size_t>(vocab_->max_depth_) + 1);
  ComputeNodeDistances();
  StartCall();
  state_ = MakeState({Push(g_->rule_start[g_->root], -1)});
  EndCall();
}

bool GrammarMatcher::Spend(int64_t work) {
  work_left_ -= work;
  if (work_left_ >= 0 || failed()) return !failed();
  return Fail("one token needed more than " + std::to_string(work_per_call_) +
              " steps of its automaton");
}

bool GrammarMatcher::Fail(const std::string& what) {
  error_ = Error(StatusCode::kInvalidArgument, "grammar",
                 "the schema or pattern is too complex to follow: ", what,
                 " (overlapping repetitions or alternatives, such as (.{2,6}|.{3,7})+, make "
                 "its states sets of thousands of positions)");
  state_ = kDead;
  return false;
}

void GrammarMatcher::EndCall() {
  stats_.work += work_per_call_ - work_left_;
  stats_.max_call_work = std::max(stats_.max_call_work, work_per_call_ - work_left_);
}

int32_t GrammarMatcher::Push(int32_t node, int32_t parent) {
  const uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) | static_cast<uint32_t>(parent);
  auto [it, fresh] = stack_ids_.try_emplace(key, static_cast<int32_t>(stacks_.size()));
  if (fresh) {
    stacks_.push_back({node, parent, parent < 0 ? 1 : stacks_[parent].depth + 1});
    stack_dist_.push_back(
        std::min(kFar, node_dist_[node] + (parent < 0 ? 0 : stack_dist_[parent])));
  }
  return it->second;
}

// Shortest completions (bytes): Knuth's generalization of Dijkstra's algorithm (a node's
// distance is the least over its edges: a byte, 1 + the target's; eps, the target's; a call,
// the callee's shortest body + the return node's; 0 at a rule's end). Every edge's value is
// at least each distance it is made of, so nodes can be settled in increasing order:
// O(E log V). (Relaxation to a fixed point, sweeping every node until nothing changed, made
// building a matcher 3x slower over json_schema_fuzz's 1,152 grammars, up to 200k nodes.)
void GrammarMatcher::ComputeNodeDistances() {
  const auto& nodes = g_->nodes;
  const size_t n_nodes = nodes.size(), n_rules = g_->rule_start.size();
  node_dist_.assign(n_nodes, kFar);
  rule_dist_.assign(n_rules, kFar);
  // Reverse edges: into a node by eps or a byte (predecessor, weight), into a node as a call's
  // return (caller, rule), into a rule by a call (caller, return), a rule's start (rule).
  std::vector<std::pair<int32_t, Edge>> in, returns, calls, starts;
  for (size_t i = 0; i < n_nodes; ++i) {
    const auto from = static_cast<int32_t>(i);
    for (int32_t e : nodes[i].eps) in.push_back({e, {from, 0}});
    for (const auto& e : nodes[i].bytes) in.push_back({e.to, {from, 1}});
    for (const auto& c : nodes[i].calls) {
      returns.push_back({c.ret, {from, c.rule}});
      calls.push_back({c.rule, {from, c.ret}});
    }
  }
  for (size_t r = 0; r < n_rules; ++r) starts.push_back({g_->rule_start[r], {int32_t(r), 0}});
  const Adjacency preds(n_nodes, in), rets(n_nodes, returns), callers(n_rules, calls),
      rule_starts(n_nodes, starts);

  std::vector<char> settled(n_nodes, 0);
  using Entry = std::pair<int32_t, int32_t>;  // (distance, node)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  auto relax = [&](int32_t node, int32_t d) {
    d = std::min(d, kFar);
    if (d < node_dist_[node]) {
      node_dist_[node] = d;
      queue.push({d, node});
    }
  };
  for (size_t i = 0; i < n_nodes; ++i) {
    if (nodes[i].accept) relax(static_cast<int32_t>(i), 0);
  }
  while (!queue.empty()) {
    const auto [d, x] = queue.top();
    queue.pop();
    if (settled[x] || d > node_dist_[x]) continue;
    settled[x] = 1;
    for (const Edge& e : preds.of(x)) relax(e.from, d + e.arg);
    for (const Edge& e : rets.of(x)) {
      if (settled[g_->rule_start[e.arg]]) relax(e.from, rule_dist_[e.arg] + d);
    }
    for (const Edge& start : rule_starts.of(x)) {
      rule_dist_[start.from] = d;
      for (const Edge& e : callers.of(start.from)) {
        if (settled[e.arg]) relax(e.from, d + node_dist_[e.arg]);
      }
    }
  }
}

// The eps / call / return closure of `seeds` as a DFA state (kDead when nothing is left).
int32_t GrammarMatcher::MakeState(std::vector<int32_t> work) {
  // seen_[stack] == mark: visited in this closure (a stamp per call instead of a hash set).
  if (++mark_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    mark_ = 1;
  }
  State st;
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    if (static_cast<size_t>(s) >= seen_.size()) seen_.resize(stacks_.size() + stacks_.size() / 2);
    if (seen_[s] == mark_) continue;
    seen_[s] = mark_;
    if (!Spend(1)) return kDead;
    const StackNode top = stacks_[s];
    const Grammar::Node& n = g_->nodes[top.node];
    if (!n.bytes.empty()) st.stacks.push_back(s);
    for (int32_t e : n.eps) work.push_back(Push(e, top.parent));
    if (top.depth < kMaxStackDepth) {
      for (const auto& c : n.calls)
        work.push_back(Push(g_->rule_start[c.rule], Push(c.ret, top.parent)));
    }
    if (n.accept) {
      if (top.parent < 0) {
        st.complete = true;
      } else {
        work.push_back(top.parent);
      }
    }
  }
  if (st.stacks.empty() && !st.complete) return kDead;
  if (st.stacks.size() * 16 > stacks_.size()) {
    // Large sets (thousands of stacks, on overlapping patterns): in order by one scan of the
    // visited marks, instead of a sort (16 % of json_schema_fuzz's time went to std::sort).
    st.stacks.clear();
    for (size_t i = 0; i < std::min(seen_.size(), stacks_.size()); ++i) {
      if (seen_[i] == mark_ && !g_->nodes[stacks_[i].node].bytes.empty())
        st.stacks.push_back(static_cast<int32_t>(i));
    }
  } else {
    std::sort(st.stacks.begin(), st.stacks.end());
  }
  st.dist = kFar;
  for (int32_t s : st.stacks) st.dist = std::min(st.dist, stack_dist_[s]);
  if (st.complete) st.dist = 0;
  std::string key(1, st.complete ? '\1' : '\0');
  key.append(reinterpret_cast<const char*>(st.stacks.data()), st.stacks.size() * sizeof(int32_t));
  auto [it, fresh] = state_ids_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (fresh) {
    // Its row of transitions costs about as much as 64 stacks visited, and takes 1 KB.
    if (states_.size() >= kMaxStates) {
      Fail("it needed more than " + std::to_string(kMaxStates) + " states");
    }
    if (failed() || !Spend(64)) {
      state_ids_.erase(it);
      return kDead;
    }
    states_.push_back(std::move(st));
    next_.resize(next_.size() + 256, kUnknown);
    ++stats_.states;
  }
  return it->second;
}

int32_t GrammarMatcher::StepSlow(int32_t state, uint8_t byte) {
  std::vector<int32_t> seeds;
  for (int32_t s : states_[state].stacks) {
    const StackNode top = stacks_[s];
    if (!Spend(static_cast<int64_t>(g_->nodes[top.node].bytes.size()))) return kDead;
    for (const auto& e : g_->nodes[top.node].bytes) {
      if (byte >= e.lo && byte <= e.hi) seeds.push_back(Push(e.to, top.parent));
    }
  }
  const int32_t to = seeds.empty() ? kDead : MakeState(std::move(seeds));
  if (failed()) return kDead;  // not memoized: the budget ran out on the way
  next_[static_cast<size_t>(state) * 256 + byte] = to;
  return to;
}

inline int32_t GrammarMatcher::Step(int32_t state, uint8_t byte) {
  const int32_t to = next_[static_cast<size_t>(state) * 256 + byte];
  return to != kUnknown ? to : StepSlow(state, byte);
}

// Walks the vocabulary trie from `state`: a token is allowed when every byte of it steps to
// a live state whose distance to the end is at most `max_dist`.
void GrammarMatcher::ComputeMask(int32_t state, int32_t max_dist, Mask* mask) {
  const TokenVocabulary& v = *vocab_;
  mask->bits.assign((static_cast<size_t>(v.size_) + 31) / 32, 0);
  mask->max_dist = 0;
  walk_[0] = state;
  const int32_t n = static_cast<int32_t>(v.byte_.size());
  for (int32_t i = 0; i < n;) {
    const int32_t to = Step(walk_[v.depth_[i] - 1], v.byte_[i]);
    if (to == kDead) {
      if (failed()) return;
      i = v.end_[i];  // no token with this prefix can continue the text
      continue;
    }
    walk_[v.depth_[i]] = to;
    const int32_t d = states_[to].dist;
    if (v.tok_begin_[i] < v.tok_begin_[i + 1] && d <= max_dist) {
      mask->max_dist = std::max(mask->max_dist, d);
      for (int32_t t = v.tok_begin_[i]; t < v.tok_begin_[i + 1]; ++t) {
        const int32_t id = v.tokens_[t];
        mask->bits[id >> 5] |= 1u << (id & 31);
      }
    }
    ++i;
  }
  if (states_[state].complete) {
    for (int32_t id : eos_) mask->bits[id >> 5] |= 1u << (id & 31);
  }
}

const std::vector<uint32_t>& GrammarMatcher::NextMask(int tokens_left) {
  auto nothing = [&]() -> const std::vector<uint32_t>& {
    limited_.bits.assign((static_cast<size_t>(vocab_->size()) + 31) / 32, 0);
    return limited_.bits;
  };
  if (finished_ || state_ < 0) return nothing();
  StartCall();
  const int32_t state = state_;
  auto [it, fresh] = masks_.try_emplace(state);
  if (fresh) {
    ComputeMask(state, kFar, &it->second);
    ++stats_.masks_computed;
  } else {
    ++stats_.mask_hits;
  }
  // Each later token reads at least one byte: after this one, tokens_left - 1 remain.
  const int32_t budget = tokens_left - 1;
  const std::vector<uint32_t>* mask = &it->second.bits;
  if (!failed() && tokens_left < kNoLimit && it->second.max_dist > budget) {
    ComputeMask(state, std::max(budget, 0), &limited_);
    if (std::any_of(limited_.bits.begin(), limited_.bits.end(), [](uint32_t w) { return w; })) {
      mask = &limited_.bits;
    }
  }
  EndCall();
  if (!failed()) return *mask;
  masks_.erase(state);  // computed in part
  return nothing();
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (finished_ || state_ < 0) return false;
  StartCall();
  int32_t s = state_;
  for (char c : bytes) {
    s = Step(s, static_cast<uint8_t>(c));
    if (s == kDead) break;
  }
  EndCall();
  if (s == kDead) return false;
  state_ = s;
  return true;
}

bool GrammarMatcher::Accept(int32_t id) {
  if (finished_ || id < 0 || id >= vocab_->size()) return false;
  if (std::find(eos_.begin(), eos_.end(), id) != eos_.end()) {
    if (!complete()) return false;
    finished_ = true;
    return true;
  }
  const std::string& b = vocab_->bytes(id);
  return !b.empty() && AcceptBytes(b);
}

bool GrammarMatcher::complete() const { return state_ >= 0 && states_[state_].complete; }

}  // namespace ocular::grammar

// Grammars for constrained decoding: a byte-level recursive transition network (one small
// NFA per rule, whose edges read a byte range, call another rule, or read nothing), which is a
// pushdown automaton: the stack holds the return points of the calls in progress. JSON
// Schemas (text/json_schema.h), "any JSON" and regular expressions all compile to it; the
// matcher (text/grammar_matcher.h) runs it and turns it into token masks.
//
// The design follows XGrammar (Dong et al., "XGrammar: Flexible and Efficient Structured
// Generation Engine for Large Language Models", arXiv:2411.15100; mlc-ai/xgrammar), whose
// grammar is also a set of byte-level FSMs, one per rule, run as a pushdown automaton, rather
// than llama.cpp's (src/llama-grammar.cpp), which interprets GBNF rule elements per code point.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ocular/status.h"

namespace ocular::grammar {

struct Grammar {
  struct ByteEdge {
    uint8_t lo, hi;  // reads one byte in [lo, hi]
    int32_t to;
  };
  struct CallEdge {
    int32_t rule;  // runs this rule to its end, then continues at `ret`
    int32_t ret;
  };
  struct Node {
    std::vector<ByteEdge> bytes;
    std::vector<int32_t> eps;  // reads nothing
    std::vector<CallEdge> calls;
    bool accept = false;  // the end of its rule: returns to the caller
  };
  std::vector<Node> nodes;
  std::vector<int32_t> rule_start;  // rule id -> its first node
  std::vector<std::string> rule_name;
  int32_t root = 0;  // the rule the whole output must match
};

// A piece of a rule under construction: enter at `in`, leave from `out` (which has no edges
// yet; the next piece is joined to it by an eps edge). Thompson's construction.
struct Frag {
  int32_t in = -1, out = -1;
};

// Code point ranges [lo, hi] (inclusive).
using CodepointRanges = std::vector<std::pair<char32_t, char32_t>>;

class GrammarBuilder {
 public:
  // Errors: more than kMaxNodes nodes (the schema or regex is too large).
  static constexpr int32_t kMaxNodes = 2'000'000;

  int32_t NewRule(std::string name);
  // Sets the body of `rule` (its start node; its end accepts).
  void SetRule(int32_t rule, Frag body);

  // A fresh node, and an eps edge between two nodes (for automata built node by node).
  int32_t NewNode();
  void Link(int32_t from, int32_t to) { g_.nodes[from].eps.push_back(to); }

  Frag Empty();
  Frag Bytes(uint8_t lo, uint8_t hi);
  Frag Literal(std::string_view bytes);
  // One code point of `ranges` as UTF-8 (surrogates excluded), any of its encodings' bytes.
  Frag Codepoints(const CodepointRanges& ranges);
  Frag Call(int32_t rule);
  Frag Seq(Frag a, Frag b);
  Frag Alt(const std::vector<Frag>& alternatives);  // REQUIRES: non-empty
  Frag Optional(Frag a);
  Frag Star(Frag a);
  // make() repeated min..max times (max < 0: unbounded); make() must return a fresh fragment
  // each call. REQUIRES: 0 <= min, max < 0 or min <= max.
  template <typename Make>
  Frag Repeat(Make&& make, int min, int max) {
    Frag f = Empty();
    // Past the node cap nothing more is built (nested counts would multiply the work).
    for (int i = 0; i < min && !too_large_; ++i) f = Seq(f, make());
    if (max < 0) return Seq(f, Star(make()));
    // Optional tail a(b(c)?)?)? built from the back, so each skip ends the repetition.
    Frag tail = Empty();
    for (int i = min; i < max && !too_large_; ++i) tail = Optional(Seq(make(), tail));
    return Seq(f, tail);
  }

  // Error when the grammar grew past kMaxNodes; else the grammar with `root` as its root.
  StatusOr<Grammar> Finish(int32_t root);
  // Finish's error for a grammar past kMaxNodes (also for one refused before it is built).
  static Status TooLarge();
  int32_t node_count() const { return static_cast<int32_t>(g_.nodes.size()); }

 private:
  // `a` or nothing: in → a.in | out; a.out → out (once), or → in when `repeat` (any times).
  Frag Skippable(Frag a, bool repeat);
  Grammar g_;
  bool too_large_ = false;
};

// A code point range split into UTF-8 byte-range sequences, each a list of [lo, hi] per byte
// (e.g. U+0080..U+07FF -> {[C2,DF],[80,BF]}). Exposed for tests.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(char32_t lo, char32_t hi);

// Regular expressions (a subset of Python's `re` / ECMA-262): literals and escapes
// (\t \n \r \f \v \xHH \uHHHH, escaped punctuation), `.`, classes [...] with ranges and
// negation, \d \w \s (ASCII, as a subset of Python's Unicode classes: every match is one for
// Python too) and \D \W \S (the ASCII complements), groups (...) and (?:...), alternation,
// quantifiers * + ? {n} {n,} {n,m} (lazy forms accepted), ^ at the start and $ at the end.
// Backreferences, lookaround, \b, flags and named groups are refused.
struct RegexOptions {
  // Inside a JSON string: each matched code point is written as JSON spells it (", \ and
  // control characters escaped), so the decoded string is what the regex matched.
  bool json_string = false;
  // JSON Schema "pattern" semantics (Python re.search): a side not anchored by ^ / $ may have
  // any text around the match. Off: the whole text matches (anchors optional).
  bool search = false;
};

// Compiles `pattern` into a fragment of `b`. Errors name the position and the construct
// ("[regex] position 3: lookahead (?=...) is not supported").
StatusOr<Frag> CompileRegex(std::string_view pattern, const RegexOptions& options,
                            GrammarBuilder* b);

// A grammar whose output must match `pattern` entirely (`ocular run --regex`).
StatusOr<Grammar> RegexGrammar(std::string_view pattern);

}  // namespace ocular::grammar

#include "text/grammar.h"

#include <algorithm>

namespace ocular::grammar {

int32_t GrammarBuilder::NewNode() {
  if (static_cast<int32_t>(g_.nodes.size()) >= kMaxNodes) {
    too_large_ = true;
    return 0;  // keeps building harmlessly; Finish reports the error
  }
  g_.nodes.emplace_back();
  return static_cast<int32_t>(g_.nodes.size()) - 1;
}

int32_t GrammarBuilder::NewRule(std::string name) {
  g_.rule_start.push_back(-1);
  g_.rule_name.push_back(std::move(name));
  return static_cast<int32_t>(g_.rule_start.size()) - 1;
}

void GrammarBuilder::SetRule(int32_t rule, Frag body) {
  g_.rule_start[rule] = body.in;
  g_.nodes[body.out].accept = true;
}

Frag GrammarBuilder::Empty() {
  const int32_t n = NewNode();
  return {n, n};
}

Frag GrammarBuilder::Bytes(uint8_t lo, uint8_t hi) {
  Frag f{NewNode(), NewNode()};
  g_.nodes[f.in].bytes.push_back({lo, hi, f.out});
  return f;
}

Frag GrammarBuilder::Literal(std::string_view bytes) {
  Frag f = Empty();
  for (char c : bytes) {
    const int32_t next = NewNode();
    g_.nodes[f.out].bytes.push_back({static_cast<uint8_t>(c), static_cast<uint8_t>(c), next});
    f.out = next;
  }
  return f;
}

Frag GrammarBuilder::Codepoints(const CodepointRanges& ranges) {
  Frag f{NewNode(), NewNode()};
  for (auto [lo, hi] : ranges) {
    for (const auto& seq : Utf8Sequences(lo, hi)) {
      int32_t at = f.in;
      for (size_t i = 0; i < seq.size(); ++i) {
        const int32_t to = i + 1 == seq.size() ? f.out : NewNode();
        g_.nodes[at].bytes.push_back({seq[i].first, seq[i].second, to});
        at = to;
      }
    }
  }
  return f;
}

Frag GrammarBuilder::Call(int32_t rule) {
  Frag f{NewNode(), NewNode()};
  g_.nodes[f.in].calls.push_back({rule, f.out});
  return f;
}

Frag GrammarBuilder::Seq(Frag a, Frag b) {
  if (a.in == a.out && g_.nodes[a.in].bytes.empty() && g_.nodes[a.in].calls.empty() &&
      g_.nodes[a.in].eps.empty()) {
    return b;  // an Empty() fragment adds nothing
  }
  g_.nodes[a.out].eps.push_back(b.in);
  return {a.in, b.out};
}

Frag GrammarBuilder::Alt(const std::vector<Frag>& alternatives) {
  if (alternatives.size() == 1) return alternatives[0];
  Frag f{NewNode(), NewNode()};
  for (const Frag& a : alternatives) {
    g_.nodes[f.in].eps.push_back(a.in);
    g_.nodes[a.out].eps.push_back(f.out);
  }
  return f;
}

Frag GrammarBuilder::Skippable(Frag a, bool repeat) {
  Frag f{NewNode(), NewNode()};
  g_.nodes[f.in].eps.push_back(a.in);
  g_.nodes[f.in].eps.push_back(f.out);
  g_.nodes[a.out].eps.push_back(repeat ? f.in : f.out);
  return f;
}

Frag GrammarBuilder::Optional(Frag a) { return Skippable(a, /*repeat=*/false); }

Frag GrammarBuilder::Star(Frag a) { return Skippable(a, /*repeat=*/true); }

Status GrammarBuilder::TooLarge() {
  return Error(StatusCode::kInvalidArgument, "grammar", "the grammar needs more than ", kMaxNodes,
               " automaton nodes (lower maxLength / maxItems / repetition counts)");
}

StatusOr<Grammar> GrammarBuilder::Finish(int32_t root) {
  if (too_large_) return TooLarge();
  for (size_t r = 0; r < g_.rule_start.size(); ++r) {
    if (g_.rule_start[r] < 0) {
      return Error(StatusCode::kInternal, "grammar", "rule '", g_.rule_name[r], "' has no body");
    }
  }
  g_.root = root;
  return std::move(g_);
}

namespace {

constexpr char32_t kMaxCodepoint = 0x10FFFF;

int Utf8Length(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void Encode(char32_t cp, int n, uint8_t* out) {
  static constexpr uint8_t kLead[] = {0, 0x00, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// [lo, hi] of one encoded length, split until each piece is a product of byte ranges: the
// code points sharing all but their last k continuation bytes must cover those bytes fully.
void SplitSameLength(char32_t lo, char32_t hi, int n,
                     std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
  for (int k = 1; k < n; ++k) {
    const char32_t m = (char32_t{1} << (6 * k)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitSameLength(lo, lo | m, n, out);
        SplitSameLength((lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        SplitSameLength(lo, (hi & ~m) - 1, n, out);
        SplitSameLength(hi & ~m, hi, n, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, n, a);
  Encode(hi, n, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out->push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(char32_t lo, char32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  hi = std::min(hi, kMaxCodepoint);
  // Surrogates have no UTF-8 encoding.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) out = Utf8Sequences(lo, 0xD7FF);
    if (hi > 0xDFFF) {
      auto rest = Utf8Sequences(0xE000, hi);
      out.insert(out.end(), rest.begin(), rest.end());
    }
    return out;
  }
  static constexpr char32_t kLengthEnd[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodepoint};
  for (char32_t begin = lo; begin <= hi;) {
    const int n = Utf8Length(begin);
    const char32_t end = std::min(hi, kLengthEnd[n - 1]);
    SplitSameLength(begin, end, n, &out);
    begin = end + 1;
  }
  return out;
}

}  // namespace ocular::grammar

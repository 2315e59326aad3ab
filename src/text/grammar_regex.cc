// Regular expressions -> grammar fragments (text/grammar.h): a recursive-descent parser to a
// small syntax tree, then Thompson's construction over code points encoded as UTF-8 (the
// byte-range splitting of text/grammar.cc), as XGrammar's regex converter and llama.cpp's
// json-schema-to-grammar `_visit_pattern` also lower `pattern` to their grammars.
#include <algorithm>
#include <cstdint>

#include "text/grammar.h"
#include "text/utf8.h"

namespace ocular::grammar {
namespace {

constexpr int kMaxRepeat = 10000;

struct Re {
  enum Kind { kClass, kSeq, kAlt, kRepeat } kind = kSeq;
  CodepointRanges ranges;  // kClass
  std::vector<Re> kids;    // kSeq, kAlt: the parts; kRepeat: one
  int min = 0, max = -1;   // kRepeat
};

// A lower bound of the automaton nodes Build(re) makes (each class at least one, each copy of
// a repetition its own), saturating at kMaxNodes + 1: nested counts ({52}{852}) are refused
// from the counts alone instead of being expanded up to the cap.
int64_t MinNodes(const Re& re) {
  constexpr int64_t kOver = GrammarBuilder::kMaxNodes + 1;
  switch (re.kind) {
    case Re::kClass:
      return 1;
    case Re::kRepeat: {
      const int64_t copies = re.max < 0 ? re.min + 1 : re.max;
      return std::min(kOver, copies * MinNodes(re.kids[0]));
    }
    default: {
      int64_t n = 0;
      for (const Re& k : re.kids) n = std::min(kOver, n + MinNodes(k));
      return n;
    }
  }
}

CodepointRanges Normalize(CodepointRanges r) {
  std::sort(r.begin(), r.end());
  CodepointRanges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

// The complement of `r` within [0, limit].
CodepointRanges Complement(const CodepointRanges& r, char32_t limit) {
  CodepointRanges out;
  char32_t next = 0;
  for (auto [lo, hi] : Normalize(r)) {
    if (lo > limit) break;
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= limit) out.emplace_back(next, limit);
  return out;
}

const CodepointRanges kDigit = {{'0', '9'}};
const CodepointRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodepointRanges kSpace = {{'\t', '\r'}, {' ', ' '}};

class Parser {
 public:
  explicit Parser(std::u32string p) : p_(std::move(p)) {}

  // The top level: alternatives, each with its own ^ / $ anchors.
  Status ParseTop(std::vector<Re>* alts, std::vector<std::pair<bool, bool>>* anchors) {
    while (true) {
      bool start = Eat('^'), end = false;
      Re seq;
      OCULAR_RETURN_IF_ERROR(ParseSeq(&seq, /*top=*/true, &end));
      alts->push_back(std::move(seq));
      anchors->emplace_back(start, end);
      if (AtEnd()) return Status::Ok();
      if (!Eat('|')) return Fail("unbalanced ')'");
    }
  }

 private:
  bool AtEnd() const { return i_ >= p_.size(); }
  char32_t Peek(size_t ahead = 0) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : 0; }
  bool Eat(char32_t c) {
    if (AtEnd() || p_[i_] != c) return false;
    ++i_;
    return true;
  }
  Status Fail(std::string_view what) const {
    return Error(StatusCode::kInvalidArgument, "regex", "position ", i_, ": ", what);
  }

  Status ParseAlt(Re* out) {
    out->kind = Re::kAlt;
    while (true) {
      Re seq;
      bool unused = false;
      OCULAR_RETURN_IF_ERROR(ParseSeq(&seq, /*top=*/false, &unused));
      out->kids.push_back(std::move(seq));
      if (!Eat('|')) return Status::Ok();
    }
  }

  // Atoms with their quantifiers up to '|', ')' or the end. At the top level a '$' right
  // before '|' or the end anchors the alternative.
  Status ParseSeq(Re* out, bool top, bool* anchored_end) {
    out->kind = Re::kSeq;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$' && top && (i_ + 1 == p_.size() || Peek(1) == '|')) {
        ++i_;
        *anchored_end = true;
        return Status::Ok();
      }
      Re atom;
      OCULAR_RETURN_IF_ERROR(ParseAtom(&atom));
      OCULAR_RETURN_IF_ERROR(ParseQuantifiers(&atom));
      out->kids.push_back(std::move(atom));
    }
    if (!top && AtEnd()) return Status::Ok();
    return Status::Ok();
  }

  Status ParseQuantifiers(Re* atom) {
    while (!AtEnd()) {
      int min = 0, max = -1;
      const size_t at = i_;
      if (Eat('*')) {
      } else if (Eat('+')) {
        min = 1;
      } else if (Eat('?')) {
        max = 1;
      } else if (Peek() == '{') {
        if (!ParseBraces(&min, &max)) {
          i_ = at;  // not a quantifier: '{' is a literal, as in Python
          return Status::Ok();
        }
        if (max >= 0 && max < min) return Fail("repetition {n,m} with m < n");
        if (min > kMaxRepeat || max > kMaxRepeat) return Fail("repetition count over 10000");
      } else {
        return Status::Ok();
      }
      if (Eat('+')) return Fail("possessive quantifiers are not supported");
      Eat('?');  // lazy: the same set of strings
      if (Peek() == '*' || Peek() == '+' || Peek() == '?') return Fail("multiple repeat");
      Re rep;
      rep.kind = Re::kRepeat;
      rep.min = min;
      rep.max = max;
      rep.kids.push_back(std::move(*atom));
      *atom = std::move(rep);
    }
    return Status::Ok();
  }

  bool ParseBraces(int* min, int* max) {
    ++i_;  // '{'
    auto number = [&](int* v) {
      const size_t begin = i_;
      long long n = 0;
      while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
        n = std::min<long long>(n * 10 + (p_[i_++] - '0'), kMaxRepeat + 1);
      }
      *v = static_cast<int>(n);
      return i_ > begin;
    };
    if (!number(min)) return false;
    if (Eat('}')) {
      *max = *min;
      return true;
    }
    if (!Eat(',')) return false;
    if (Eat('}')) {
      *max = -1;
      return true;
    }
    return number(max) && Eat('}');
  }

  Status ParseAtom(Re* out) {
    const char32_t c = p_[i_++];
    out->kind = Re::kClass;
    switch (c) {
      case '(':
        if (Eat('?')) {
          if (!Eat(':'))
            return Fail(
                "lookahead / lookbehind, flags and named groups are not supported (only (?:...))");
        }
        OCULAR_RETURN_IF_ERROR(ParseAlt(out));
        if (!Eat(')')) return Fail("missing ')'");
        return Status::Ok();
      case '[':
        return ParseClass(&out->ranges);
      case '.':
        out->ranges = Complement({{'\n', '\n'}}, 0x10FFFF);
        return Status::Ok();
      case '\\': {
        bool is_class = false;
        return ParseEscape(/*in_class=*/false, &out->ranges, &is_class);
      }
      case '^':
      case '$':
        return Fail("anchors are supported only at the start / end of the pattern");
      case '*':
      case '+':
      case '?':
        return Fail("nothing to repeat");
      default:
        out->ranges = {{c, c}};
        return Status::Ok();
    }
  }

  // `digits` hex digits (\xHH, \uHHHH) as a code point; false if fewer follow.
  bool ReadHex(int digits, char32_t* v) {
    *v = 0;
    for (int k = 0; k < digits; ++k) {
      const char32_t h = Peek();
      const int d = (h >= '0' && h <= '9')   ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
      if (d < 0) return false;
      *v = *v * 16 + d;
      ++i_;
    }
    return true;
  }

  // After a backslash. Adds what it matches to `out`; `is_class` says it was \d \w \s (or a
  // complement), which a negated class keeps to ASCII.
  Status ParseEscape(bool in_class, CodepointRanges* out, bool* is_class) {
    if (AtEnd()) return Fail("pattern ends with '\\'");
    const char32_t c = p_[i_++];
    auto add = [&](const CodepointRanges& r) { out->insert(out->end(), r.begin(), r.end()); };
    char32_t v = 0;
    switch (c) {
      case 'd':
        *is_class = true;
        add(kDigit);
        return Status::Ok();
      case 'w':
        *is_class = true;
        add(kWord);
        return Status::Ok();
      case 's':
        *is_class = true;
        add(kSpace);
        return Status::Ok();
      case 'D':
        *is_class = true;
        add(Complement(kDigit, 0x7F));
        return Status::Ok();
      case 'W':
        *is_class = true;
        add(Complement(kWord, 0x7F));
        return Status::Ok();
      case 'S':
        *is_class = true;
        add(Complement(kSpace, 0x7F));
        return Status::Ok();
      case 't':
        v = '\t';
        break;
      case 'n':
        v = '\n';
        break;
      case 'r':
        v = '\r';
        break;
      case 'f':
        v = '\f';
        break;
      case 'v':
        v = '\v';
        break;
      case '0':
        v = 0;
        break;
      case 'x':
        if (!ReadHex(2, &v)) return Fail("\\x needs two hex digits");
        break;
      case 'u':
        if (!ReadHex(4, &v)) return Fail("\\u needs four hex digits");
        break;
      case 'b':
        if (!in_class) return Fail("\\b (word boundary) is not supported");
        v = '\b';
        break;
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
          return Fail("escape \\" + std::string(1, static_cast<char>(c)) +
                      " is not supported (backreferences, \\b, \\A, \\Z, \\p ...)");
        }
        v = c;  // escaped punctuation or a non-ASCII character
    }
    out->emplace_back(v, v);
    return Status::Ok();
  }

  Status ParseClass(CodepointRanges* out) {
    const bool negate = Eat('^');
    bool has_class_escape = false, first = true;
    CodepointRanges set;
    while (true) {
      if (AtEnd()) return Fail("missing ']'");
      if (Peek() == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      CodepointRanges item;
      bool is_class = false;
      if (Eat('\\')) {
        OCULAR_RETURN_IF_ERROR(ParseEscape(/*in_class=*/true, &item, &is_class));
      } else {
        const char32_t c = p_[i_++];
        item = {{c, c}};
      }
      has_class_escape |= is_class;
      // A range a-b (a '-' before ']' is a literal).
      if (!is_class && Peek() == '-' && Peek(1) != ']' && i_ + 1 < p_.size()) {
        ++i_;
        CodepointRanges end;
        bool end_class = false;
        if (Eat('\\')) {
          OCULAR_RETURN_IF_ERROR(ParseEscape(/*in_class=*/true, &end, &end_class));
        } else {
          end = {{p_[i_], p_[i_]}};
          ++i_;
        }
        if (end_class) return Fail("a class escape cannot end a range");
        if (end[0].first < item[0].first) return Fail("bad character range");
        item = {{item[0].first, end[0].first}};
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    // Python's \d \w \s are Unicode-wide: keep a negated class to ASCII so that what it
    // matches here it matches there.
    *out = negate ? Complement(set, has_class_escape ? 0x7F : 0x10FFFF) : Normalize(set);
    if (out->empty()) return Fail("the class matches nothing");
    return Status::Ok();
  }

  std::u32string p_;
  size_t i_ = 0;
};

// JSON's spelling of a code point that cannot appear raw in a string.
std::string JsonEscape(char32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default: {
      static const char kHex[] = "0123456789abcdef";
      return std::string("\\u00") + kHex[cp >> 4] + kHex[cp & 15];
    }
  }
}

class Emitter {
 public:
  Emitter(GrammarBuilder* b, bool json) : b_(b), json_(json) {}

  Frag Class(const CodepointRanges& ranges) {
    if (!json_) return b_->Codepoints(ranges);
    // Raw where JSON allows it; ", \ and control characters escaped.
    static const CodepointRanges kUnsafe = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    CodepointRanges raw;
    for (auto [lo, hi] : Complement(kUnsafe, 0x10FFFF)) {
      for (auto [a, z] : ranges) {
        if (std::max(lo, a) <= std::min(hi, z)) raw.emplace_back(std::max(lo, a), std::min(hi, z));
      }
    }
    std::vector<Frag> alts;
    if (!raw.empty()) alts.push_back(b_->Codepoints(raw));
    for (auto [lo, hi] : kUnsafe) {
      for (char32_t cp = lo; cp <= hi; ++cp) {
        for (auto [a, z] : ranges) {
          if (cp >= a && cp <= z) alts.push_back(b_->Literal(JsonEscape(cp)));
        }
      }
    }
    return b_->Alt(alts);
  }

  Frag Build(const Re& re) {
    switch (re.kind) {
      case Re::kClass:
        return Class(re.ranges);
      case Re::kSeq: {
        Frag f = b_->Empty();
        for (const Re& k : re.kids) f = b_->Seq(f, Build(k));
        return f;
      }
      case Re::kAlt: {
        std::vector<Frag> alts;
        for (const Re& k : re.kids) alts.push_back(Build(k));
        return b_->Alt(alts);
      }
      case Re::kRepeat:
        return b_->Repeat([&] { return Build(re.kids[0]); }, re.min, re.max);
    }
    return b_->Empty();
  }

 private:
  GrammarBuilder* b_;
  bool json_;
};

}  // namespace

StatusOr<Frag> CompileRegex(std::string_view pattern, const RegexOptions& options,
                            GrammarBuilder* b) {
  if (text::FindInvalidUtf8(pattern) != std::string_view::npos) {
    return Error(StatusCode::kInvalidArgument, "regex", "the pattern is not valid UTF-8");
  }
  std::u32string cps;
  size_t pos = 0;
  char32_t cp = 0;
  while (text::NextCodepoint(pattern, &pos, &cp)) cps.push_back(cp);
  Parser parser(std::move(cps));
  std::vector<Re> alts;
  std::vector<std::pair<bool, bool>> anchors;
  OCULAR_RETURN_IF_ERROR(parser.ParseTop(&alts, &anchors));
  int64_t nodes = b->node_count();
  for (const Re& re : alts) nodes += MinNodes(re);
  if (nodes > GrammarBuilder::kMaxNodes) return GrammarBuilder::TooLarge();
  Emitter emit(b, options.json_string);
  std::vector<Frag> frags;
  for (size_t i = 0; i < alts.size(); ++i) {
    Frag f = emit.Build(alts[i]);
    if (options.search) {
      auto any = [&] { return b->Star(emit.Class({{0, 0x10FFFF}})); };
      if (!anchors[i].first) f = b->Seq(any(), f);
      if (!anchors[i].second) f = b->Seq(f, any());
    }
    frags.push_back(f);
  }
  return b->Alt(frags);
}

StatusOr<Grammar> RegexGrammar(std::string_view pattern) {
  GrammarBuilder b;
  const int32_t root = b.NewRule("regex");
  OCULAR_ASSIGN_OR_RETURN(Frag f, CompileRegex(pattern, {}, &b));
  b.SetRule(root, f);
  return b.Finish(root);
}

}  // namespace ocular::grammar

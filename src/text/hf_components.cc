#include "text/hf_components.h"

#include <array>
#include <optional>
#include <unordered_map>

#include "text/regex.h"
#include "text/unicode_normalizer.h"
#include "text/utf8.h"

namespace ocular::text {
namespace {

using nlohmann::json;

Status Malformed(std::string_view what, std::string_view detail) {
  return Error(StatusCode::kInvalidArgument, "tokenizer", what, ": ", detail);
}

StatusOr<std::string> GetString(const json& j, const char* key, std::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    return Malformed(what, StrCat("'", key, "' must be a string"));
  return it->get<std::string>();
}

StatusOr<bool> GetBool(const json& j, const char* key, bool fallback, std::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return Malformed(what, StrCat("'", key, "' must be a bool"));
  return it->get<bool>();
}

// {"String": "..."} or {"Regex": "..."}.
struct Pattern {
  std::string literal;
  std::optional<Regex> regex;

  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view s) const {
    if (regex) return regex->FindAll(s);
    std::vector<std::pair<size_t, size_t>> out;
    if (literal.empty()) return out;
    for (size_t p = s.find(literal); p != std::string_view::npos; p = s.find(literal, p)) {
      out.emplace_back(p, p + literal.size());
      p += literal.size();
    }
    return out;
  }
};

StatusOr<Pattern> ParsePattern(const json& j, std::string_view what) {
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object() || it->size() != 1) {
    return Malformed(what, "'pattern' must be {\"String\": ...} or {\"Regex\": ...}");
  }
  Pattern p;
  if (auto s = it->find("String"); s != it->end() && s->is_string()) {
    p.literal = s->get<std::string>();
  } else if (auto r = it->find("Regex"); r != it->end() && r->is_string()) {
    OCULAR_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(r->get<std::string>()));
    p.regex = std::move(regex);
  } else {
    return Malformed(what, "'pattern' must be {\"String\": ...} or {\"Regex\": ...}");
  }
  return p;
}

std::string ReplaceAll(std::string_view s, const Pattern& pattern, std::string_view content) {
  std::string out;
  size_t last = 0;
  for (auto [b, e] : pattern.FindAll(s)) {
    out.append(s.substr(last, b - last));
    out.append(content);
    last = e;
  }
  out.append(s.substr(last));
  return out;
}

// ---- normalizers ----------------------------------------------------------------------------

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(Pattern p, std::string c) : pattern_(std::move(p)), content_(std::move(c)) {}
  std::string Normalize(std::string s) const override { return ReplaceAll(s, pattern_, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : prepend_(std::move(p)) {}
  std::string Normalize(std::string s) const override {
    return s.empty() ? s : prepend_ + s;  // normalizers/prepend.rs: only non-empty strings
  }

 private:
  std::string prepend_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string Normalize(std::string s) const override {
    size_t begin = 0, end = s.size(), pos = 0;
    char32_t cp;
    bool leading = true;
    while (pos < s.size()) {
      const size_t start = pos;
      NextCodepoint(s, &pos, &cp);
      if (!IsWhiteSpace(cp)) {
        if (leading && left_) begin = start;
        leading = false;
        end = pos;
      }
    }
    if (leading) return left_ || right_ ? std::string() : s;  // all whitespace
    if (!right_) end = s.size();
    if (!left_) begin = 0;
    return s.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> n) : parts_(std::move(n)) {}
  std::string Normalize(std::string s) const override {
    for (const auto& p : parts_) s = p->Normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// ---- pre-tokenizers -------------------------------------------------------------------------

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// normalizer.rs NormalizedString::split.
void SplitPiece(std::string_view s, const Pattern& pattern, SplitBehavior behavior, bool invert,
                std::vector<std::string>* out) {
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : pattern.FindAll(s)) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.size()) spans.push_back({prev, s.size(), false});
  if (invert) {
    for (auto& sp : spans) sp.match = !sp.match;
  }
  std::vector<Span> merged;  // match == "remove this span"
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      merged = spans;
      break;
    case SplitBehavior::kIsolated:
      for (auto sp : spans) merged.push_back({sp.b, sp.e, false});
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (auto sp : spans) {
        if (sp.match && !previous_match && !merged.empty()) {
          merged.back().e = sp.e;
        } else {
          merged.push_back({sp.b, sp.e, false});
        }
        previous_match = sp.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !merged.empty()) {
          merged.back().b = it->b;
        } else {
          merged.push_back({it->b, it->e, false});
        }
        previous_match = it->match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (auto sp : spans) {
        if (sp.match == previous_match && !merged.empty()) {
          merged.back().e = sp.e;
        } else {
          merged.push_back({sp.b, sp.e, false});
        }
        previous_match = sp.match;
      }
      break;
  }
  for (const auto& sp : merged) {
    if (!sp.match && sp.e > sp.b) out->emplace_back(s.substr(sp.b, sp.e - sp.b));
  }
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern p, SplitBehavior b, bool invert)
      : pattern_(std::move(p)), behavior_(b), invert_(invert) {}
  void PreTokenize(std::vector<std::string>* pieces) const override {
    std::vector<std::string> out;
    for (const auto& piece : *pieces) SplitPiece(piece, pattern_, behavior_, invert_, &out);
    pieces->swap(out);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// pre_tokenizers/byte_level.rs: the GPT-2 split pattern.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::optional<Pattern> split)
      : add_prefix_space_(add_prefix_space), split_(std::move(split)) {}
  void PreTokenize(std::vector<std::string>* pieces) const override {
    std::vector<std::string> split;
    for (auto& piece : *pieces) {
      if (add_prefix_space_ && !piece.starts_with(' ')) {
        std::string prefixed(1, ' ');  // not insert(0, ...): g++ 12 -Wrestrict false positive
        prefixed += piece;
        piece = std::move(prefixed);
      }
      if (split_) {
        SplitPiece(piece, *split_, SplitBehavior::kIsolated, false, &split);
      } else {
        split.push_back(std::move(piece));
      }
    }
    for (auto& piece : split) {
      std::string mapped;
      mapped.reserve(piece.size() * 2);
      for (unsigned char b : piece) mapped += ByteLevelChar(b);
      piece = std::move(mapped);
    }
    pieces->swap(split);
  }

 private:
  bool add_prefix_space_;
  std::optional<Pattern> split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> p)
      : parts_(std::move(p)) {}
  void PreTokenize(std::vector<std::string>* pieces) const override {
    for (const auto& p : parts_) p->PreTokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// ---- decoders -------------------------------------------------------------------------------

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern p, std::string c) : pattern_(std::move(p)), content_(std::move(c)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (auto& t : *tokens) t = ReplaceAll(t, pattern_, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// decoders/byte_fallback.rs: runs of "<0xNN>" tokens become their bytes when those form valid
// UTF-8, else one U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t byte_count = 0;
    auto flush = [&] {
      if (byte_count == 0) return;
      if (FindInvalidUtf8(bytes) == std::string_view::npos) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < byte_count; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      byte_count = 0;
    };
    for (auto& t : *tokens) {
      int value = -1;
      if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>') value = ParseHexByte(t[3], t[4]);
      if (value >= 0) {
        bytes.push_back(static_cast<char>(value));
        ++byte_count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens->swap(out);
  }

 private:
  // u8::from_str_radix(_, 16) accepts either case.
  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int ParseHexByte(char hi, char lo) {
    const int h = Hex(hi), l = Hex(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const auto& t : *tokens) all += t;
    tokens->clear();
    tokens->push_back(std::move(all));
  }
};

// decoders/strip.rs: per token, remove up to `start` leading and `stop` trailing `content`.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    if (content_.empty()) return;
    for (auto& t : *tokens) {
      size_t b = 0, e = t.size();
      for (size_t i = 0; i < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++i) {
        b += content_.size();
      }
      for (size_t i = 0; i < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++i) {
        e -= content_.size();
      }
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

// decoders/byte_level.rs: map characters back to bytes (tokens with unknown characters keep
// their UTF-8 bytes), then String::from_utf8_lossy over everything.
class ByteLevelDecoder : public Decoder {
 public:
  ByteLevelDecoder() {
    for (int b = 0; b < 256; ++b) {
      size_t pos = 0;
      char32_t cp;
      NextCodepoint(ByteLevelChar(static_cast<unsigned char>(b)), &pos, &cp);
      char_to_byte_[cp] = static_cast<unsigned char>(b);
    }
  }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string bytes;
    for (const auto& t : *tokens) {
      std::string mapped;
      bool ok = true;
      size_t pos = 0;
      char32_t cp;
      while (ok && NextCodepoint(t, &pos, &cp)) {
        auto it = char_to_byte_.find(cp);
        if (it == char_to_byte_.end()) {
          ok = false;
        } else {
          mapped.push_back(static_cast<char>(it->second));
        }
      }
      bytes += ok ? mapped : t;
    }
    tokens->assign(1, Utf8Lossy(bytes));
  }

 private:
  std::unordered_map<char32_t, unsigned char> char_to_byte_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> d) : parts_(std::move(d)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& p : parts_) p->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

StatusOr<std::string> TypeOf(const json& j, std::string_view what) {
  if (!j.is_object()) return Malformed(what, "must be an object or null");
  return GetString(j, "type", what);
}

template <typename T, typename F>
StatusOr<std::vector<std::unique_ptr<T>>> ParseList(const json& j, const char* key,
                                                    std::string_view what, F parse) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array())
    return Malformed(what, StrCat("'", key, "' must be a list"));
  std::vector<std::unique_ptr<T>> parts;
  for (const auto& e : *it) {
    OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<T> part, parse(e));
    if (part) parts.push_back(std::move(part));
  }
  return parts;
}

Status Unsupported(std::string_view what, std::string_view type) {
  return Error(StatusCode::kUnimplemented, "tokenizer", what, " type '", type,
               "' is not supported");
}

}  // namespace

const std::string& ByteLevelChar(unsigned char b) {
  // bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to
  // U+0100 + n in byte order.
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int n = 0;
    for (int c = 0; c < 256; ++c) {
      const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      AppendUtf8(&t[c], printable ? static_cast<char32_t>(c) : static_cast<char32_t>(256 + n++));
    }
    return t;
  }();
  return table[b];
}

StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const json& j) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  OCULAR_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "normalizer"));
  if (type == "Replace") {
    OCULAR_ASSIGN_OR_RETURN(Pattern p, ParsePattern(j, "normalizer Replace"));
    OCULAR_ASSIGN_OR_RETURN(std::string c, GetString(j, "content", "normalizer Replace"));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(p), std::move(c)));
  }
  if (type == "Prepend") {
    OCULAR_ASSIGN_OR_RETURN(std::string p, GetString(j, "prepend", "normalizer Prepend"));
    return std::unique_ptr<Normalizer>(new PrependNormalizer(std::move(p)));
  }
  if (type == "Strip") {
    OCULAR_ASSIGN_OR_RETURN(bool left, GetBool(j, "strip_left", false, "normalizer Strip"));
    OCULAR_ASSIGN_OR_RETURN(bool right, GetBool(j, "strip_right", false, "normalizer Strip"));
    return std::unique_ptr<Normalizer>(new StripNormalizer(left, right));
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    return MakeUnicodeNormalizer(type);
  }
  if (type == "Sequence") {
    OCULAR_ASSIGN_OR_RETURN(auto parts,
                            ParseList<Normalizer>(j, "normalizers", "normalizer", ParseNormalizer));
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(parts)));
  }
  return Unsupported("normalizer", type);
}

StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const json& j) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  OCULAR_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "pre_tokenizer"));
  if (type == "Split") {
    OCULAR_ASSIGN_OR_RETURN(Pattern p, ParsePattern(j, "pre_tokenizer Split"));
    OCULAR_ASSIGN_OR_RETURN(std::string b, GetString(j, "behavior", "pre_tokenizer Split"));
    OCULAR_ASSIGN_OR_RETURN(bool invert, GetBool(j, "invert", false, "pre_tokenizer Split"));
    SplitBehavior behavior;
    if (b == "Removed") {
      behavior = SplitBehavior::kRemoved;
    } else if (b == "Isolated") {
      behavior = SplitBehavior::kIsolated;
    } else if (b == "MergedWithPrevious") {
      behavior = SplitBehavior::kMergedWithPrevious;
    } else if (b == "MergedWithNext") {
      behavior = SplitBehavior::kMergedWithNext;
    } else if (b == "Contiguous") {
      behavior = SplitBehavior::kContiguous;
    } else {
      return Malformed("pre_tokenizer Split", StrCat("unknown behavior '", b, "'"));
    }
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(p), behavior, invert));
  }
  if (type == "ByteLevel") {
    OCULAR_ASSIGN_OR_RETURN(bool prefix, GetBool(j, "add_prefix_space", true, "ByteLevel"));
    OCULAR_ASSIGN_OR_RETURN(bool use_regex, GetBool(j, "use_regex", true, "ByteLevel"));
    std::optional<Pattern> split;
    if (use_regex) {
      OCULAR_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(kGpt2Pattern));
      split = Pattern{"", std::move(regex)};
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(prefix, std::move(split)));
  }
  if (type == "Sequence") {
    OCULAR_ASSIGN_OR_RETURN(auto parts, ParseList<PreTokenizer>(j, "pretokenizers", "pre_tokenizer",
                                                                ParsePreTokenizer));
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(parts)));
  }
  return Unsupported("pre_tokenizer", type);
}

StatusOr<std::unique_ptr<Decoder>> ParseDecoder(const json& j) {
  if (j.is_null()) return std::unique_ptr<Decoder>();
  OCULAR_ASSIGN_OR_RETURN(std::string type, TypeOf(j, "decoder"));
  if (type == "Replace") {
    OCULAR_ASSIGN_OR_RETURN(Pattern p, ParsePattern(j, "decoder Replace"));
    OCULAR_ASSIGN_OR_RETURN(std::string c, GetString(j, "content", "decoder Replace"));
    return std::unique_ptr<Decoder>(new ReplaceDecoder(std::move(p), std::move(c)));
  }
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  if (type == "Strip") {
    OCULAR_ASSIGN_OR_RETURN(std::string c, GetString(j, "content", "decoder Strip"));
    auto start = j.find("start"), stop = j.find("stop");
    if (start == j.end() || !start->is_number_unsigned() || stop == j.end() ||
        !stop->is_number_unsigned()) {
      return Malformed("decoder Strip", "'start' and 'stop' must be non-negative integers");
    }
    return std::unique_ptr<Decoder>(
        new StripDecoder(std::move(c), start->get<size_t>(), stop->get<size_t>()));
  }
  if (type == "Sequence") {
    OCULAR_ASSIGN_OR_RETURN(auto parts, ParseList<Decoder>(j, "decoders", "decoder", ParseDecoder));
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(parts)));
  }
  return Unsupported("decoder", type);
}

}  // namespace ocular::text

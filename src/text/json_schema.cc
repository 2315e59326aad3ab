// JSON Schema -> grammar. The shapes of the rules follow llama.cpp's json-schema-to-grammar
// (common/json-schema-to-grammar.cpp: properties in schema order with the optional ones
// skippable, integer ranges as digit-wise alternatives, bounded whitespace) and XGrammar's
// JSONSchemaConverter (python/xgrammar/... json_schema_converter), rewritten here for our
// byte-level grammar. Each property value and array item is its own rule, so the grammar grows
// linearly with the schema.
#include "text/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

namespace ocular::grammar {
namespace {

using json = nlohmann::json;

constexpr int kMaxIndent = 20;
constexpr int kMaxIntDigits = 16;
constexpr int kMaxFracDigits = 16;

const std::set<std::string, std::less<>> kAnnotations = {
    "title",    "description", "default",  "examples",  "$schema", "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
const std::set<std::string, std::less<>> kKeywords = {"type",
                                                      "enum",
                                                      "const",
                                                      "anyOf",
                                                      "$ref",
                                                      "properties",
                                                      "required",
                                                      "additionalProperties",
                                                      "items",
                                                      "minItems",
                                                      "maxItems",
                                                      "minLength",
                                                      "maxLength",
                                                      "pattern",
                                                      "format",
                                                      "minimum",
                                                      "maximum",
                                                      "exclusiveMinimum",
                                                      "exclusiveMaximum"};

// A calendar date, as Python's date.fromisoformat accepts it (jsonschema's format check):
// years 0001-9999, each month's days (February to the 28th: a subset).
const std::string kDate =
    "([1-9]\\d{3}|0[1-9]\\d{2}|00[1-9]\\d|000[1-9])-((0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|"
    "(0[469]|11)-(0[1-9]|[12]\\d|30)|02-(0[1-9]|1\\d|2[0-8]))";
const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date", "^" + kDate + "$"},
    {"time", "^([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)$"},
    {"date-time", "^" + kDate +
                      "T([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d"
                      "(\\.\\d{1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)$"},
    {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
    {"ipv4",
     "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$"},
    {"email", "^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\\.[A-Za-z0-9-]{1,63}){1,4}$"},
};

Status Unsupported(std::string_view what, const std::string& path) {
  return Error(StatusCode::kInvalidArgument, "json-schema", what, " at ",
               path.empty() ? "/" : path);
}

// A bound of a numeric range: an integer value, inclusive or not.
struct Bound {
  int64_t v = 0;
  bool exclusive = false;
};

class Compiler {
 public:
  explicit Compiler(json root) : root_(std::move(root)) {}

  StatusOr<Grammar> Run() {
    const int32_t top = b_.NewRule("root");
    OCULAR_ASSIGN_OR_RETURN(Frag value, Compile(root_, "", {}));
    b_.SetRule(top, b_.Seq(b_.Seq(Ws(), value), Ws()));
    return b_.Finish(top);
  }

  Grammar AnyObject() {
    const int32_t top = b_.NewRule("root");
    b_.SetRule(top, b_.Seq(b_.Seq(Ws(), AnyObjectFrag()), Ws()));
    return std::move(b_.Finish(top).value());
  }

 private:
  using Heads = std::set<std::string>;  // $refs entered since the last byte was read

  Frag Ws() {
    if (ws_ < 0) {
      ws_ = b_.NewRule("ws");
      // llama.cpp's SPACE rule: nothing, one space, or a newline and an indent.
      auto indent = [&] { return b_.Alt({b_.Literal(" "), b_.Literal("\t")}); };
      b_.SetRule(ws_, b_.Alt({b_.Empty(), b_.Literal(" "),
                              b_.Seq(b_.Literal("\n"), b_.Repeat(indent, 0, kMaxIndent))}));
    }
    return b_.Call(ws_);
  }
  Frag Lit(std::string_view s) { return b_.Literal(s); }
  Frag Cat(std::initializer_list<Frag> parts) {
    Frag f = b_.Empty();
    for (Frag p : parts) f = b_.Seq(f, p);
    return f;
  }
  Frag Digits(int min, int max) {
    return b_.Repeat([&] { return b_.Bytes('0', '9'); }, min, max);
  }

  // One character of a JSON string (raw, or an escape).
  Frag StringChar() {
    if (char_ < 0) {
      char_ = b_.NewRule("char");
      const Frag raw = b_.Codepoints({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}});
      auto hex4 = [&] {
        return b_.Repeat(
            [&] {
              return b_.Alt({b_.Bytes('0', '9'), b_.Bytes('a', 'f'), b_.Bytes('A', 'F')});
            },
            4, 4);
      };
      std::vector<Frag> esc;
      for (char c : std::string_view("\"\\/bfnrt")) esc.push_back(Lit(std::string(1, c)));
      esc.push_back(b_.Seq(Lit("u"), hex4()));
      b_.SetRule(char_, b_.Alt({raw, b_.Seq(Lit("\\"), b_.Alt(esc))}));
    }
    return b_.Call(char_);
  }

  Frag AnyValue() {
    if (any_ < 0) {
      any_ = b_.NewRule("value");
      const Frag obj = AnyObjectFrag();
      const int32_t arr = b_.NewRule("array");
      const Frag item = Cat({Ws(), b_.Call(any_), Ws()});
      const Frag more = b_.Star(Cat({Lit(","), Ws(), b_.Call(any_), Ws()}));
      b_.SetRule(arr, Cat({Lit("["), b_.Alt({Ws(), b_.Seq(item, more)}), Lit("]")}));
      b_.SetRule(any_, b_.Alt({obj, b_.Call(arr), StringFrag(0, -1), NumberFrag(), Lit("true"),
                               Lit("false"), Lit("null")}));
    }
    return b_.Call(any_);
  }
  // {"key": value, ...} with any keys and values.
  Frag AnyObjectFrag() {
    if (any_obj_ < 0) {
      any_obj_ = b_.NewRule("object");
      auto member = [&] {
        return Cat({Ws(), StringFrag(0, -1), Ws(), Lit(":"), Ws(), AnyValue(), Ws()});
      };
      const Frag body = b_.Seq(member(), b_.Star(b_.Seq(Lit(","), member())));
      b_.SetRule(any_obj_, Cat({Lit("{"), b_.Alt({Ws(), body}), Lit("}")}));
    }
    return b_.Call(any_obj_);
  }

  Frag StringFrag(int min, int max) {
    return Cat({Lit("\""), b_.Repeat([&] { return StringChar(); }, min, max), Lit("\"")});
  }
  Frag NumberFrag() {
    const Frag frac = b_.Optional(b_.Seq(Lit("."), Digits(1, kMaxFracDigits)));
    const Frag exp = b_.Optional(Cat(
        {b_.Alt({Lit("e"), Lit("E")}), b_.Optional(b_.Alt({Lit("+"), Lit("-")})), Digits(1, 3)}));
    return Cat({b_.Optional(Lit("-")), NonNegative(0, kUnbounded), frac, exp});
  }

  // The decimal spellings (no leading zeros) of n in [lo, hi]; unbounded: [lo, ...) with up
  // to kMaxIntDigits digits.
  static constexpr uint64_t kUnbounded = ~uint64_t{0};
  Frag NonNegative(uint64_t lo, uint64_t hi) {
    const std::string a = std::to_string(lo);
    std::vector<Frag> alts;
    const bool bounded = hi != kUnbounded;
    const size_t top = bounded ? std::to_string(hi).size() : kMaxIntDigits;
    for (size_t d = a.size(); d <= top; ++d) {
      std::string from(d, '0');  // 10^(d-1), or lo for lo's own length
      from[0] = '1';
      if (d == a.size()) from = a;
      const std::string to = bounded && d == top ? std::to_string(hi) : std::string(d, '9');
      if (from <= to) alts.push_back(SameLength(from, to));
    }
    return b_.Alt(alts);
  }
  // Digit strings of one length between `a` and `z` (inclusive, a <= z), digit by digit.
  Frag SameLength(std::string_view a, std::string_view z) {
    if (a.empty()) return b_.Empty();
    const size_t n = a.size() - 1;
    if (a.substr(1) == std::string(n, '0') && z.substr(1) == std::string(n, '9')) {
      return b_.Seq(b_.Bytes(a[0], z[0]), Digits(static_cast<int>(n), static_cast<int>(n)));
    }
    if (a[0] == z[0]) return b_.Seq(Lit(a.substr(0, 1)), SameLength(a.substr(1), z.substr(1)));
    std::vector<Frag> alts;
    alts.push_back(b_.Seq(Lit(a.substr(0, 1)), SameLength(a.substr(1), std::string(n, '9'))));
    if (z[0] - a[0] >= 2) {
      alts.push_back(
          b_.Seq(b_.Bytes(a[0] + 1, z[0] - 1), Digits(static_cast<int>(n), static_cast<int>(n))));
    }
    alts.push_back(b_.Seq(Lit(z.substr(0, 1)), SameLength(std::string(n, '0'), z.substr(1))));
    return b_.Alt(alts);
  }

  // Integers in [lo, hi] (inclusive; unset: unbounded). REQUIRES: lo <= hi when both are set.
  Frag IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<Frag> alts;
    if (!hi || *hi >= 0) {
      alts.push_back(NonNegative(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0,
                                 hi ? static_cast<uint64_t>(*hi) : kUnbounded));
    }
    if (!lo || *lo < 0) {
      const uint64_t m_lo = hi && *hi < 0 ? 0 - static_cast<uint64_t>(*hi) : 1;
      const uint64_t m_hi = lo ? 0 - static_cast<uint64_t>(*lo) : kUnbounded;
      alts.push_back(b_.Seq(Lit("-"), NonNegative(m_lo, m_hi)));
    }
    return b_.Alt(alts);
  }

  // Numbers whose magnitude is in the range (a, b) with integer ends, each inclusive or not;
  // b.v < 0: unbounded. No exponent.
  Frag Magnitude(Bound a, Bound bound) {
    const Bound* b = bound.v >= 0 ? &bound : nullptr;
    auto any_frac = [&] { return b_.Optional(b_.Seq(Lit("."), Digits(1, kMaxFracDigits))); };
    auto zero_frac = [&] {
      return b_.Optional(b_.Seq(Lit("."), b_.Repeat([&] { return Lit("0"); }, 1, kMaxFracDigits)));
    };
    auto nonzero_frac = [&] {
      return Cat({Lit("."), Digits(0, kMaxFracDigits - 1), b_.Bytes('1', '9'),
                  Digits(0, kMaxFracDigits - 1)});
    };
    const uint64_t av = static_cast<uint64_t>(a.v);
    std::vector<Frag> alts;
    if (b && b->v == a.v) {
      if (!a.exclusive && !b->exclusive) alts.push_back(b_.Seq(NonNegative(av, av), zero_frac()));
      return alts.empty() ? Lit("") : alts[0];
    }
    const uint64_t bv = b ? static_cast<uint64_t>(b->v) : 0;
    if (!b || bv - av >= 2) {
      alts.push_back(b_.Seq(NonNegative(av + 1, b ? bv - 1 : kUnbounded), any_frac()));
    }
    alts.push_back(b_.Seq(NonNegative(av, av), a.exclusive ? nonzero_frac() : any_frac()));
    if (b && !b->exclusive) alts.push_back(b_.Seq(NonNegative(bv, bv), zero_frac()));
    return b_.Alt(alts);
  }

  StatusOr<Frag> Compile(const json& s, const std::string& path, const Heads& heads);
  StatusOr<Frag> CompileType(const json& s, const std::string& type, const std::string& path);
  StatusOr<Frag> CompileObject(const json& s, const std::string& path);
  StatusOr<Frag> CompileArray(const json& s, const std::string& path);
  StatusOr<Frag> CompileString(const json& s, const std::string& path);
  StatusOr<Frag> CompileNumber(const json& s, bool integer, const std::string& path);
  StatusOr<Frag> CompileRef(const std::string& ref, const std::string& path, const Heads& heads);
  StatusOr<int32_t> RuleFor(const json& s, const std::string& path);

  json root_;
  GrammarBuilder b_;
  int32_t ws_ = -1, char_ = -1, any_ = -1, any_obj_ = -1;
  std::map<std::string, int32_t> refs_;
};

StatusOr<int> CountKeyword(const json& s, const char* key, const std::string& path) {
  auto it = s.find(key);
  if (it == s.end()) return -1;
  if (!it->is_number_unsigned() || it->get<uint64_t>() > 100000) {
    return Unsupported(std::string("'") + key + "' must be an integer in [0, 100000]", path);
  }
  return it->get<int>();
}

StatusOr<Frag> Compiler::Compile(const json& s, const std::string& path, const Heads& heads) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return AnyValue();
    return Unsupported("the schema 'false' accepts nothing", path);
  }
  if (!s.is_object()) return Unsupported("a schema must be an object or a boolean", path);
  for (const auto& [key, value] : s.items()) {
    if (!kKeywords.count(key) && !kAnnotations.count(key)) {
      return Unsupported("unsupported keyword '" + key + "'", path);
    }
  }
  auto only = [&](const char* key) -> Status {
    for (const auto& [k, v] : s.items()) {
      if (k != key && !kAnnotations.count(k)) {
        return Unsupported(std::string("keyword '") + k + "' beside '" + key + "' is not supported",
                           path);
      }
    }
    return Status::Ok();
  };
  if (auto it = s.find("$ref"); it != s.end()) {
    OCULAR_RETURN_IF_ERROR(only("$ref"));
    if (!it->is_string()) return Unsupported("'$ref' must be a string", path);
    return CompileRef(it->get<std::string>(), path, heads);
  }
  if (auto it = s.find("anyOf"); it != s.end()) {
    OCULAR_RETURN_IF_ERROR(only("anyOf"));
    if (!it->is_array() || it->empty())
      return Unsupported("'anyOf' must be a non-empty list", path);
    std::vector<Frag> alts;
    for (size_t i = 0; i < it->size(); ++i) {
      OCULAR_ASSIGN_OR_RETURN(Frag f,
                              Compile((*it)[i], path + "/anyOf/" + std::to_string(i), heads));
      alts.push_back(f);
    }
    return b_.Alt(alts);
  }
  if (auto it = s.find("const"); it != s.end()) return Lit(it->dump());
  if (auto it = s.find("enum"); it != s.end()) {
    if (!it->is_array() || it->empty()) return Unsupported("'enum' must be a non-empty list", path);
    std::vector<Frag> alts;
    for (const json& v : *it) alts.push_back(Lit(v.dump()));
    return b_.Alt(alts);
  }
  auto type = s.find("type");
  if (type == s.end()) return AnyValue();
  std::vector<std::string> types;
  if (type->is_string()) types.push_back(type->get<std::string>());
  if (type->is_array()) {
    for (const json& t : *type) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
  }
  if (types.empty() || (type->is_array() && types.size() != type->size())) {
    return Unsupported("'type' must be a type name or a list of them", path);
  }
  std::vector<Frag> alts;
  for (const std::string& t : types) {
    OCULAR_ASSIGN_OR_RETURN(Frag f, CompileType(s, t, path));
    alts.push_back(f);
  }
  return b_.Alt(alts);
}

StatusOr<Frag> Compiler::CompileType(const json& s, const std::string& type,
                                     const std::string& path) {
  if (type == "object") return CompileObject(s, path);
  if (type == "array") return CompileArray(s, path);
  if (type == "string") return CompileString(s, path);
  if (type == "integer") return CompileNumber(s, /*integer=*/true, path);
  if (type == "number") return CompileNumber(s, /*integer=*/false, path);
  if (type == "boolean") return b_.Alt({Lit("true"), Lit("false")});
  if (type == "null") return Lit("null");
  return Unsupported("unknown type '" + type + "'", path);
}

StatusOr<Frag> Compiler::CompileRef(const std::string& ref, const std::string& path,
                                    const Heads& heads) {
  if (heads.count(ref)) {
    return Unsupported(
        "'$ref' " + ref + " refers back to itself before any object or array (left recursion)",
        path);
  }
  if (auto it = refs_.find(ref); it != refs_.end()) return b_.Call(it->second);
  if (ref.empty() || ref[0] != '#')
    return Unsupported("only local '$ref's (\"#...\") are supported: " + ref, path);
  const json* target = nullptr;
  try {
    target = &root_.at(json::json_pointer(ref.substr(1)));
  } catch (const json::exception&) {
    return Unsupported("'$ref' " + ref + " does not resolve", path);
  }
  const int32_t rule = b_.NewRule(ref);
  refs_[ref] = rule;
  Heads inner = heads;
  inner.insert(ref);
  OCULAR_ASSIGN_OR_RETURN(Frag body, Compile(*target, ref.substr(1), inner));
  b_.SetRule(rule, body);
  return b_.Call(rule);
}

// A rule for a nested schema (compiled once, called wherever it appears): a new byte has been
// read before it, so no $ref is a head any more.
StatusOr<int32_t> Compiler::RuleFor(const json& s, const std::string& path) {
  const int32_t rule = b_.NewRule(path);
  OCULAR_ASSIGN_OR_RETURN(Frag body, Compile(s, path, {}));
  b_.SetRule(rule, body);
  return rule;
}

StatusOr<Frag> Compiler::CompileObject(const json& s, const std::string& path) {
  const json empty = json::object();
  const json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) return Unsupported("'properties' must be an object", path);
  std::set<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return Unsupported("'required' must be a list", path);
    for (const json& r : *it) {
      if (!r.is_string() || !props.contains(r.get<std::string>())) {
        return Unsupported("required property " + r.dump() + " is not in 'properties'", path);
      }
      required.insert(r.get<std::string>());
    }
  }
  const json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
  if (extra && !extra->is_boolean() && !extra->is_object()) {
    return Unsupported("'additionalProperties' must be a boolean or a schema", path);
  }
  if (props.empty() && !(extra && extra->is_boolean() && !extra->get<bool>())) {
    if (!extra || extra->is_boolean()) return AnyObjectFrag();
    // A map: any keys, values of the additionalProperties schema.
    OCULAR_ASSIGN_OR_RETURN(int32_t value, RuleFor(*extra, path + "/additionalProperties"));
    auto member = [&] {
      return Cat({Ws(), StringFrag(0, -1), Ws(), Lit(":"), Ws(), b_.Call(value), Ws()});
    };
    const Frag body = b_.Seq(member(), b_.Star(b_.Seq(Lit(","), member())));
    return Cat({Lit("{"), b_.Alt({Ws(), body}), Lit("}")});
  }
  // Properties in schema order, the optional ones skippable, built node by node: none[i] =
  // "before property i, nothing written" (the next member has no comma), some[i] = "something
  // written". After a required property, none[] is unreachable.
  const Frag open = Lit("{");
  int32_t none = open.out, some = -1;
  for (const auto& [name, sub] : props.items()) {
    const std::string at = path + "/properties/" + name;
    OCULAR_ASSIGN_OR_RETURN(int32_t value, RuleFor(sub, at));
    const int32_t member = b_.NewRule(at + ":member");
    b_.SetRule(member, Cat({Lit(json(name).dump()), Ws(), Lit(":"), Ws(), b_.Call(value), Ws()}));
    const bool optional = required.count(name) == 0;
    const int32_t next_none = none >= 0 && optional ? b_.NewNode() : -1;
    const int32_t next_some = b_.NewNode();
    if (none >= 0) {
      const Frag first = b_.Seq(Ws(), b_.Call(member));
      b_.Link(none, first.in);
      b_.Link(first.out, next_some);
      if (optional) b_.Link(none, next_none);
    }
    if (some >= 0) {
      const Frag later = Cat({Lit(","), Ws(), b_.Call(member)});
      b_.Link(some, later.in);
      b_.Link(later.out, next_some);
      if (optional) b_.Link(some, next_some);
    }
    none = next_none;
    some = next_some;
  }
  const Frag close = Lit("}");
  if (some >= 0) b_.Link(some, close.in);
  if (none >= 0) {
    const Frag blank = Ws();
    b_.Link(none, blank.in);
    b_.Link(blank.out, close.in);
  }
  return Frag{open.in, close.out};
}

StatusOr<Frag> Compiler::CompileArray(const json& s, const std::string& path) {
  OCULAR_ASSIGN_OR_RETURN(int min, CountKeyword(s, "minItems", path));
  OCULAR_ASSIGN_OR_RETURN(int max, CountKeyword(s, "maxItems", path));
  min = std::max(min, 0);
  if (max >= 0 && max < min) return Unsupported("maxItems < minItems: no array fits", path);
  int32_t item = -1;
  if (auto it = s.find("items"); it != s.end()) {
    if (it->is_array()) return Unsupported("'items' as a list (tuples) is not supported", path);
    OCULAR_ASSIGN_OR_RETURN(item, RuleFor(*it, path + "/items"));
  } else {
    AnyValue();
    item = any_;
  }
  auto one = [&] { return Cat({Ws(), b_.Call(item), Ws()}); };
  auto more = [&] { return b_.Seq(Lit(","), one()); };
  Frag body;
  if (max == 0) {
    body = Ws();
  } else {
    const Frag items = b_.Seq(one(), b_.Repeat(more, std::max(min - 1, 0), max < 0 ? -1 : max - 1));
    body = min == 0 ? b_.Alt({Ws(), items}) : items;
  }
  return Cat({Lit("["), body, Lit("]")});
}

StatusOr<Frag> Compiler::CompileString(const json& s, const std::string& path) {
  OCULAR_ASSIGN_OR_RETURN(int min, CountKeyword(s, "minLength", path));
  OCULAR_ASSIGN_OR_RETURN(int max, CountKeyword(s, "maxLength", path));
  if (max >= 0 && max < std::max(min, 0))
    return Unsupported("maxLength < minLength: no string fits", path);
  std::string pattern;
  RegexOptions options;
  options.json_string = true;
  if (auto it = s.find("pattern"); it != s.end()) {
    if (!it->is_string()) return Unsupported("'pattern' must be a string", path);
    pattern = it->get<std::string>();
    options.search = true;
  }
  if (auto it = s.find("format"); it != s.end()) {
    const std::string format = it->is_string() ? it->get<std::string>() : it->dump();
    auto f = kFormats.find(format);
    if (f == kFormats.end()) return Unsupported("unsupported string format '" + format + "'", path);
    if (!pattern.empty())
      return Unsupported("'format' together with 'pattern' is not supported", path);
    pattern = f->second;
  }
  if (pattern.empty()) return StringFrag(std::max(min, 0), max);
  if (min >= 0 || max >= 0) {
    return Unsupported(
        "'minLength' / 'maxLength' together with 'pattern' or 'format' is not supported", path);
  }
  auto re = CompileRegex(pattern, options, &b_);
  if (!re.ok())
    return Unsupported("'pattern' " + json(pattern).dump() + ": " + re.status().message(), path);
  return Cat({Lit("\""), *re, Lit("\"")});
}

// A numeric bound keyword: an integer-valued number (also for "number": fractional bounds
// are refused), or draft 4's boolean exclusiveMinimum / exclusiveMaximum.
StatusOr<std::optional<Bound>> ReadBound(const json& s, const char* inclusive,
                                         const char* exclusive, bool integer, bool lower,
                                         const std::string& path) {
  std::optional<Bound> out;
  auto read = [&](const char* key, bool excl) -> Status {
    auto it = s.find(key);
    if (it == s.end() || it->is_boolean()) return Status::Ok();
    if (!it->is_number()) return Unsupported(std::string("'") + key + "' must be a number", path);
    const double v = it->get<double>();
    if (std::abs(v) > 1e15) return Unsupported(std::string("'") + key + "' is over 1e15", path);
    double r = lower ? std::ceil(v) : std::floor(v);
    bool ex = excl;
    if (r != v) {
      if (!integer) {
        return Unsupported(
            std::string("a fractional '") + key + "' (" + it->dump() + ") on a number", path);
      }
      ex = false;  // an integer >= 2.5 is an integer >= 3
    }
    Bound b{static_cast<int64_t>(r), ex};
    if (integer && b.exclusive) b = {b.v + (lower ? 1 : -1), false};
    const bool tighter = !out || (lower ? (b.v > out->v || (b.v == out->v && b.exclusive))
                                        : (b.v < out->v || (b.v == out->v && b.exclusive)));
    if (tighter) out = b;
    return Status::Ok();
  };
  const bool draft4 =
      s.contains(exclusive) && s[exclusive].is_boolean() && s[exclusive].get<bool>();
  OCULAR_RETURN_IF_ERROR(read(inclusive, draft4));
  OCULAR_RETURN_IF_ERROR(read(exclusive, true));
  return out;
}

StatusOr<Frag> Compiler::CompileNumber(const json& s, bool integer, const std::string& path) {
  OCULAR_ASSIGN_OR_RETURN(auto lo,
                          ReadBound(s, "minimum", "exclusiveMinimum", integer, true, path));
  OCULAR_ASSIGN_OR_RETURN(auto hi,
                          ReadBound(s, "maximum", "exclusiveMaximum", integer, false, path));
  if (lo && hi && (hi->v < lo->v || (hi->v == lo->v && (lo->exclusive || hi->exclusive)))) {
    return Unsupported("the bounds leave no number", path);
  }
  if (integer) {
    return IntegerRange(lo ? std::optional<int64_t>(lo->v) : std::nullopt,
                        hi ? std::optional<int64_t>(hi->v) : std::nullopt);
  }
  if (!lo && !hi) return NumberFrag();
  std::vector<Frag> alts;
  // x >= 0: magnitude from max(lo, 0) up to hi.
  if (!hi || hi->v > 0 || (hi->v == 0 && !hi->exclusive)) {
    const Bound a = lo && lo->v >= 0 ? *lo : Bound{0, false};
    alts.push_back(Magnitude(a, hi ? *hi : Bound{-1, false}));
  }
  // x < 0: "-" and a magnitude from max(-hi, 0) (exclusive at 0) up to -lo.
  if (!lo || lo->v < 0) {
    const Bound a = hi && hi->v < 0 ? Bound{-hi->v, hi->exclusive} : Bound{0, true};
    alts.push_back(
        b_.Seq(Lit("-"), Magnitude(a, lo ? Bound{-lo->v, lo->exclusive} : Bound{-1, false})));
  }
  return b_.Alt(alts);
}

}  // namespace

StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_json) {
  json schema = json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) {
    return Error(StatusCode::kInvalidArgument, "json-schema", "the schema is not valid JSON");
  }
  return Compiler(std::move(schema)).Run();
}

Grammar JsonObjectGrammar() { return Compiler(json()).AnyObject(); }

}  // namespace ocular::grammar

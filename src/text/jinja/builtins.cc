// Filters follow jinja2 3.1's filters.py, tests its tests.py, methods CPython 3's str, list and
// dict; each notes where it differs from a naive reading of its name.
#include "text/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace ocular::jinja {

Value Arg(Args& args, size_t index, std::string_view name, Value fallback) {
  for (const auto& [k, v] : args.keywords) {
    if (k == name) return v;
  }
  if (index < args.positional.size()) return args.positional[index];
  return fallback;
}

void NoMoreArgs(const Args& args, size_t max_positional, std::string_view fn,
                std::initializer_list<std::string_view> keywords) {
  if (args.positional.size() > max_positional) {
    TypeError(StrCat(fn, "() takes at most ", max_positional, " argument(s) (",
                     args.positional.size(), " given)"));
  }
  for (const auto& kv : args.keywords) {
    if (std::find(keywords.begin(), keywords.end(), kv.first) == keywords.end()) {
      TypeError(StrCat(fn, "() got an unexpected keyword argument '", kv.first, "'"));
    }
  }
}

namespace {

[[noreturn]] void UndefinedError(const Value& v) {
  TypeError(v.undefined_name().empty() ? "a value is undefined"
                                       : StrCat("'", v.undefined_name(), "' is undefined"));
}

int64_t ToIndex(const Value& v, std::string_view what) {
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) return v.integer();
  TypeError(StrCat(what, " must be an integer, not '", v.TypeName(), "'"));
}

const std::string& ToStr(const Value& v, std::string_view what) {
  if (!v.is_string()) TypeError(StrCat(what, " must be str, not ", v.TypeName()));
  return v.str();
}

// ---- str helpers (on code points, as Python's str) ----

std::u32string AsciiCase(std::u32string s, bool upper) {
  for (char32_t& c : s) {
    if (upper && c >= 'a' && c <= 'z') c -= 32;
    if (!upper && c >= 'A' && c <= 'Z') c += 32;
  }
  return s;
}
bool IsAlpha(char32_t c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }
bool IsDigit(char32_t c) { return c >= '0' && c <= '9'; }

void RequireAscii(const std::u32string& s, std::string_view what) {
  for (char32_t c : s) {
    if (c > 0x7f) Unsupported(StrCat(what, " of non-ASCII text"));
  }
}

std::string Case(const std::string& s, bool upper) {
  std::u32string u = Decode(s);
  // Python maps the case of every script; this renderer maps ASCII only and refuses the rest
  // rather than render differently.
  for (char32_t c : u) {
    if (c > 0x7f && c != 0x2028 && c != 0x2029) {
      const bool cased = (c >= 0xc0 && c <= 0x24f) || (c >= 0x370 && c <= 0x52f) ||
                         (c >= 0x1e00 && c <= 0x1fff) || (c >= 0x2c00 && c <= 0x2c7f) ||
                         (c >= 0xff21 && c <= 0xff5a) || (c >= 0x10400 && c <= 0x1044f) ||
                         c == 0xb5 || (c >= 0x2160 && c <= 0x2184) || (c >= 0x24b6 && c <= 0x24e9);
      if (cased)
        Unsupported(upper ? "upper() of non-ASCII letters" : "lower() of non-ASCII letters");
    }
  }
  return Encode(AsciiCase(std::move(u), upper));
}

// str.strip / lstrip / rstrip (chars None: whitespace).
std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::u32string u = Decode(s);
  std::u32string set;
  const bool ws = chars.is_none() || chars.is_undefined();
  if (!ws) set = Decode(ToStr(chars, "strip arg"));
  auto strip = [&](char32_t c) { return ws ? IsPySpace(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip(u[e - 1])) --e;
  }
  return Encode(std::u32string_view(u).substr(b, e - b));
}

// str.split(sep=None, maxsplit=-1); from the right for rsplit.
List Split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  List out;
  if (sep.is_none() || sep.is_undefined()) {
    const std::u32string u = Decode(s);
    std::vector<std::u32string> words;
    if (!from_right) {
      size_t i = 0;
      while (i < u.size()) {
        while (i < u.size() && IsPySpace(u[i])) ++i;
        if (i == u.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          size_t e = u.size();
          while (e > i && IsPySpace(u[e - 1])) --e;
          words.push_back(u.substr(i, e - i));
          break;
        }
        size_t j = i;
        while (j < u.size() && !IsPySpace(u[j])) ++j;
        words.push_back(u.substr(i, j - i));
        i = j;
      }
    } else {
      size_t e = u.size();
      while (e > 0) {
        while (e > 0 && IsPySpace(u[e - 1])) --e;
        if (e == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          size_t b = 0;
          while (b < e && IsPySpace(u[b])) ++b;
          words.push_back(u.substr(b, e - b));
          break;
        }
        size_t j = e;
        while (j > 0 && !IsPySpace(u[j - 1])) --j;
        words.push_back(u.substr(j, e - j));
        e = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto& w : words) out.push_back(Value(Encode(w)));
    return out;
  }
  const std::string& d = ToStr(sep, "separator");
  if (d.empty()) TypeError("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t from = 0;
    for (size_t at; (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) &&
                    (at = s.find(d, from)) != std::string::npos;
         from = at + d.size()) {
      parts.push_back(s.substr(from, at - from));
    }
    parts.push_back(s.substr(from));
  } else {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      if (end < d.size()) break;
      const size_t at = s.rfind(d, end - d.size());
      if (at == std::string::npos) break;
      parts.push_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
    }
    parts.push_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
  }
  for (auto& p : parts) out.push_back(Value(std::move(p)));
  return out;
}

bool IsLineBreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

// str.splitlines(): \r\n counts as one break.
std::vector<std::u32string> SplitLines(const std::u32string& u, bool keepends) {
  std::vector<std::u32string> lines;
  size_t b = 0;
  for (size_t i = 0; i < u.size();) {
    if (!IsLineBreak(u[i])) {
      ++i;
      continue;
    }
    size_t e = i + ((u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1);
    lines.push_back(u.substr(b, (keepends ? e : i) - b));
    b = i = e;
  }
  if (b < u.size()) lines.push_back(u.substr(b));
  return lines;
}

std::string Replace(const std::string& s, const std::string& old, const std::string& repl,
                    int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `repl` between every character and at both ends
    const std::u32string u = Decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      if (i < u.size()) out += Encode(std::u32string(1, u[i]));
      if (out.size() > kMaxStringBytes) Fail(StatusCode::kResourceExhausted, "replace(): too long");
    }
    return out;
  }
  size_t from = 0;
  int64_t n = 0;
  for (size_t at; (count < 0 || n < count) && (at = s.find(old, from)) != std::string::npos;
       from = at + old.size(), ++n) {
    out += s.substr(from, at - from);
    out += repl;
    if (out.size() > kMaxStringBytes) Fail(StatusCode::kResourceExhausted, "replace(): too long");
  }
  return out + s.substr(from);
}

bool AffixMatch(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& t = ToStr(a, prefix ? "startswith arg" : "endswith arg");
    return prefix ? s.starts_with(t) : s.ends_with(t);
  };
  if (affix.is_list() && affix.is_tuple()) {
    for (const Value& a : affix.list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

// Python's str.title(): a letter after a non-letter is upper case, others lower (ASCII).
std::string Title(const std::string& s) {
  std::u32string u = Decode(s);
  RequireAscii(u, "title()");
  bool prev_cased = false;
  for (char32_t& c : u) {
    if (IsAlpha(c)) {
      c = prev_cased ? (c | 32) : (c & ~32u);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return Encode(u);
}

std::string Capitalize(const std::string& s) {
  std::u32string u = Decode(s);
  RequireAscii(u, "capitalize()");
  u = AsciiCase(std::move(u), false);
  if (!u.empty() && IsAlpha(u[0])) u[0] &= ~32u;
  return Encode(u);
}

int64_t Find(const std::string& s, const std::string& sub, bool from_right) {
  const size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(Decode(s.substr(0, at)).size());
}

int64_t CountSub(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<int64_t>(Decode(s).size()) + 1;
  int64_t n = 0;
  for (size_t at = 0; (at = s.find(sub, at)) != std::string::npos; at += sub.size()) ++n;
  return n;
}

template <typename Pred>
bool AllChars(const std::string& s, Pred pred) {
  const std::u32string u = Decode(s);
  if (u.empty()) return false;
  for (char32_t c : u) {
    if (!pred(c)) return false;
  }
  return true;
}

std::string Join(const Value& sep, const Value& items) {
  const std::string& d = ToStr(sep, "join separator");
  std::string out;
  const List list = Iterate(items);
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) {
      TypeError(
          StrCat("sequence item ", i, ": expected str instance, ", list[i].TypeName(), " found"));
    }
    out += (i ? d : "") + list[i].str();
    if (out.size() > kMaxStringBytes) Fail(StatusCode::kResourceExhausted, "join(): too long");
  }
  return out;
}

// str.format with "{}", "{0}" and "{name}" fields (no conversions or format specs).
std::string Format(const std::string& fmt, Args& a) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') TypeError("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t end = fmt.find('}', i);
    if (end == std::string::npos) TypeError("Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, end - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      Unsupported("str.format() with a format spec");
    Value v;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      const size_t k = field.empty() ? next++ : std::stoul(field.substr(0, 6));
      if (k >= a.positional.size())
        TypeError("Replacement index out of range for positional args tuple");
      v = a.positional[k];
    } else {
      v = Arg(a, SIZE_MAX, field, Value::Undefined(field));
      if (v.is_undefined()) TypeError(StrCat("KeyError: '", field, "'"));
    }
    out += v.Str();
    i = end;
  }
  return out;
}

// The str methods that search, split and edit (Python's semantics); nullopt for the others.
std::optional<Value> StrEditMethod(const std::string& s, const std::string& name,
                                   const std::string& fn, Args& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    NoMoreArgs(a, 1, fn, {});
    return Value(Strip(s, Arg(a, 0, "", Value::None()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    NoMoreArgs(a, 2, fn, {"sep", "maxsplit"});
    return Value(Split(s, Arg(a, 0, "sep", Value::None()),
                       ToIndex(Arg(a, 1, "maxsplit", Value(-1)), "maxsplit"), name == "rsplit"));
  }
  if (name == "startswith" || name == "endswith") {
    NoMoreArgs(a, 1, fn, {});
    if (a.positional.empty()) TypeError(fn + "() takes at least 1 argument (0 given)");
    return Value(AffixMatch(s, a.positional[0], name == "startswith"));
  }
  if (name == "upper" || name == "lower") return Value(Case(s, name == "upper"));
  if (name == "title") return Value(Title(s));
  if (name == "capitalize") return Value(Capitalize(s));
  if (name == "replace") {
    NoMoreArgs(a, 3, fn, {});
    if (a.positional.size() < 2) TypeError("replace expected at least 2 arguments");
    return Value(Replace(s, ToStr(a.positional[0], "replace arg"),
                         ToStr(a.positional[1], "replace arg"),
                         ToIndex(Arg(a, 2, "count", Value(-1)), "count")));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    NoMoreArgs(a, 1, fn, {});
    if (a.positional.empty()) TypeError(fn + "() takes at least 1 argument (0 given)");
    const std::string& sub = ToStr(a.positional[0], fn + " arg");
    if (name == "count") return Value(CountSub(s, sub));
    const int64_t at = Find(s, sub, name[0] == 'r');
    if (at < 0 && name.ends_with("index")) TypeError("substring not found");
    return Value(at);
  }
  if (name == "join") {
    NoMoreArgs(a, 1, fn, {});
    return Value(Join(Value(s), Arg(a, 0, "", Value::Undefined())));
  }
  if (name == "splitlines") {
    NoMoreArgs(a, 1, fn, {"keepends"});
    List out;
    for (auto& l : SplitLines(Decode(s), Arg(a, 0, "keepends", Value(false)).Truthy())) {
      out.push_back(Value(Encode(l)));
    }
    return Value(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    NoMoreArgs(a, 1, fn, {});
    const Value arg = Arg(a, 0, "", Value::None());
    const std::string& x = ToStr(arg, fn + " arg");
    if (name == "removeprefix") return Value(s.starts_with(x) ? s.substr(x.size()) : s);
    return Value(s.ends_with(x) ? s.substr(0, s.size() - x.size()) : s);
  }
  return std::nullopt;
}

// The str.is*() predicates (ASCII text; Python's semantics); nullopt for other names.
std::optional<Value> StrTestMethod(const std::string& s, const std::string& name,
                                   const std::string& fn) {
  if (name == "isdigit") return Value(AllChars(s, IsDigit));
  if (name == "isalpha")
    return Value(AllChars(s, [](char32_t c) {
      if (c > 0x7f) Unsupported("isalpha() of non-ASCII text");
      return IsAlpha(c);
    }));
  if (name == "isalnum")
    return Value(AllChars(s, [](char32_t c) {
      if (c > 0x7f) Unsupported("isalnum() of non-ASCII text");
      return IsAlpha(c) || IsDigit(c);
    }));
  if (name == "isspace") return Value(AllChars(s, IsPySpace));
  if (name == "isupper" || name == "islower") {
    const std::u32string u = Decode(s);
    RequireAscii(u, fn);
    bool cased = false;
    for (char32_t c : u) {
      if (!IsAlpha(c)) continue;
      cased = true;
      if ((name == "isupper") != (c < 'a')) return Value(false);
    }
    return Value(cased);
  }
  return std::nullopt;
}

Value StrMethod(const std::string& s, std::string_view name) {
  static const std::set<std::string_view> kPython = {
      "capitalize", "casefold",    "center",     "count",      "encode",       "endswith",
      "expandtabs", "find",        "format",     "format_map", "index",        "isalnum",
      "isalpha",    "isascii",     "isdecimal",  "isdigit",    "isidentifier", "islower",
      "isnumeric",  "isprintable", "isspace",    "istitle",    "isupper",      "join",
      "ljust",      "lower",       "lstrip",     "partition",  "removeprefix", "removesuffix",
      "replace",    "rfind",       "rindex",     "rjust",      "rpartition",   "rsplit",
      "rstrip",     "split",       "splitlines", "startswith", "strip",        "swapcase",
      "title",      "translate",   "upper",      "zfill"};
  if (!kPython.count(name)) return Value::Undefined(std::string(name));
  const std::string fn = StrCat("str.", name);
  return Value::Func(fn, [s, name = std::string(name), fn](Args& a) -> Value {
    if (std::optional<Value> v = StrEditMethod(s, name, fn, a)) return *std::move(v);
    if (std::optional<Value> v = StrTestMethod(s, name, fn)) return *std::move(v);
    if (name == "format") return Value(Format(s, a));
    Unsupported(fn + "()");
  });
}

Value ListMethod(const Value& list, std::string_view name) {
  const std::string fn = StrCat(list.TypeName(), ".", name);
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
      name == "remove" || name == "reverse" || name == "sort" || name == "clear") {
    return Value::Func(fn, [fn](Args&) -> Value {
      TypeError(fn + "() modifies a list, which jinja2's immutable sandbox forbids");
    });
  }
  if (name == "count" || name == "index") {
    return Value::Func(fn, [list, fn, count = name == "count"](Args& a) -> Value {
      NoMoreArgs(a, 1, fn, {});
      const Value x = Arg(a, 0, "", Value::Undefined());
      int64_t n = 0;
      for (size_t i = 0; i < list.list().size(); ++i) {
        if (!Equal(list.list()[i], x)) continue;
        if (!count) return Value(static_cast<int64_t>(i));
        ++n;
      }
      if (!count) TypeError(StrCat(x.Repr(), " is not in list"));
      return Value(n);
    });
  }
  if (name == "copy") return Value::Func(fn, [list](Args&) { return Value(list.list()); });
  return Value::Undefined(std::string(name));
}

Value Items(const Value& dict) {
  List out;
  for (const auto& [k, v] : dict.dict()) out.push_back(Value(List{Value(k), v}, true));
  return Value(std::move(out));
}

Value DictMethod(const Value& dict, std::string_view name) {
  const std::string fn = StrCat("dict.", name);
  if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" ||
      name == "update") {
    return Value::Func(fn, [fn](Args&) -> Value {
      TypeError(fn + "() modifies a dict, which jinja2's immutable sandbox forbids");
    });
  }
  if (name == "items") {
    return Value::Func(fn, [dict](Args&) { return Value::View(Items(dict).list(), "dict_items"); });
  }
  if (name == "keys" || name == "values") {
    return Value::Func(fn, [dict, keys = name == "keys"](Args&) {
      List out;
      for (const auto& [k, v] : dict.dict()) out.push_back(keys ? Value(k) : v);
      return Value::View(std::move(out), keys ? "dict_keys" : "dict_values");
    });
  }
  if (name == "get") {
    return Value::Func(fn, [dict, fn](Args& a) {
      NoMoreArgs(a, 2, fn, {});
      const Value key = Arg(a, 0, "", Value::Undefined());
      const Value* v = key.is_string() ? dict.Find(key.str()) : nullptr;
      return v ? *v : Arg(a, 1, "", Value::None());
    });
  }
  if (name == "copy") return Value::Func(fn, [dict](Args&) { return Value(dict.dict()); });
  if (name == "fromkeys") Unsupported("dict.fromkeys");
  return Value::Undefined(std::string(name));
}

// Python slice indices for a sequence of `n`.
List SliceItems(const List& items, const Value& start, const Value& stop, const Value& step) {
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t st = step.is_undefined() || step.is_none() ? 1 : ToIndex(step, "slice step");
  if (st == 0) TypeError("slice step cannot be zero");
  auto norm = [&](const Value& v, int64_t def) {
    if (v.is_undefined() || v.is_none()) return def;
    int64_t i = ToIndex(v, "slice index");
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = norm(start, st > 0 ? 0 : n - 1);
  const int64_t e = norm(stop, st > 0 ? n : -1);
  List out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(items[i]);
  return out;
}

}  // namespace

List Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.Consume();
    case Value::Kind::kDict: {
      if (v.is_namespace()) TypeError("'Namespace' object is not iterable");
      List keys;
      for (const auto& kv : v.dict()) keys.push_back(Value(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : Decode(v.str())) chars.push_back(Value(Encode(std::u32string(1, c))));
      return chars;
    }
    default:
      TypeError(StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

Value GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) UndefinedError(obj);
  if (!name.empty() && name[0] == '_')
    TypeError(StrCat("access to attribute '", name, "' is unsafe"));
  if (obj.is_string()) return StrMethod(obj.str(), name);
  if (obj.is_list()) return ListMethod(obj, name);
  if (obj.is_dict()) {
    if (!obj.is_namespace()) {
      Value m = DictMethod(obj, name);
      if (!m.is_undefined()) return m;
    }
    if (const Value* v = obj.Find(name)) return *v;
  }
  return Value::Undefined(std::string(name));
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) UndefinedError(obj);
  if (obj.is_dict() && !obj.is_namespace() && key.is_string()) {
    if (const Value* v = obj.Find(key.str())) return *v;
  } else if ((obj.is_list() || obj.is_string()) &&
             (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool)) {
    const List items = obj.is_list() ? List() : Iterate(obj);
    const List& seq = obj.is_list() ? obj.list() : items;
    int64_t i = key.integer();
    if (i < 0) i += static_cast<int64_t>(seq.size());
    if (i >= 0 && i < static_cast<int64_t>(seq.size())) return seq[i];
    return Value::Undefined();
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined();
}

Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) UndefinedError(obj);
  if (obj.is_list()) return Value(SliceItems(obj.list(), start, stop, step), obj.is_tuple());
  if (obj.is_string()) {
    std::string out;
    for (const Value& c : SliceItems(Iterate(obj), start, stop, step)) out += c.str();
    return Value(std::move(out));
  }
  return Value::Undefined();
}

bool Contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!needle.is_string()) {
        TypeError(StrCat("'in <string>' requires string as left operand, not ", needle.TypeName()));
      }
      return haystack.str().find(needle.str()) != std::string::npos;
    case Value::Kind::kList:
      if (haystack.is_generator()) Unsupported("'in' on a generator");
      for (const Value& v : haystack.list()) {
        if (Equal(v, needle)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (haystack.is_namespace()) TypeError("argument of type 'Namespace' is not iterable");
      return needle.is_string() && haystack.Find(needle.str()) != nullptr;
    default:
      TypeError(StrCat("argument of type '", haystack.TypeName(), "' is not iterable"));
  }
}

namespace {

// a op b on int64, refusing what Python's unbounded ints would give past 64 bits.
template <typename Op>
int64_t Checked(Op op, int64_t a, int64_t b) {
  int64_t r;
  if (op(a, b, &r)) Unsupported("integers past 64 bits");
  return r;
}
bool AddOverflow(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool SubOverflow(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool MulOverflow(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

Value Repeat(const Value& seq, int64_t n) {
  n = std::max<int64_t>(n, 0);
  if (seq.is_string()) {
    if (seq.str().size() * static_cast<uint64_t>(n) > kMaxStringBytes) {
      Fail(StatusCode::kResourceExhausted, "string repetition too long");
    }
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  if (seq.list().size() * static_cast<uint64_t>(n) > static_cast<uint64_t>(kMaxRange)) {
    Fail(StatusCode::kResourceExhausted, "list repetition too long");
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return Value(std::move(out), seq.is_tuple());
}

// printf-style `fmt % args` for %s, %r, %d, %i and %%.
std::string PercentFormat(const std::string& fmt, const Value& args) {
  List values = args.is_tuple() ? args.list() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) TypeError("incomplete format");
    const char c = fmt[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (c != 's' && c != 'r' && c != 'd' && c != 'i') Unsupported(StrCat("'%", c, "' formatting"));
    if (next >= values.size()) TypeError("not enough arguments for format string");
    const Value& v = values[next++];
    if (c == 's') {
      out += v.Str();
    } else if (c == 'r') {
      out += v.Repr();
    } else {
      if (!v.is_number())
        TypeError(StrCat("%d format: a real number is required, not ", v.TypeName()));
      out += std::to_string(v.kind() == Value::Kind::kFloat ? static_cast<int64_t>(v.number())
                                                            : v.integer());
    }
  }
  if (next < values.size()) TypeError("not all arguments converted during string formatting");
  return out;
}

}  // namespace

Value Arithmetic(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) UndefinedError(a);
  if (b.is_undefined()) UndefinedError(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat;
  if (op == "+") {
    if (ints) return Value(Checked(AddOverflow, a.integer(), b.integer()));
    if (nums) return Value(a.number() + b.number());
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > kMaxStringBytes) {
        Fail(StatusCode::kResourceExhausted, "string too long");
      }
      if (a.is_markup() || b.is_markup()) {  // Markup.__add__ / __radd__ escape the plain str
        return Value::Markup((a.is_markup() ? a.str() : HtmlEscape(a.str())) +
                             (b.is_markup() ? b.str() : HtmlEscape(b.str())));
      }
      return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      List out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      return Value(std::move(out), a.is_tuple());
    }
  } else if (op == "-") {
    if (ints) return Value(Checked(SubOverflow, a.integer(), b.integer()));
    if (nums) return Value(a.number() - b.number());
  } else if (op == "*") {
    if (ints) return Value(Checked(MulOverflow, a.integer(), b.integer()));
    if (nums) return Value(a.number() * b.number());
    const bool ai = a.is_number() && a.kind() != Value::Kind::kFloat;
    const bool bi = b.is_number() && b.kind() != Value::Kind::kFloat;
    if ((a.is_string() || a.is_list()) && bi) return Repeat(a, b.integer());
    if ((b.is_string() || b.is_list()) && ai) return Repeat(b, a.integer());
  } else if (op == "/" || op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return Value(PercentFormat(a.str(), b));
    if (nums) {
      if (b.number() == 0) TypeError("division by zero");
      if (op == "/") return Value(a.number() / b.number());
      if (ints) {
        if (a.integer() == INT64_MIN && b.integer() == -1) Unsupported("integers past 64 bits");
        int64_t q = a.integer() / b.integer(), m = a.integer() % b.integer();
        if (m != 0 && ((m < 0) != (b.integer() < 0))) {
          --q;
          m += b.integer();
        }
        return Value(op == "//" ? q : m);
      }
      const double q = std::floor(a.number() / b.number());
      if (op == "//") return Value(q);
      double m = std::fmod(a.number(), b.number());
      if (m != 0 && ((m < 0) != (b.number() < 0))) m += b.number();
      return Value(m);
    }
  } else if (op == "**") {
    if (ints && b.integer() >= 0) {
      const int64_t base = a.integer(), exp = b.integer();
      if (base == 0 || base == 1) return Value(exp == 0 ? int64_t{1} : base);
      if (base == -1) return Value(exp % 2 ? int64_t{-1} : int64_t{1});
      int64_t out = 1;  // |base| >= 2 overflows within 63 steps
      for (int64_t i = 0; i < exp; ++i) out = Checked(MulOverflow, out, base);
      return Value(out);
    }
    if (nums) return Value(std::pow(a.number(), b.number()));
  }
  TypeError(StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(), "' and '",
                   b.TypeName(), "'"));
}

}  // namespace ocular::jinja

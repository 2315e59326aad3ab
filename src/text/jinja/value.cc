#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/enum_names.h"
#include "text/utf8.h"

namespace ocular::jinja {

void Fail(StatusCode code, std::string message) { throw Error{code, std::move(message)}; }
void Unsupported(std::string_view what) {
  Fail(StatusCode::kUnimplemented, StrCat("unsupported construct: ", what));
}
void TypeError(std::string message) { Fail(StatusCode::kInvalidArgument, std::move(message)); }

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Undefined(std::string name) {
  Value v;
  v.s_ = std::move(name);
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double f) : kind_(Kind::kFloat), f_(f) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}
Value::Value(List list, bool tuple)
    : kind_(Kind::kList), tuple_(tuple), list_(std::make_shared<List>(std::move(list))) {}
Value::Value(Dict dict) : kind_(Kind::kDict), dict_(std::make_shared<Dict>(std::move(dict))) {}
Value Value::Namespace(Dict dict) {
  Value v(std::move(dict));
  v.ns_ = true;
  return v;
}
Value Value::Markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value Value::Generator(List items) {
  Value v(std::move(items));
  v.view_ = "generator";
  v.consumed_ = std::make_shared<size_t>(0);
  return v;
}
Value Value::View(List items, std::string type) {
  Value v(std::move(items));
  v.view_ = std::move(type);
  return v;
}
List Value::Consume() const {
  if (!is_generator()) return *list_;
  List rest(list_->begin() + static_cast<ptrdiff_t>(*consumed_), list_->end());
  *consumed_ = list_->size();
  return rest;
}
bool Value::Next(Value* item) const {
  if (*consumed_ >= list_->size()) return false;
  *item = (*list_)[(*consumed_)++];
  return true;
}

Value Value::Func(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

const Value* Value::Find(std::string_view key) const {
  if (kind_ != Kind::kDict) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !s_.empty();
    case Kind::kList:
      return is_generator() || !list_->empty();
    case Kind::kDict:
      return ns_ || !dict_->empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

const char* Value::TypeName() const {
  if (kind_ == Kind::kList) return !view_.empty() ? view_.c_str() : tuple_ ? "tuple" : "list";
  if (kind_ == Kind::kDict) return ns_ ? "Namespace" : "dict";
  static constexpr EnumName<Kind> kNames[] = {
      {Kind::kUndefined, "Undefined"}, {Kind::kNone, "NoneType"},
      {Kind::kBool, "bool"},           {Kind::kInt, "int"},
      {Kind::kFloat, "float"},         {Kind::kString, "str"},
      {Kind::kFunction, "function"}};
  return NameOf(kind_, kNames, "?");
}

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |f| < 1e16.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  bool negative = false;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] == '-') negative = true;
    if (std::isdigit(static_cast<unsigned char>(sci[i]))) digits += sci[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

namespace {

std::string StrRepr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = dq ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : Decode(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if ((c >= 0xdc80 && c <= 0xdcff) || c == 0x2028 || c == 0x2029) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      text::AppendUtf8(&out, c);
    }
  }
  return out + quote;
}

}  // namespace

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return s_;
    case Kind::kFunction:
      return "<function " + s_ + ">";
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return FloatRepr(f_);
    case Kind::kString:
      return StrRepr(s_);
    case Kind::kList: {
      if (is_generator()) Unsupported("printing a generator (Python prints its address)");
      if (!view_.empty()) return view_ + "(" + Value(*list_).Repr() + ")";
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].Repr();
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::kDict: {
      if (ns_) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        out += (i ? ", " : "") + StrRepr((*dict_)[i].first) + ": " + (*dict_)[i].second.Repr();
      }
      return out + "}";
    }
    case Kind::kFunction:
      return "<function " + s_ + ">";
  }
  return "";
}

bool Equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == K::kFloat || b.kind() == K::kFloat) return a.number() == b.number();
    return a.integer() == b.integer();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kString:
      return a.str() == b.str();
    case K::kList:
      if (!a.view().empty() || !b.view().empty()) return false;
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!Equal(a.list()[i], b.list()[i])) return false;
      }
      return true;
    case K::kDict:
      if (a.is_namespace() || b.is_namespace()) return &a.dict() == &b.dict();
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict()) {
        const Value* w = b.Find(k);
        if (w == nullptr || !Equal(v, *w)) return false;
      }
      return true;
    case K::kFunction:
      return a.function_name() == b.function_name();
    default:
      return false;
  }
}

int Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) {
      return a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
    }
    return a.integer() < b.integer() ? -1 : a.integer() > b.integer() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str() ? -1 : a.str() > b.str() ? 1 : 0;
  if (a.is_list() && b.is_list()) {
    const size_t n = std::min(a.list().size(), b.list().size());
    for (size_t i = 0; i < n; ++i) {
      if (!Equal(a.list()[i], b.list()[i])) return Compare(a.list()[i], b.list()[i]);
    }
    return a.list().size() < b.list().size() ? -1 : a.list().size() > b.list().size() ? 1 : 0;
  }
  TypeError(StrCat("'<' not supported between instances of '", a.TypeName(), "' and '",
                   b.TypeName(), "'"));
}

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      if (j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) Unsupported("integers past 2^63");
      return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List list;
      for (const auto& e : j) list.push_back(FromJson(e));
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [k, v] : j.items()) dict.emplace_back(k, FromJson(v));
      return Value(std::move(dict));
    }
    default:
      Unsupported("binary JSON values");
  }
}

namespace {

void JsonString(const std::string& s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (char32_t c : Decode(s)) {
    char buf[16];
    switch (c) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7e && c < 0x10000)) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      *out += buf;
    } else if (ensure_ascii && c >= 0x10000) {
      const char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (v >> 10)),
                    static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
      *out += buf;
    } else if (c >= 0xdc80 && c <= 0xdcff) {
      *out += static_cast<char>(c - 0xdc00);  // an invalid byte passes through
    } else {
      text::AppendUtf8(out, c);
    }
  }
  *out += '"';
}

struct JsonWriter {
  bool ensure_ascii;
  int indent;
  std::string item_sep, key_sep;
  bool sort_keys;
  std::string out;

  void Newline(int depth) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * depth, ' ');
  }
  void Write(const Value& v, int depth) {
    if (depth > 512) TypeError("tojson: nesting too deep");
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return;
      case Value::Kind::kBool:
        out += v.boolean() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out += std::to_string(v.integer());
        return;
      case Value::Kind::kFloat:
        out += std::isnan(v.number())   ? "NaN"
               : std::isinf(v.number()) ? (v.number() > 0 ? "Infinity" : "-Infinity")
                                        : FloatRepr(v.number());
        return;
      case Value::Kind::kString:
        JsonString(v.str(), ensure_ascii, &out);
        return;
      case Value::Kind::kList:
        if (v.is_list()) {
          WriteList(v.list(), depth);
          return;
        }
        TypeError(StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
      case Value::Kind::kDict:
        if (!v.is_namespace()) {
          WriteDict(v.dict(), depth);
          return;
        }
        [[fallthrough]];
      default:
        TypeError(StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
    }
  }
  void WriteList(const List& list, int depth) {
    if (list.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) out += item_sep;
      Newline(depth + 1);
      Write(list[i], depth + 1);
    }
    Newline(depth);
    out += ']';
  }
  void WriteDict(const Dict& dict, int depth) {
    if (dict.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& kv : dict) items.push_back(&kv);
    if (sort_keys) {
      std::stable_sort(items.begin(), items.end(),
                       [](auto* a, auto* b) { return Decode(a->first) < Decode(b->first); });
    }
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      Newline(depth + 1);
      JsonString(items[i]->first, ensure_ascii, &out);
      out += key_sep;
      Write(items[i]->second, depth + 1);
    }
    Newline(depth);
    out += '}';
  }
};

}  // namespace

std::string ToJson(const Value& v, bool ensure_ascii, int indent, std::string item_sep,
                   std::string key_sep, bool sort_keys) {
  if (item_sep.empty()) item_sep = indent >= 0 ? "," : ", ";
  if (key_sep.empty()) key_sep = ": ";
  JsonWriter w{ensure_ascii, indent, std::move(item_sep), std::move(key_sep), sort_keys, ""};
  w.Write(v, 0);
  return std::move(w.out);
}

std::u32string Decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    char32_t cp;
    if (text::NextCodepoint(s, &pos, &cp)) {
      out += cp;
    } else {
      out += static_cast<char32_t>(0xdc00 + static_cast<unsigned char>(s[pos]));
      ++pos;
    }
  }
  return out;
}

std::string Encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c >= 0xdc80 && c <= 0xdcff) {
      out += static_cast<char>(c - 0xdc00);
    } else {
      text::AppendUtf8(&out, c);
    }
  }
  return out;
}

bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

}  // namespace ocular::jinja

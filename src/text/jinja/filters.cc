// jinja2 3.1's filters (filters.py) and tests (tests.py), and the globals of transformers'
// environment.
#include <algorithm>
#include <cmath>
#include <set>

#include "text/jinja/builtins.h"

namespace ocular::jinja {
namespace {

int64_t IntArg(const Value& v, std::string_view what) {
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) return v.integer();
  TypeError(StrCat(what, ": an integer is required, not '", v.TypeName(), "'"));
}

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value AttrPath(const Value& item, const Value& path) {
  if (path.kind() == Value::Kind::kInt) return GetItem(item, path);
  const std::string& p =
      path.is_string() ? path.str() : (TypeError("attribute must be a string"), path.str());
  Value v = item;
  size_t from = 0;
  for (;;) {
    const size_t dot = p.find('.', from);
    const std::string part =
        p.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = digits && part.size() < 18 ? GetItem(v, Value(static_cast<int64_t>(std::stoll(part))))
                                   : GetItem(v, Value(part));
    if (dot == std::string::npos) return v;
    from = dot + 1;
  }
}

// The key sort, unique, min and max compare by: lower case unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  std::string s = v.str();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return Value(std::move(s));
}

std::string Indent(std::string s, const Value& width, bool first, bool blank) {
  const std::string pad =
      width.is_string() ? width.str()
                        : std::string(std::max<int64_t>(IntArg(width, "indent width"), 0), ' ');
  s += "\n";  // filters.py: "this quirk is necessary for splitlines method"
  std::vector<std::string> lines;
  {
    std::u32string u = Decode(s);
    size_t b = 0;
    for (size_t i = 0; i < u.size();) {
      const char32_t c = u[i];
      const bool br = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d ||
                      c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
      if (!br) {
        ++i;
        continue;
      }
      lines.push_back(Encode(std::u32string_view(u).substr(b, i - b)));
      i += (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1;
      b = i;
    }
    if (b < u.size()) lines.push_back(Encode(std::u32string_view(u).substr(b)));
  }
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + pad : "") + lines[i];
  } else if (!lines.empty()) {
    rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : pad) + lines[i];
  }
  return first ? pad + rv : rv;
}

// select / reject / selectattr / rejectattr: args are [attr,] [test, test args...].
Value SelectFilter(const Value& seq, Args& args, bool attr, bool keep) {
  if (!seq.Truthy()) return Value::Generator({});  // filters.py: `if value:` before anything
  size_t next = 0;
  Value attribute;
  if (attr) {
    if (args.positional.empty()) TypeError("selectattr needs an attribute");
    attribute = args.positional[next++];
  }
  std::string test;
  Args test_args;
  if (next < args.positional.size()) {
    test = args.positional[next].is_string() ? args.positional[next].str()
                                             : (TypeError("test name must be a string"), "");
    test_args.positional.assign(args.positional.begin() + next + 1, args.positional.end());
  }
  test_args.keywords = args.keywords;
  List out;
  for (const Value& item : Iterate(seq)) {
    const Value v = attr ? AttrPath(item, attribute) : item;
    Args a = test_args;
    const bool pass = test.empty() ? v.Truthy() : ApplyTest(test, v, a);
    if (pass == keep) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

Value MapFilter(const Value& seq, Args& args) {
  if (!seq.Truthy()) return Value::Generator({});
  List out;
  const Value attribute = Arg(args, 99, "attribute", Value::Undefined());
  if (!attribute.is_undefined()) {
    const Value def = Arg(args, 99, "default", Value::Undefined());
    for (const Value& item : Iterate(seq)) {
      Value v = AttrPath(item, attribute);
      out.push_back(v.is_undefined() && !def.is_undefined() ? def : v);
    }
    return Value::Generator(std::move(out));
  }
  if (args.positional.empty()) TypeError("map() needs a filter name or attribute=");
  if (!args.positional[0].is_string()) TypeError("map(): the filter name must be a string");
  const std::string filter = args.positional[0].str();
  Args rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keywords = args.keywords;
  for (const Value& item : Iterate(seq)) {
    Args a = rest;
    out.push_back(ApplyFilter(filter, item, a));
  }
  return Value::Generator(std::move(out));
}

List Sorted(const Value& seq, Args& args, std::string_view fn) {
  NoMoreArgs(args, 3, fn, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = Arg(args, 0, "reverse", Value(false)).Truthy();
  const bool cs = Arg(args, 1, "case_sensitive", Value(false)).Truthy();
  const Value attribute = Arg(args, 2, "attribute", Value::None());
  List items = Iterate(seq);
  auto key = [&](const Value& v) {
    return SortKey(attribute.is_none() ? v : AttrPath(v, attribute), cs);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? Compare(key(b), key(a)) < 0 : Compare(key(a), key(b)) < 0;
  });
  return items;
}

Value ToJsonFilter(const Value& v, Args& args) {
  NoMoreArgs(args, 4, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  const bool ascii = Arg(args, 0, "ensure_ascii", Value(false)).Truthy();
  const Value indent = Arg(args, 1, "indent", Value::None());
  const Value seps = Arg(args, 2, "separators", Value::None());
  const bool sort = Arg(args, 3, "sort_keys", Value(false)).Truthy();
  int width = -1;
  if (!indent.is_none()) {
    if (indent.is_string()) Unsupported("tojson with a string indent");
    width = static_cast<int>(std::clamp<int64_t>(IntArg(indent, "indent"), 0, 64));
  }
  std::string item_sep, key_sep;
  if (!seps.is_none()) {
    if (!seps.is_list() || seps.list().size() != 2 || !seps.list()[0].is_string() ||
        !seps.list()[1].is_string()) {
      TypeError("tojson: separators must be a pair of strings");
    }
    item_sep = seps.list()[0].str();
    key_sep = seps.list()[1].str();
    if (item_sep.empty() || key_sep.empty()) Unsupported("tojson with an empty separator");
  }
  return Value(ToJson(v, ascii, width, item_sep, key_sep, sort));
}

Value Length(const Value& v) {
  if (v.is_undefined()) return Value(0);
  if (v.is_string()) return Value(static_cast<int64_t>(Decode(v.str()).size()));
  if (v.kind() == Value::Kind::kList && !v.is_generator()) {
    return Value(static_cast<int64_t>(v.list().size()));
  }
  if (v.is_dict() && !v.is_namespace()) return Value(static_cast<int64_t>(v.dict().size()));
  TypeError(StrCat("object of type '", v.TypeName(), "' has no len()"));
}

Value ToNumber(const Value& v, Args& args, bool to_int) {
  const Value def = Arg(args, 0, "default", to_int ? Value(0) : Value(0.0));
  if (to_int && Arg(args, 1, "base", Value(10)).integer() != 10)
    Unsupported("int filter with a base");
  if (v.is_number()) return to_int ? Value(static_cast<int64_t>(v.number())) : Value(v.number());
  if (!v.is_string()) return def;
  const std::string& s = v.str();
  char* end = nullptr;
  if (to_int) {
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (end != s.c_str() && *end == 0 && errno == 0) return Value(static_cast<int64_t>(i));
  }
  const double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != 0) return def;
  return to_int ? Value(static_cast<int64_t>(d)) : Value(d);
}

Value MinMax(const Value& v, Args& args, bool max) {
  NoMoreArgs(args, 2, max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool cs = Arg(args, 0, "case_sensitive", Value(false)).Truthy();
  const Value attribute = Arg(args, 1, "attribute", Value::None());
  const List items = Iterate(v);
  if (items.empty()) return Value::Undefined("no items");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    auto key = [&](size_t k) {
      return SortKey(attribute.is_none() ? items[k] : AttrPath(items[k], attribute), cs);
    };
    const int c = Compare(key(i), key(best));
    if (max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

Value Unique(const Value& v, Args& args) {
  NoMoreArgs(args, 2, "unique", {"case_sensitive", "attribute"});
  const bool cs = Arg(args, 0, "case_sensitive", Value(false)).Truthy();
  const Value attribute = Arg(args, 1, "attribute", Value::None());
  List out, seen;
  for (const Value& item : Iterate(v)) {
    const Value key = SortKey(attribute.is_none() ? item : AttrPath(item, attribute), cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return Equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value(std::move(out));
}

Value Round(const Value& v, Args& args) {
  const int64_t precision = IntArg(Arg(args, 0, "precision", Value(0)), "precision");
  const std::string method = Arg(args, 1, "method", Value("common")).Str();
  if (!v.is_number()) TypeError("round: a number is required");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.number() * scale;
  double r;
  if (method == "common") {
    if (precision != 0) Unsupported("round with a precision");  // Python rounds the decimal repr
    r = std::nearbyint(x);                                      // Python's round(): half to even
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    TypeError("method must be common, ceil or floor");
  }
  return Value(r / scale);
}

Value Sum(const Value& v, Args& args) {
  const Value attribute = Arg(args, 0, "attribute", Value::None());
  Value total = Arg(args, 1, "start", Value(0));
  for (const Value& item : Iterate(v)) {
    total = Arithmetic("+", total, attribute.is_none() ? item : AttrPath(item, attribute));
  }
  return total;
}

Value DictSort(const Value& v, Args& args) {
  if (!v.is_dict()) TypeError("dictsort: a mapping is required");
  const bool cs = Arg(args, 0, "case_sensitive", Value(false)).Truthy();
  const std::string by = Arg(args, 1, "by", Value("key")).Str();
  const bool reverse = Arg(args, 2, "reverse", Value(false)).Truthy();
  if (by != "key" && by != "value") TypeError("You can only sort by either \"key\" or \"value\"");
  List items;
  for (const auto& [k, x] : v.dict()) items.push_back(Value(List{Value(k), x}, true));
  const size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = Compare(SortKey(a.list()[pos], cs), SortKey(b.list()[pos], cs));
    return reverse ? c > 0 : c < 0;
  });
  return Value(std::move(items));
}

Value StringFilter(std::string_view name, const Value& v, Args& args) {
  const std::string s = v.Str();
  if (name == "trim") {
    NoMoreArgs(args, 1, "trim", {"chars"});
    Args a;
    a.positional.push_back(Arg(args, 0, "chars", Value::None()));
    return GetAttr(Value(s), "strip").Call(a);
  }
  if (name == "upper" || name == "lower" || name == "capitalize") {
    Args none;
    return GetAttr(Value(s), name).Call(none);
  }
  if (name == "title") {
    // filters.py do_title: words split at whitespace and -({[<; each word's first letter upper.
    std::u32string u = Decode(s);
    bool start = true;
    for (char32_t& c : u) {
      if (c > 0x7f) Unsupported("title of non-ASCII text");
      const bool sep = IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      if (sep) {
        start = true;
        continue;
      }
      if (c >= 'a' && c <= 'z' && start) c -= 32;
      if (c >= 'A' && c <= 'Z' && !start) c += 32;
      start = false;
    }
    return Value(Encode(u));
  }
  if (name == "replace") {
    NoMoreArgs(args, 3, "replace", {});
    Args a = args;
    return GetAttr(Value(s), "replace").Call(a);
  }
  if (name == "indent") {
    NoMoreArgs(args, 3, "indent", {"width", "first", "blank"});
    return Value(Indent(s, Arg(args, 0, "width", Value(4)),
                        Arg(args, 1, "first", Value(false)).Truthy(),
                        Arg(args, 2, "blank", Value(false)).Truthy()));
  }
  if (name == "format") {
    if (!args.keywords.empty()) Unsupported("format with keyword arguments");
    return Arithmetic("%", Value(s), Value(args.positional, true));
  }
  return Value::Undefined();
}

const std::set<std::string_view>& UnimplementedFilters() {
  static const std::set<std::string_view> k = {
      "batch",     "center", "filesizeformat", "forceescape", "groupby",
      "pprint",    "random", "slice",          "striptags",   "truncate",
      "urlencode", "urlize", "wordcount",      "wordwrap",    "xmlattr"};
  return k;
}

}  // namespace

Value ApplyFilter(std::string_view name, const Value& v, Args& args) {
  if (name == "default" || name == "d") {
    NoMoreArgs(args, 2, "default", {"default_value", "boolean"});
    const bool boolean = Arg(args, 1, "boolean", Value(false)).Truthy();
    if (v.is_undefined() || (boolean && !v.Truthy()))
      return Arg(args, 0, "default_value", Value(""));
    return v;
  }
  if (name == "tojson") return ToJsonFilter(v, args);
  if (name == "length" || name == "count") return Length(v);
  if (name == "safe") return Value::Markup(v.Str());
  if (name == "string") return Value(v.Str());
  if (name == "escape" || name == "e") {
    return v.is_markup() ? v : Value::Markup(HtmlEscape(v.Str()));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value(List{});
    if (!v.is_dict() || v.is_namespace()) TypeError("Can only get item pairs from a mapping.");
    return Value::Generator(GetAttr(v, "items").Call(args).list());
  }
  if (name == "list") return Value(Iterate(v));
  if (name == "first" || name == "last") {
    if (v.is_generator()) {
      if (name == "last") TypeError("'generator' object is not reversible");
      Value item;
      return v.Next(&item) ? item : Value::Undefined("no first item");
    }
    const List items = Iterate(v);
    if (items.empty()) return Value::Undefined(StrCat("no ", name, " item"));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) return Slice(v, Value(), Value(), Value(-1));
    List items = Iterate(v);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "join") {
    NoMoreArgs(args, 2, "join", {"d", "attribute"});
    const Value attribute = Arg(args, 1, "attribute", Value::None());
    List parts;
    for (const Value& item : Iterate(v)) {
      parts.push_back(Value((attribute.is_none() ? item : AttrPath(item, attribute)).Str()));
    }
    Args a;
    a.positional.push_back(Value(std::move(parts)));
    return GetAttr(Value(Arg(args, 0, "d", Value("")).Str()), "join").Call(a);
  }
  if (name == "map") return MapFilter(v, args);
  if (name == "select" || name == "reject") return SelectFilter(v, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") {
    return SelectFilter(v, args, true, name == "selectattr");
  }
  if (name == "attr") {
    NoMoreArgs(args, 1, "attr", {});
    // filters.py do_attr: Python getattr only, so a dict's entries are not found.
    const std::string attr = Arg(args, 0, "name", Value("")).Str();
    if (v.is_dict() && !v.is_namespace() && v.Find(attr) != nullptr) {
      return Value::Undefined(attr);
    }
    return GetAttr(v, attr);
  }
  if (name == "sort") return Value(Sorted(v, args, "sort"));
  if (name == "unique") return Unique(v, args);
  if (name == "dictsort") return DictSort(v, args);
  if (name == "min" || name == "max") return MinMax(v, args, name == "max");
  if (name == "sum") return Sum(v, args);
  if (name == "int" || name == "float") return ToNumber(v, args, name == "int");
  if (name == "abs") {
    if (!v.is_number()) TypeError(StrCat("bad operand type for abs(): '", v.TypeName(), "'"));
    return v.kind() == Value::Kind::kFloat ? Value(std::fabs(v.number()))
                                           : Value(v.integer() < 0 ? -v.integer() : v.integer());
  }
  if (name == "round") return Round(v, args);
  Value s = StringFilter(name, v, args);
  if (!s.is_undefined()) return s;
  if (UnimplementedFilters().count(name)) Unsupported(StrCat("filter '", name, "'"));
  Fail(StatusCode::kDataLoss, StrCat("no filter named '", name, "'"));
}

bool ApplyTest(std::string_view name, const Value& v, Args& args) {
  auto arg = [&]() { return Arg(args, 0, "", Value::Undefined()); };
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.boolean();
  if (name == "false") return v.kind() == K::kBool && !v.boolean();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "sequence") return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
  if (name == "iterable")
    return v.kind() == K::kList || v.is_string() || v.is_undefined() ||
           (v.is_dict() && !v.is_namespace());
  if (name == "callable") return v.is_function();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    Args none;
    return GetAttr(Value(v.Str()), name == "lower" ? "islower" : "isupper").Call(none).Truthy();
  }
  if (name == "even" || name == "odd") {
    const Value m = Arithmetic("%", v, Value(2));
    if (m.kind() != K::kInt) TypeError("even/odd: an integer is required");
    return (m.integer() == 0) == (name == "even");
  }
  if (name == "divisibleby") return Equal(Arithmetic("%", v, arg()), Value(0));
  if (name == "eq" || name == "equalto" || name == "==") return Equal(v, arg());
  if (name == "ne" || name == "!=") return !Equal(v, arg());
  if (name == "lt" || name == "lessthan" || name == "<") return Compare(v, arg()) < 0;
  if (name == "le" || name == "<=") return Compare(v, arg()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return Compare(v, arg()) > 0;
  if (name == "ge" || name == ">=") return Compare(v, arg()) >= 0;
  if (name == "in") return Contains(arg(), v);
  if (name == "sameas") {
    const Value o = arg();
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.kind() == K::kBool || v.kind() == K::kInt) return Equal(v, o);
    Unsupported("'sameas' on objects other than None, booleans and small integers");
  }
  if (name == "filter" || name == "test") Unsupported(StrCat("test '", name, "'"));
  Fail(StatusCode::kDataLoss, StrCat("no test named '", name, "'"));
}

namespace {

Value Range(Args& a) {
  NoMoreArgs(a, 3, "range", {});
  std::vector<int64_t> p;
  for (const Value& v : a.positional) p.push_back(IntArg(v, "range"));
  if (p.empty()) TypeError("range expected at least 1 argument, got 0");
  const int64_t start = p.size() > 1 ? p[0] : 0;
  const int64_t stop = p.size() > 1 ? p[1] : p[0];
  const int64_t step = p.size() > 2 ? p[2] : 1;
  if (step == 0) TypeError("range() arg 3 must not be zero");
  const double n = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                             static_cast<double>(step));
  if (n > kMaxRange) {
    TypeError(StrCat("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", kMaxRange,
                     ")."));
  }
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value(i));
  return Value(std::move(out));
}

Value Mapping(Args& a, std::string_view fn) {
  Dict d;
  if (a.positional.size() > 1) TypeError(StrCat(fn, " expected at most 1 argument"));
  if (a.positional.size() == 1) {
    if (!a.positional[0].is_dict()) Unsupported(StrCat(fn, "() of a non-mapping"));
    d = a.positional[0].dict();
  }
  for (auto& kw : a.keywords) {
    const std::string& k = kw.first;  // (clang 14 lambdas cannot capture structured bindings)
    auto it = std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first == k; });
    if (it != d.end()) {
      it->second = kw.second;
    } else {
      d.emplace_back(k, kw.second);
    }
  }
  return Value(std::move(d));
}

}  // namespace

Value Global(std::string_view name, std::time_t now) {
  if (name == "range") return Value::Func("range", Range);
  if (name == "namespace") {
    return Value::Func("namespace",
                       [](Args& a) { return Value::Namespace(Mapping(a, "namespace").dict()); });
  }
  if (name == "dict") return Value::Func("dict", [](Args& a) { return Mapping(a, "dict"); });
  if (name == "raise_exception") {
    return Value::Func("raise_exception", [](Args& a) -> Value {
      TypeError(StrCat("the template raised: ", Arg(a, 0, "message", Value("")).Str()));
    });
  }
  if (name == "strftime_now") {
    return Value::Func("strftime_now", [now](Args& a) {
      const std::string fmt = Arg(a, 0, "format", Value::Undefined()).Str();
      if (fmt.size() > 256) TypeError("strftime_now: format too long");
      std::tm local{};
      localtime_r(&now, &local);
      char buf[1024];
      const size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &local);
      return Value(std::string(buf, n));
    });
  }
  if (name == "lipsum" || name == "cycler" || name == "joiner")
    Unsupported(StrCat("global '", name, "'"));
  return Value::Undefined(std::string(name));
}

}  // namespace ocular::jinja

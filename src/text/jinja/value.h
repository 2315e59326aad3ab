// The values a chat template computes with, and how Python (what jinja2 runs on) prints,
// compares and serializes them. Internal to src/text/jinja.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ocular/status.h"

namespace ocular::jinja {

// A template error. The renderer throws it inside the component and turns it into a Status at
// the API boundary (template.cc); `line` is filled in by the innermost node that knows its line.
struct Error {
  StatusCode code;
  std::string message;
  int line = 0;
};
[[noreturn]] void Fail(StatusCode code, std::string message);
// A construct this renderer does not implement (kUnimplemented, exit 5).
[[noreturn]] void Unsupported(std::string_view what);
// What Python raises at render time (TypeError, UndefinedError, ...): kInvalidArgument.
[[noreturn]] void TypeError(std::string message);

class Value;
using List = std::vector<Value>;
// A Python dict: string keys in insertion order.
using Dict = std::vector<std::pair<std::string, Value>>;

// Positional and keyword arguments of a call.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};
using Function = std::function<Value(Args&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  static Value None();
  static Value Undefined(std::string name = "");
  Value(bool b);                                    // NOLINT: implicit by design
  Value(int64_t i);                                 // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double f);                                  // NOLINT
  Value(std::string s);                             // NOLINT
  Value(const char* s) : Value(std::string(s)) {}   // NOLINT
  Value(List list, bool tuple = false);             // NOLINT
  Value(Dict dict);                                 // NOLINT
  static Value Namespace(Dict dict);                // a mutable object shared by reference
  // What Python's map/select/items filters return: an iterator that the first loop over it
  // consumes, with no len() and no repr a template could rely on.
  static Value Generator(List items);
  // dict.items() / keys() / values(): iterable, sized, not subscriptable, not JSON.
  static Value View(List items, std::string type);
  static Value Func(std::string name, Function fn);
  // markupsafe.Markup (what |safe and |escape return): `+` with a plain str HTML-escapes the
  // plain side.
  static Value Markup(std::string s);
  bool is_markup() const { return markup_; }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  // A list or tuple (not a generator or dict view, which share Kind::kList).
  bool is_list() const { return kind_ == Kind::kList && view_.empty(); }
  bool is_generator() const { return view_ == "generator"; }
  const std::string& view() const { return view_; }
  // A generator's unconsumed items, which it then counts as consumed.
  List Consume() const;
  // Takes a generator's next item; false at its end.
  bool Next(Value* item) const;
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_tuple() const { return tuple_; }
  bool is_namespace() const { return ns_; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool boolean() const { return b_; }
  int64_t integer() const { return kind_ == Kind::kBool ? b_ : i_; }  // bool is an int
  double number() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(integer()); }
  const std::string& str() const { return s_; }
  const std::string& undefined_name() const { return s_; }
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }  // namespaces only
  const std::string& function_name() const { return s_; }
  Value Call(Args& args) const { return (*fn_)(args); }

  // d[key] or nullptr.
  const Value* Find(std::string_view key) const;

  // Python bool(x).
  bool Truthy() const;
  // Python str(x) (jinja2 prints undefined as "").
  std::string Str() const;
  // Python repr(x).
  std::string Repr() const;
  // Python type name, for messages.
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  bool ns_ = false;
  bool markup_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;                     // string, undefined name, function name
  std::string view_;                  // kList: "" (list or tuple), "generator", "dict_items", ...
  std::shared_ptr<size_t> consumed_;  // generators: items taken so far
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// Python ==.
bool Equal(const Value& a, const Value& b);
// Python <: -1, 0, 1; TypeError for values Python does not order.
int Compare(const Value& a, const Value& b);

// markupsafe.escape of text: & < > " ' as entities.
std::string HtmlEscape(std::string_view s);

// Python's repr of a float ("1.0", "0.1", "1e-05", "1e+16").
std::string FloatRepr(double f);

// JSON <-> values: objects keep their key order.
Value FromJson(const nlohmann::ordered_json& j);
// json.dumps(x, ensure_ascii, indent, separators, sort_keys) as Python writes it; indent < 0 is
// None; empty separators are the defaults (", " or "," with indent, and ": ").
std::string ToJson(const Value& v, bool ensure_ascii, int indent, std::string item_sep,
                   std::string key_sep, bool sort_keys);

// Unicode code points of UTF-8 text (invalid bytes decode as themselves) and back.
std::u32string Decode(std::string_view s);
std::string Encode(std::u32string_view s);
// Python str.isspace() for one code point.
bool IsPySpace(char32_t c);

}  // namespace ocular::jinja

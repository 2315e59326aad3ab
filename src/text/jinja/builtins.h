// jinja2's filters and tests, the methods of Python's str, list and dict that templates call,
// and the globals of transformers' environment. Internal to src/text/jinja.
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace ocular::jinja {

// Limits that keep a hostile template from exhausting memory or time.
inline constexpr size_t kMaxStringBytes = 16u << 20;
inline constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

// `operand | name(args)`.
Value ApplyFilter(std::string_view name, const Value& operand, Args& args);
// `operand is name(args)`.
bool ApplyTest(std::string_view name, const Value& operand, Args& args);
// jinja2's environment.getattr (obj.name): a method of str, list or dict, else a dict entry,
// else undefined.
Value GetAttr(const Value& obj, std::string_view name);
// jinja2's environment.getitem (obj[key]): an entry, a character or a list element (negative
// indexes count from the end), else undefined.
Value GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] (null parts given as undefined).
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python's `needle in haystack`.
bool Contains(const Value& haystack, const Value& needle);
// Python's binary operators + - * / // % ** on values.
Value Arithmetic(std::string_view op, const Value& a, const Value& b);
// The items a for loop visits: a list's elements, a dict's keys, a string's characters.
List Iterate(const Value& v);

// The globals: range, namespace, dict, raise_exception and strftime_now (formatted at `now`,
// local time, as Python's datetime.now().strftime).
Value Global(std::string_view name, std::time_t now);

// Takes the argument `name` (keyword, else position `index`) out of `args`, or `fallback`.
Value Arg(Args& args, size_t index, std::string_view name, Value fallback);
// Fails when `args` holds more than `max_positional` positional or any unknown keyword.
void NoMoreArgs(const Args& args, size_t max_positional, std::string_view fn,
                std::initializer_list<std::string_view> keywords);

}  // namespace ocular::jinja

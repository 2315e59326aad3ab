// Names of an enum's values from one table, for the enums a user reads or types (status codes,
// precisions, image formats, stages): the name and the parse come from the same rows, so they
// cannot drift apart.
//   constexpr EnumName<Precision> kNames[] = {{Precision::kF32, "f32"}, ...};
//   NameOf(p, kNames, "?");  ParseEnum("f32", kNames, &p);
#pragma once

#include <cstddef>
#include <string_view>

namespace ocular {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value` in `table`, or `unknown` when no row holds it.
template <typename E, size_t N>
constexpr const char* NameOf(E value, const EnumName<E> (&table)[N], const char* unknown) {
  for (const EnumName<E>& row : table) {
    if (row.value == value) return row.name;
  }
  return unknown;
}

// Sets *out to the value named `name` (exactly, case-sensitive); false when no row has it.
template <typename E, size_t N>
bool ParseEnum(std::string_view name, const EnumName<E> (&table)[N], E* out) {
  for (const EnumName<E>& row : table) {
    if (name == row.name) {
      *out = row.value;
      return true;
    }
  }
  return false;
}

}  // namespace ocular

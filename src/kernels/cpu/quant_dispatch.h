// The quantized kernels' dispatch on the weight format: one template instance per format.
#pragma once

#include <type_traits>

#include "core/check.h"
#include "core/matrix.h"

namespace ocular::cpu {

template <WFormat kF>
using FormatTag = std::integral_constant<WFormat, kF>;

// fn(FormatTag<f>{}) (decltype(tag)::value is then f as a constant) for a quantized format f:
// q8_0, q4_0, q5_0, q4_k or q6_k; any other fails a CHECK.
template <class Fn>
void ForQuantFormat(WFormat f, const Fn& fn) {
  switch (f) {
    case WFormat::kQ8_0:
      return fn(FormatTag<WFormat::kQ8_0>{});
    case WFormat::kQ4_0:
      return fn(FormatTag<WFormat::kQ4_0>{});
    case WFormat::kQ5_0:
      return fn(FormatTag<WFormat::kQ5_0>{});
    case WFormat::kQ4_K:
      return fn(FormatTag<WFormat::kQ4_K>{});
    case WFormat::kQ6_K:
      return fn(FormatTag<WFormat::kQ6_K>{});
    default:
      OCULAR_CHECK(false, "HINT: quantized weights only");
  }
}

}  // namespace ocular::cpu

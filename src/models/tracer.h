// Named activation taps: the contract between the forward passes and the parity debugger.
// Tap names and meanings are listed in docs/testing.md ("Tap naming scheme").
// Forward passes build a tap's name and shape only when a tracer listens (no allocation on
// the untraced path).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/tensor.h"

namespace ocular {

class Tracer {
 public:
  virtual ~Tracer() = default;
  // Receives a copy-able view of an f32 intermediate; must not keep the pointer.
  virtual void Tap(const std::string& name, const float* data, const Shape& shape) = 0;
};

inline void Tap(Tracer* tracer, const char* name, const float* data,
                std::initializer_list<int64_t> shape) {
  if (tracer) tracer->Tap(name, data, Shape(shape));
}

// Taps "<prefix><index>", e.g. "decoder.layers.3".
inline void TapIndexed(Tracer* tracer, const char* prefix, int index, const float* data,
                       std::initializer_list<int64_t> shape) {
  if (tracer) tracer->Tap(prefix + std::to_string(index), data, Shape(shape));
}

}  // namespace ocular

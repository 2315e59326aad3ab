// Named activation taps: the contract between the forward passes and the parity debugger.
// Tap names and meanings are listed in docs/testing.md ("Tap naming scheme").
#pragma once

#include <string>

#include "core/tensor.h"

namespace ocular {

class Tracer {
 public:
  virtual ~Tracer() = default;
  // Receives a copy-able view of an f32 intermediate; must not keep the pointer.
  virtual void Tap(const std::string& name, const float* data, const Shape& shape) = 0;
};

inline void TapIf(Tracer* tracer, const std::string& name, const float* data, const Shape& shape) {
  if (tracer) tracer->Tap(name, data, shape);
}

}  // namespace ocular

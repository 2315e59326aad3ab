// Named sub-taps of a block (as llama.cpp's cb(cur, "attn_norm", il)): a block taps
// "<prefix><index>.<what>", e.g. "decoder.layers.3.attn_norm", through the model's tracer.
// Names are built only when a tracer listens; the untraced path costs one branch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "models/tracer.h"

namespace ocular::blocks {

struct Taps {
  Tracer* tracer = nullptr;
  const char* prefix = "";  // "decoder.layers."
  int index = 0;            // the layer

  void operator()(const char* what, const float* data, std::initializer_list<int64_t> shape) const {
    if (tracer == nullptr) return;
    tracer->Tap(prefix + std::to_string(index) + "." + what, data, Shape(shape));
  }
  bool on() const { return tracer != nullptr; }
};

}  // namespace ocular::blocks

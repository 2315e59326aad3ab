// Internal to models/mllama/: the tanh gates of mllama's vision and cross-attention layers,
// computed as torch does on one-element tensors of the activation dtype.
#pragma once

#include <cmath>

#include "core/half.h"
#include "core/tensor.h"
#include "kernels/exec.h"
#include "kernels/ops.h"

namespace ocular::mllama {

// v as the activation dtype holds it (rounded to bf16 under Precision::kBF16).
inline float Round(const Exec& ex, float v) {
  return ex.round_bf16() ? BF16ToF32(F32ToBF16(v)) : v;
}

// gate.tanh(): a one-element tensor of the activation dtype.
inline float Tanh(const Exec& ex, const TensorView& gate) {
  float g;
  ops::ToF32(ex, gate, 0, 1, &g);
  return Round(ex, std::tanh(g));
}

}  // namespace ocular::mllama

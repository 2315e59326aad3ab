// Normalization blocks: the three norms the families use, as data.
//   kGemmaRms  y = x * rsqrt(mean(x^2) + eps) * (1 + w)   (GemmaRMSNorm, f32 throughout)
//   kLlamaRms  y = w * (x * rsqrt(mean(x^2) + eps)).to(dtype)  (LlamaRMSNorm / MllamaTextRMSNorm:
//              under bf16 the normalized value is rounded before the weight multiplies it)
//   kLayer     y = (x - mean) / sqrt(var + eps) * w + b  (nn.LayerNorm, biased variance)
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"
#include "kernels/exec.h"

namespace ocular::blocks {

enum class NormKind : uint8_t { kGemmaRms, kLlamaRms, kLayer };

// Views, not copies: a forward pass builds Norms per call and must not allocate.
struct Norm {
  NormKind kind = NormKind::kGemmaRms;
  const TensorView* w = nullptr;  // [dim]
  const TensorView* b = nullptr;  // [dim] kLayer only
  float eps = 1e-6f;
};

// y[rows, dim] = norm(x) row by row; y may equal x.
void ApplyNorm(const Exec& ex, const Norm& n, const float* x, int64_t rows, int64_t dim, float* y);

// Arena bytes ApplyNorm takes (kLlamaRms under bf16: a unit weight and the f32 weight).
size_t NormBytes(NormKind kind, int64_t dim);

}  // namespace ocular::blocks

#include "models/blocks/norm.h"

#include <algorithm>
#include <deque>
#include <vector>

#include "core/check.h"
#include "kernels/ops.h"
#include "models/blocks/scratch.h"

namespace ocular::blocks {

namespace {

constexpr int64_t kMaxUnitWeight = 65536;

// LlamaRmsNorm's bf16 path: the weight in f32.
struct LlamaNormBuffers {
  LlamaNormBuffers(Scratch& s, int64_t dim) : w(s.Floats(dim)) {}
  float* w;
};

// An F32 view of `dim` ones (the unit weight), made once per thread and size, so that a
// forward pass does not allocate.
const TensorView& UnitWeight(int64_t dim) {
  static const std::vector<float> ones(kMaxUnitWeight, 1.0f);
  OCULAR_CHECK(dim <= kMaxUnitWeight, "HINT: a norm wider than kMaxUnitWeight");
  thread_local std::deque<TensorView> views;
  for (const TensorView& v : views) {
    if (v.shape[0] == dim) return v;
  }
  views.push_back(TensorView{ones.data(), DType::kF32, {dim}});
  return views.back();
}

// MllamaTextRMSNorm: weight * hidden.to(input_dtype), hidden = x * rsqrt(mean(x^2) + eps).
void LlamaRmsNorm(const Exec& ex, const Norm& n, const float* x, int64_t rows, int64_t dim,
                  float* y) {
  if (!ex.round_bf16()) {  // f32: one op, the weight multiplies the f32 value
    ops::RmsNorm(ex, x, rows, dim, *n.w, n.eps, /*add_one=*/false, y);
    return;
  }
  Scratch s(ex.arena);
  LlamaNormBuffers b(s, dim);
  ops::RmsNorm(ex, x, rows, dim, UnitWeight(dim), n.eps, false, y);  // (x * rsqrt(...)).to(bf16)
  ops::ToF32(ex, *n.w, 0, dim, b.w);
  for (int64_t r = 0; r < rows; ++r) ops::Mul(ex, y + r * dim, b.w, y + r * dim, dim);  // w * ...
}

}  // namespace

void ApplyNorm(const Exec& ex, const Norm& n, const float* x, int64_t rows, int64_t dim, float* y) {
  switch (n.kind) {
    case NormKind::kGemmaRms:
      ops::RmsNorm(ex, x, rows, dim, *n.w, n.eps, /*add_one=*/true, y);
      return;
    case NormKind::kLlamaRms:
      LlamaRmsNorm(ex, n, x, rows, dim, y);
      return;
    case NormKind::kLayer:
      ops::LayerNorm(ex, x, rows, dim, *n.w, *n.b, n.eps, y);
      return;
  }
}

size_t NormBytes(NormKind kind, int64_t dim) {
  return kind == NormKind::kLlamaRms ? BuffersBytes<LlamaNormBuffers>(dim) : 0;
}

}  // namespace ocular::blocks

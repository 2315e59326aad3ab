#include "models/blocks/mlp.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "kernels/ops.h"
#include "models/blocks/scratch.h"

namespace ocular::blocks {

namespace {

struct MlpBuffers {
  MlpBuffers(Scratch& s, const MlpSpec& m, int64_t rows)
      : h(s.Floats(rows * m.inner)), up(m.gated ? s.Floats(rows * m.inner) : nullptr) {}
  float* h;   // gate / fc1 output
  float* up;  // up_proj output (gated)
};

float Round(const Exec& ex, float v) { return ex.round_bf16() ? BF16ToF32(F32ToBF16(v)) : v; }

}  // namespace

MlpAct ToMlpAct(Activation a) {
  return a == Activation::kGeluTanh ? MlpAct::kGeluTanh : MlpAct::kGeluErf;
}

void Activate(const Exec& ex, MlpAct act, float* x, int64_t n) {
  switch (act) {
    case MlpAct::kGeluTanh:
      ops::GeluTanh(ex, x, n);
      return;
    case MlpAct::kGeluErf:
      ops::GeluErf(ex, x, n);
      return;
    case MlpAct::kSilu:  // torch: x / (1 + exp(-x)); the kernels' Exp (<= 3 ulp) might flip bf16
      for (int64_t i = 0; i < n; ++i) x[i] = Round(ex, x[i] / (1.0f + std::exp(-x[i])));
      return;
    case MlpAct::kQuickGelu:  // x * torch.sigmoid(1.702 * x), each op rounded as torch's
      for (int64_t i = 0; i < n; ++i) {
        const float t = Round(ex, 1.702f * x[i]);
        x[i] = Round(ex, x[i] * Round(ex, 1.0f / (1.0f + std::exp(-t))));
      }
      return;
  }
}

void Mlp(const Exec& ex, const MlpSpec& m, const MlpWeights& w, const float* x, int64_t rows,
         float* out) {
  const int64_t H = m.hidden, I = m.inner, n = rows * I;
  Scratch s(ex.arena);
  MlpBuffers b(s, m, rows);
  if (m.gated) {
    // gate, up = gate_proj(x), up_proj(x); h = act(gate) * up
    ops::MatMuls(ex, x, rows, H, H, {{w.w1, w.b1, b.h, I}, {w.up, w.up_b, b.up, I}});
    Activate(ex, m.act, b.h, n);
    ops::Mul(ex, b.h, b.up, b.h, n);
  } else {
    ops::MatMul(ex, x, rows, H, H, *w.w1, w.b1, b.h, I);  // h = act(fc1(x))
    Activate(ex, m.act, b.h, n);
  }
  ops::MatMul(ex, b.h, rows, I, I, *w.w2, w.b2, out, H);  // out = down_proj(h) / fc2(h)
}

size_t MlpBytes(const MlpSpec& m, int64_t rows, int threads) {
  return BuffersBytes<MlpBuffers>(m, rows) +
         FloatBytes(ops::MatMulArenaFloats(threads, rows, std::max(m.hidden, m.inner)));
}

}  // namespace ocular::blocks

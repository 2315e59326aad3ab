// The feed-forward blocks, configured by data (MlpSpec):
//   gated (GeGLU, SwiGLU):  out = down(act(gate(x)) * up(x))      (GemmaMLP, LlamaMLP;
//                           Qwen2_5_VLMLP with biases)
//   two-layer:              out = fc2(act(fc1(x) + b1)) + b2       (SiglipMLP, CLIPMLP)
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/matrix.h"
#include "core/tensor.h"
#include "kernels/exec.h"
#include "models/config.h"

namespace ocular::blocks {

enum class MlpAct : uint8_t {
  kGeluTanh,   // gelu_pytorch_tanh
  kGeluErf,    // gelu (exact)
  kSilu,       // silu: x / (1 + exp(-x)) with libm's exp, as torch (bf16 taps bit-identical)
  kQuickGelu,  // quick_gelu: x * sigmoid(1.702 x) = x / (1 + exp(-1.702 x))
};
MlpAct ToMlpAct(Activation a);

struct MlpSpec {
  int64_t hidden = 0, inner = 0;  // x: [rows, hidden]; the inner activation [rows, inner]
  MlpAct act = MlpAct::kGeluTanh;
  bool gated = true;
};

struct MlpWeights {
  const Matrix* w1 = nullptr;        // gate_proj / fc1  [inner, hidden]
  const TensorView* b1 = nullptr;    // fc1 bias (nullable)
  const Matrix* up = nullptr;        // up_proj [inner, hidden] (gated only)
  const Matrix* w2 = nullptr;        // down_proj / fc2  [hidden, inner]
  const TensorView* b2 = nullptr;    // fc2 / down_proj bias (nullable)
  const TensorView* up_b = nullptr;  // up_proj bias (nullable; Qwen2.5-VL's ViT)
};

// out[rows, hidden] = mlp(x[rows, hidden]).
void Mlp(const Exec& ex, const MlpSpec& m, const MlpWeights& w, const float* x, int64_t rows,
         float* out);
size_t MlpBytes(const MlpSpec& m, int64_t rows, int threads);

// In place on x[n]: the activation (the kernels' for the GELUs, libm's exp for the others,
// each result rounded to the activation dtype).
void Activate(const Exec& ex, MlpAct act, float* x, int64_t n);

}  // namespace ocular::blocks

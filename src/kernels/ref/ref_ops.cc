#include "kernels/ref/ref_ops.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/half.h"

namespace ocular::ref {

float ElementAsF32(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(data)[i];
    case DType::kBF16:
      return BF16ToF32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(data)[i]);
    default:
      OCULAR_CHECK(false, "HINT: kernels take F32, BF16 or F16 weights");
  }
  return 0.0f;
}

namespace {
// Element i of a float-format matrix row.
float RowElement(const Matrix& w, int64_t r, int64_t i) {
  OCULAR_CHECK(w.format == WFormat::kF32 || w.format == WFormat::kBF16 || w.format == WFormat::kF16,
               "HINT: the scalar table has no kernel for this format");
  const DType t = w.format == WFormat::kF32    ? DType::kF32
                  : w.format == WFormat::kBF16 ? DType::kBF16
                                               : DType::kF16;
  return ElementAsF32(w.row(r), t, i);
}
inline float R(float x) { return BF16ToF32(F32ToBF16(x)); }
}  // namespace

void MatMulBlock(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                 int64_t n1, float* out, int64_t ldo, float* /*scratch*/) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = n0; n < n1; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k)
        sum += static_cast<double>(a[m * lda + k]) * RowElement(w, n, k);
      out[m * ldo + n] = static_cast<float>(sum);
    }
  }
}

void RowToF32(const Matrix& w, int64_t r, float* out) {
  for (int64_t i = 0; i < w.cols; ++i) out[i] = RowElement(w, r, i);
}

void RoundBF16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = R(x[i]);
}

// HF GemmaRMSNorm / LlamaRMSNorm (modeling_gemma.py, modeling_llama.py):
//   x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), then * (1 + w) or w * (...).
// torch's rsqrt on CPU is 1 / sqrt(v) in f32.
void RmsNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, float eps,
             bool add_one, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float mean_sq = static_cast<float>(sum_sq / static_cast<double>(dim));
    const float inv_rms = 1.0f / std::sqrt(mean_sq + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const float wi = ElementAsF32(w.data, w.dtype, i);
      yr[i] = (xr[i] * inv_rms) * (add_one ? 1.0f + wi : wi);
    }
  }
}

// torch's CPU layer_norm kernel (aten/src/ATen/native/cpu/layer_norm_kernel.cpp):
//   scale = 1 / sqrt(var + eps), bias = -scale * mean, y = (x * scale + bias) * w + b.
void LayerNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, const TensorView& b,
               float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const double mean = sum / static_cast<double>(dim);
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += (xr[i] - mean) * (xr[i] - mean);
    const float var = static_cast<float>(sum_sq / static_cast<double>(dim));
    const float scale = 1.0f / std::sqrt(var + eps);
    const float bias = -scale * static_cast<float>(mean);
    for (int64_t i = 0; i < dim; ++i) {
      yr[i] = (xr[i] * scale + bias) * ElementAsF32(w.data, w.dtype, i) +
              ElementAsF32(b.data, b.dtype, i);
    }
  }
}

// torch GeluKernelImpl, approximate="tanh" (aten/src/ATen/native/cpu/Activation.cpp):
//   inner = kBeta * (x + kKappa * x³); y = 0.5 * x * (1 + tanh(inner)).
void GeluTanh(float* x, int64_t n) {
  constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
  constexpr float kKappa = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float cube = v * v * v;
    const float inner = kBeta * (v + kKappa * cube);
    x[i] = 0.5f * v * (1.0f + std::tanh(inner));
  }
}

// torch GeluKernelImpl, exact: y = x * 0.5 * (1 + erf(x / √2)).
void GeluErf(float* x, int64_t n) {
  constexpr float kAlpha = static_cast<float>(M_SQRT1_2);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = v * 0.5f * (1.0f + std::erf(v * kAlpha));
  }
}

void Mul(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void Add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Scale(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

// Gemma 2 soft-capping (modeling_gemma2.py): x = x / cap; x = tanh(x); x = x * cap.
void SoftCap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] / cap) * cap;
}

// HF apply_rotary_pos_emb: q * cos + rotate_half(q) * sin, each product rounded to f32
// before the sum (torch evaluates them as separate tensors).
void RopeRow(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t k = 0; k < half; ++k) {
      const float x1 = xh[k];
      const float x2 = xh[k + half];
      const float x1c = x1 * cos[k], x2s = x2 * sin[k];
      const float x2c = x2 * cos[k], x1s = x1 * sin[k];
      xh[k] = x1c - x2s;
      xh[k + half] = x2c + x1s;
    }
  }
}

// rotate_half RoPE as HF computes it on bf16 q/k (modeling_gemma.py apply_rotary_pos_emb):
// cos/sin already bf16; x*cos and rotate_half(x)*sin each rounded, then the sum rounded.
void RopeRowBF16(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t k = 0; k < half; ++k) {
      const float x1 = xh[k], x2 = xh[k + half];
      // q_embed = (q * cos) + (rotate_half(q) * sin), rotate_half(q) = cat(-x2, x1)
      xh[k] = R(R(x1 * cos[k]) + R(-x2 * sin[k]));
      xh[k + half] = R(R(x2 * cos[k]) + R(x1 * sin[k]));
    }
  }
}

// HF GemmaRotaryEmbedding: inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim)),
// freqs = inv_freq.float() @ position_ids.float() (one f32 product each), cos/sin in f32.
void RopeCosSin(int64_t pos, int64_t head_dim, float theta, float* cos, float* sin,
                float inv_freq_divisor) {
  const float pos_f = static_cast<float>(pos);
  for (int64_t k = 0; k < head_dim / 2; ++k) {
    const float exponent = static_cast<float>(2 * k) / static_cast<float>(head_dim);
    // x / 1.0f == x exactly: plain RoPE is unchanged by the divisor.
    const float inv_freq = 1.0f / std::pow(theta, exponent) / inv_freq_divisor;
    const float angle = pos_f * inv_freq;
    cos[k] = std::cos(angle);
    sin[k] = std::sin(angle);
  }
}

// HF eager attention (modeling_gemma2.py eager_attention_forward):
//   w = (q @ kᵀ) * scaling; softcap; + mask; softmax(dim=-1, float32); out = w @ v.
// torch's softmax: e = exp(x - max), p = e * (1 / sum(e)).
// With round_bf16, as torch runs it on bf16 tensors: scores = bf16(q·k), then bf16(s * scale);
// softcap as three rounded ops (/cap, tanh, *cap); softmax in f32 then bf16; out = bf16(p·v)
// (dot products accumulate in f32 there, as torch's bf16 matmul does).
namespace {

float KvElement(const kernels::AttentionArgs& p, const void* base, int64_t ld, int64_t t,
                int64_t i) {
  const int64_t row = p.kv_ring > 0 ? t % p.kv_ring : t;
  if (p.kv_bf16) return BF16ToF32(static_cast<const uint16_t*>(base)[row * ld + i]);
  return static_cast<const float*>(base)[row * ld + i];
}

void AttentionOne(const kernels::AttentionArgs& p, int64_t i, int64_t h, int64_t kvh,
                  float* scratch) {
  const float* qi = p.q + i * p.ldq + h * p.d;
  float* oi = p.out + i * p.ldo + h * p.d;
  const int64_t t0 = p.key_begin[i], t1 = p.key_end[i];
  const bool bf = p.round_bf16;
  float max_score = -INFINITY;
  for (int64_t t = t0; t < t1; ++t) {
    double dot = 0.0;
    for (int64_t j = 0; j < p.d; ++j)
      dot += static_cast<double>(qi[j]) * KvElement(p, p.k, p.ldk, t, kvh * p.d + j);
    float s;
    if (bf) {
      s = R(R(static_cast<float>(dot)) * p.scale);
      if (p.softcap > 0.0f) s = R(R(std::tanh(R(s / p.softcap))) * p.softcap);
    } else {
      s = static_cast<float>(dot) * p.scale;
      if (p.softcap > 0.0f) s = std::tanh(s / p.softcap) * p.softcap;
    }
    scratch[t - t0] = s;
    max_score = std::fmax(max_score, s);
  }
  double sum = 0.0;
  for (int64_t t = t0; t < t1; ++t) {
    scratch[t - t0] = std::exp(scratch[t - t0] - max_score);
    sum += scratch[t - t0];
  }
  const float inv_sum = t1 > t0 ? 1.0f / static_cast<float>(sum) : 0.0f;
  for (int64_t t = t0; t < t1; ++t) {
    scratch[t - t0] *= inv_sum;
    if (bf) scratch[t - t0] = R(scratch[t - t0]);
  }
  for (int64_t j = 0; j < p.d; ++j) {
    double acc = 0.0;
    for (int64_t t = t0; t < t1; ++t) {
      acc += static_cast<double>(scratch[t - t0]) * KvElement(p, p.v, p.ldv, t, kvh * p.d + j);
    }
    oi[j] = bf ? R(static_cast<float>(acc)) : static_cast<float>(acc);
  }
}

}  // namespace

void AttentionItems(const kernels::AttentionArgs& p, int64_t begin, int64_t end, float* scratch) {
  const int64_t group = p.Hq / p.Hkv;
  for (int64_t item = begin; item < end; ++item) {
    const kernels::AttentionItem it = kernels::AttentionItemAt(p.Tq, p.Hq, p.Hkv, item);
    for (int64_t h = it.h_begin; h < it.h_end; ++h) {
      for (int64_t i = it.i_begin; i < it.i_end; ++i) AttentionOne(p, i, h, h / group, scratch);
    }
  }
}

void ToF32(const void* data, DType dtype, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = ElementAsF32(data, dtype, i);
}

const kernels::KernelTable& Table() {
  // Set by name (the Highway tables list the same functions by position). No scalar bf16 dot
  // products (matmul_bf16_dot, pack_bf16, gemm_bf16, attention_dot_items, matmul_bf16_rows),
  // and MatMulQuant quantizes its own rows (quantize_act_row, matmul_quant_rows) and reads the
  // weights as stored (packed_weight_bytes, pack_weights): null.
  static const kernels::KernelTable table = [] {
    kernels::KernelTable t{};
    t.name = "scalar";
    for (int f = 0; f < kNumWFormats; ++f) {
      const bool quantized = WFormatBlockValues(static_cast<WFormat>(f)) > 1;
      t.matmul[f] = quantized ? MatMulQuant : MatMulBlock;
      t.row_to_f32[f] = quantized ? RowToF32Quant : RowToF32;
      t.matmul_f32_act[f] = quantized ? MatMulQuantF32 : nullptr;
    }
    t.rms_norm = RmsNorm, t.layer_norm = LayerNorm, t.gelu_tanh = GeluTanh;
    t.gelu_erf = GeluErf, t.mul = Mul, t.add = Add, t.scale = Scale, t.soft_cap = SoftCap;
    t.round_bf16 = RoundBF16, t.rope_row = RopeRow, t.rope_row_bf16 = RopeRowBF16;
    t.attention_items = AttentionItems, t.to_f32 = ToF32;
    return t;
  }();
  return table;
}

}  // namespace ocular::ref

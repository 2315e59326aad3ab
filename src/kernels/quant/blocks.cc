#include "kernels/quant/blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/half.h"

// Compiled with -ffp-contract=off (kernels/CMakeLists.txt): every a * b + c below rounds twice,
// as numpy does, so the formulas are bit-exact wherever they must be.

namespace ocular::quant {

uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf, or NaN (keeps the top of the payload, stays a NaN)
    if (abs == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    uint32_t h = 0x7c00u + ((abs & 0x7fffffu) >> 13);
    if (h == 0x7c00u) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (abs < 0x33000000u) return static_cast<uint16_t>(sign);             // <= 2^-25: zero
  const uint32_t exp = abs >> 23;
  uint32_t mant = abs & 0x7fffffu;
  uint32_t h, shift;
  if (exp < 113) {  // below 2^-14: an f16 subnormal, in units of 2^-24
    mant |= 0x800000u;
    shift = 126 - exp;
    h = mant >> shift;
  } else {
    shift = 13;
    h = ((exp - 112) << 10) | (mant >> 13);
  }
  // Round to nearest even on the dropped bits; a carry into the exponent is correct.
  const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

namespace {

inline float F16(uint16_t h) { return F16ToF32(h); }

// ggml's nearest_int: round to nearest even through the 1.5·2^23 trick (exact for
// |f| <= 2^22; defined, if meaningless, for any other input).
inline int NearestInt(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// ------------------------------------------------------------------ Q8_0, Q4_0

// gguf-py Q8_0.quantize_blocks (= ggml quantize_row_q8_0_ref): d = amax / 127, q = round
// half away from zero (np_roundf / roundf) of x * (1 / d).
void QuantizeQ8_0(const float* x, int64_t blocks, BlockQ8_0* y) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int j = 0; j < kQK8_0; ++j) {
      const float q = std::round(x[j] * id);
      y[b].qs[j] = static_cast<int8_t>(q >= 127.0f    ? 127
                                       : q <= -128.0f ? -128
                                                      : static_cast<int>(q));
    }
  }
}

// gguf-py's Q4_0 / Q5_0 quantize_blocks, one block of 32: d = max / -(levels / 2) with max the
// signed value of largest magnitude (first one on ties); q = trunc(f32(f64(x) * f64(1 / d) +
// levels / 2 + 0.5)), clipped to levels - 1 (gguf-py evaluates x * id + offset in double to
// emulate ggml's FMA-contracted C; we do the same). Returns d.
float QuantizeSmallBlock(const float* x, int levels, uint8_t (&q)[kQK8_0]) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK8_0; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -static_cast<float>(levels / 2);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const double offset = levels / 2 + 0.5;
  const float top = static_cast<float>(levels - 1);
  for (int j = 0; j < kQK8_0; ++j) {
    const float v =
        static_cast<float>(static_cast<double>(x[j]) * static_cast<double>(id) + offset);
    q[j] = static_cast<uint8_t>(v >= top ? levels - 1 : v > 0.0f ? static_cast<int>(v) : 0);
  }
  return d;
}

// Values j and j + 16 of the block as the low and high nibbles of byte j.
void PackNibbles(const uint8_t (&q)[kQK8_0], uint8_t* qs) {
  for (int j = 0; j < kQK8_0 / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | (q[j + kQK8_0 / 2] << 4));
  }
}

void QuantizeQ4_0(const float* x, int64_t blocks, BlockQ4_0* y) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK8_0) {
    uint8_t q[kQK8_0];
    y[b].d = F32ToF16(QuantizeSmallBlock(x, 16, q));
    PackNibbles(q, y[b].qs);
  }
}

// Q5_0: levels 32; low nibbles as Q4_0, bit 4 of value j in bit j of qh (little-endian).
void QuantizeQ5_0(const float* x, int64_t blocks, BlockQ5_0* y) {
  for (int64_t b = 0; b < blocks; ++b, x += kQK8_0) {
    uint8_t q[kQK8_0];
    y[b].d = F32ToF16(QuantizeSmallBlock(x, 32, q));
    uint32_t qh = 0;
    for (int j = 0; j < kQK8_0; ++j) qh |= static_cast<uint32_t>(q[j] >> 4) << j;
    PackNibbles(q, y[b].qs);
    std::memcpy(y[b].qh, &qh, 4);
  }
}

// ------------------------------------------------------------------ Q4_K

// ggml make_qkx2_quants (ggml/src/ggml-quants.c): an asymmetric n-value quantization
// x ≈ scale * L - min, L in [0, nmax]: start from the min/max fit, then try nstep + 1
// rescaled grids, each refitted (weighted least squares for scale and min), keeping the one
// with the least weighted squared error. Returns scale; *the_min = the (positive) min.
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// ggml quantize_row_q4_K_ref: per 32-value sub-block an asymmetric 4-bit fit (weights
// rms + |x|, grids rmin -1, step 0.1, 20 steps); the eight scales and mins quantized to 6 bits
// against the block's largest (d, dmin = largest / 63); then every value re-quantized against
// the scales as stored.
void QuantizeQ4_K(const float* x, int64_t blocks, BlockQ4_K* y) {
  uint8_t L[kQK_K], Laux[32];
  float weights[32], mins[kQK_K / 32], scales[kQK_K / 32];
  for (int64_t b = 0; b < blocks; ++b, x += kQK_K) {
    BlockQ4_K& blk = y[b];
    float max_scale = 0, max_min = 0;  // the min is subtracted, so scales are positive
    for (int j = 0; j < kQK_K / 32; ++j) {
      const float* xs = x + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
      scales[j] = MakeQkx2Quants(32, 15, xs, weights, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < kQK_K / 32; ++j) {
      const uint8_t ls =
          std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
      const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
      if (j < 4) {
        blk.scales[j] = ls;
        blk.scales[j + 4] = lm;
      } else {
        blk.scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        blk.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        blk.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    blk.d = F32ToF16(max_scale / 63.0f);
    blk.dmin = F32ToF16(max_min / 63.0f);
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t sc, m;
      Q4KScaleMin(blk.scales, j, &sc, &m);
      const float d = F16(blk.d) * sc;
      if (d == 0.0f) continue;
      const float dm = F16(blk.dmin) * m;
      for (int i = 0; i < 32; ++i) {
        const int l = NearestInt((x[32 * j + i] + dm) / d);
        L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(15, l)));
      }
    }
    for (int c = 0; c < kQK_K / 64; ++c) {
      for (int l = 0; l < 32; ++l) {
        blk.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + l + 32] << 4));
      }
    }
  }
}

// ------------------------------------------------------------------ Q6_K

// ggml make_qx_quants with rmse_type 1 and no importance weights: a symmetric fit
// x ≈ scale * (L - nmax), L in [0, 2·nmax), weighted by x², over 19 grids around nmax / max.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {  // GROUP_MAX_EPS: all zero
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ggml quantize_row_q6_K_ref: a symmetric 6-bit fit per 16 values (make_qx_quants, nmax 32),
// the sixteen scales quantized to int8 against the one of largest magnitude
// (d = -max_scale / 128), then every value re-quantized against the scales as stored.
void QuantizeQ6_K(const float* x, int64_t blocks, BlockQ6_K* y) {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t b = 0; b < blocks; ++b, x += kQK_K) {
    BlockQ6_K& blk = y[b];
    float max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < kQK_K / 16; ++g) {
      scales[g] = MakeQxQuants(16, 32, x + 16 * g, L + 16 * g);
      const float abs_scale = std::fabs(scales[g]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[g];
      }
    }
    if (max_abs_scale < 1e-15f) {
      std::memset(&blk, 0, sizeof(blk));
      continue;
    }
    const float iscale = -128.0f / max_scale;
    blk.d = F32ToF16(1 / iscale);
    for (int g = 0; g < kQK_K / 16; ++g) {
      blk.scales[g] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[g])));
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      const float d = F16(blk.d) * blk.scales[g];
      if (d == 0.0f) continue;
      for (int i = 0; i < 16; ++i) {
        const int l = NearestInt(x[16 * g + i] / d);
        L[16 * g + i] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {  // two halves of 128 values
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = blk.ql + 64 * h;
      uint8_t* qh = blk.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                     ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

// ------------------------------------------------------------------ dequantize

void DequantizeQ8_0(const BlockQ8_0* x, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQK8_0) {
    const float d = F16(x[b].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

void DequantizeQ4_0(const BlockQ4_0* x, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQK8_0) {
    const float d = F16(x[b].d);
    for (int j = 0; j < kQK8_0 / 2; ++j) {
      y[j] = d * static_cast<float>((x[b].qs[j] & 0xF) - 8);
      y[j + kQK8_0 / 2] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
    }
  }
}

void DequantizeQ5_0(const BlockQ5_0* x, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQK8_0) {
    const float d = F16(x[b].d);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < kQK8_0 / 2; ++j) {
      const int lo = (x[b].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (x[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(lo - 16);
      y[j + kQK8_0 / 2] = d * static_cast<float>(hi - 16);
    }
  }
}

void DequantizeQ4_K(const BlockQ4_K* x, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQK_K) {
    const float d = F16(x[b].d), dmin = F16(x[b].dmin);
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t sc, m;
      Q4KScaleMin(x[b].scales, j, &sc, &m);
      const float dl = d * sc, ml = dmin * m;
      const uint8_t* q = x[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l)
        y[32 * j + l] = dl * static_cast<float>((q[l] >> shift) & 0xF) - ml;
    }
  }
}

void DequantizeQ6_K(const BlockQ6_K* x, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQK_K) {
    const float d = F16(x[b].d);
    for (int v = 0; v < kQK_K; ++v) {
      const int h = v / 128, r = v % 128;
      const int lo = (x[b].ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
      const int hi = (x[b].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      const float dl = d * static_cast<float>(x[b].scales[v / 16]);
      y[v] = dl * static_cast<float>((lo | (hi << 4)) - 32);
    }
  }
}

// Blocks are built on the stack and copied, one at a time: a row is only byte-aligned.
template <typename Block>
void EncodeBlocks(void (*quantize)(const float*, int64_t, Block*), const float* x, int64_t blocks,
                  int64_t bv, std::byte* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    Block blk;
    quantize(x + b * bv, 1, &blk);
    std::memcpy(out + b * sizeof(blk), &blk, sizeof(blk));
  }
}
template <typename Block>
void DecodeBlocks(void (*dequantize)(const Block*, int64_t, float*), const std::byte* row,
                  int64_t blocks, int64_t bv, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    Block blk;
    std::memcpy(&blk, row + b * sizeof(blk), sizeof(blk));
    dequantize(&blk, 1, out + b * bv);
  }
}

// fn(codec) with the block format f's quantizer and dequantizer (one block each: rows are only
// byte-aligned, so blocks are copied in and out).
template <typename Block>
struct Codec {
  void (*quantize)(const float*, int64_t, Block*);
  void (*dequantize)(const Block*, int64_t, float*);
};
template <class Fn>
void WithCodec(WFormat f, const Fn& fn) {
  switch (f) {
    case WFormat::kQ8_0:
      return fn(Codec<BlockQ8_0>{QuantizeQ8_0, DequantizeQ8_0});
    case WFormat::kQ4_0:
      return fn(Codec<BlockQ4_0>{QuantizeQ4_0, DequantizeQ4_0});
    case WFormat::kQ5_0:
      return fn(Codec<BlockQ5_0>{QuantizeQ5_0, DequantizeQ5_0});
    case WFormat::kQ4_K:
      return fn(Codec<BlockQ4_K>{QuantizeQ4_K, DequantizeQ4_K});
    case WFormat::kQ6_K:
      return fn(Codec<BlockQ6_K>{QuantizeQ6_K, DequantizeQ6_K});
    default:
      OCULAR_CHECK(false, "HINT: a block format");
  }
}

}  // namespace

void QuantizeRow(WFormat f, const float* x, int64_t cols, std::byte* out) {
  const int64_t bv = WFormatBlockValues(f);
  OCULAR_CHECK(cols >= 0 && cols % bv == 0, "HINT: cols must be a multiple of the block size");
  const int64_t blocks = cols / bv;
  switch (f) {
    case WFormat::kF32:
      std::memcpy(out, x, static_cast<size_t>(cols) * 4);
      return;
    case WFormat::kBF16:
      for (int64_t i = 0; i < cols; ++i) {
        const uint16_t h = F32ToBF16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case WFormat::kF16:
      for (int64_t i = 0; i < cols; ++i) {
        const uint16_t h = F32ToF16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    default:
      return WithCodec(f, [&](const auto& c) { EncodeBlocks(c.quantize, x, blocks, bv, out); });
  }
}

void DequantizeRow(WFormat f, const std::byte* row, int64_t cols, float* out) {
  const int64_t bv = WFormatBlockValues(f);
  OCULAR_CHECK(cols >= 0 && cols % bv == 0, "HINT: cols must be a multiple of the block size");
  const int64_t blocks = cols / bv;
  switch (f) {
    case WFormat::kF32:
      std::memcpy(out, row, static_cast<size_t>(cols) * 4);
      return;
    case WFormat::kBF16:
    case WFormat::kF16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        out[i] = f == WFormat::kBF16 ? BF16ToF32(h) : F16ToF32(h);
      }
      return;
    default:
      return WithCodec(f, [&](const auto& c) { DecodeBlocks(c.dequantize, row, blocks, bv, out); });
  }
}

}  // namespace ocular::quant

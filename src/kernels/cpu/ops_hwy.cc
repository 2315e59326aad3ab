// Highway implementations of the kernel table, compiled once per x86 target (AVX2, AVX-512;
// plus Highway's portable baseline, which is unused). ops.cc picks one table at run time.
//
// Numerics mirror kernels/ref/ref_ops.cc (read that first): the same f32 operation order for
// elementwise math; dot products accumulate in f32 vectors (one vector of partial sums per
// output, reduced at the end); norm statistics accumulate in f64.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/ops_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/half.h"
#include "core/matrix.h"
#include "core/tensor.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/highway_tables.h"
#include "kernels/kernel_table.h"

HWY_BEFORE_NAMESPACE();
namespace ocular::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Weight element types, read as f32 vectors in registers (never expanded in memory).
struct BF16 {
  uint16_t bits;
};

// D: a float tag (the full vector DF, or HalfF for a tail).
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D df, const float* p) {
  return hn::LoadU(df, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D df, const BF16* p) {
  const hn::Rebind<uint16_t, D> du16;
  const hn::RebindToUnsigned<D> du32;
  const auto bits = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p));
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, bits)));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D df, const hwy::float16_t* p) {
  const hn::Rebind<hwy::float16_t, D> df16;
  return hn::PromoteTo(df, hn::LoadU(df16, p));
}

// Half a vector (8 floats) where a vector holds 16: on AVX-512 one more vector step for a tail
// of 8..15 elements (attention head size 72 = 4 × 16 + 8) instead of scalar code.
using HalfF = hn::CappedTag<float, 8>;
constexpr bool kHalfTail = HWY_TARGET == HWY_AVX3;

HWY_INLINE float WeightToF32(float w) { return w; }
HWY_INLINE float WeightToF32(BF16 w) {
  const uint32_t u = static_cast<uint32_t>(w.bits) << 16;
  float f;
  hwy::CopyBytes<4>(&u, &f);
  return f;
}
HWY_INLINE float WeightToF32(hwy::float16_t w) { return F16ToF32(w.bits); }

// ------------------------------------------------------------------ MatMul

// Register tile: kM rows of a × kN rows of w; kM * kN accumulators plus kN weight vectors
// must fit the register file (16 on AVX2, 32 on AVX-512).
constexpr size_t kAccumulators = HWY_TARGET == HWY_AVX3 ? 24 : 12;
constexpr size_t ColumnTile(size_t m) { return std::min<size_t>(8, kAccumulators / m); }

// out[m * ldo + n] = dot(a[m * lda, +K), w[n * ldw, +K)) for m < kM, n < kN.
template <size_t kM, size_t kN, class W>
HWY_INLINE void DotTile(const float* HWY_RESTRICT a, int64_t lda, const W* HWY_RESTRICT w,
                        int64_t ldw, int64_t K, float* HWY_RESTRICT out, int64_t ldo) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  VF acc[kM][kN];
  for (size_t m = 0; m < kM; ++m) {
    for (size_t n = 0; n < kN; ++n) acc[m][n] = hn::Zero(df);
  }
  int64_t k = 0;
  for (; k + lanes <= K; k += lanes) {
    VF wv[kN];
    for (size_t n = 0; n < kN; ++n) wv[n] = LoadWeights(df, w + n * ldw + k);
    for (size_t m = 0; m < kM; ++m) {
      const VF av = hn::LoadU(df, a + m * lda + k);
      for (size_t n = 0; n < kN; ++n) acc[m][n] = hn::MulAdd(av, wv[n], acc[m][n]);
    }
  }
  float sums[kM][kN];
  for (size_t m = 0; m < kM; ++m) {
    for (size_t n = 0; n < kN; ++n) sums[m][n] = hn::GetLane(hn::SumOfLanes(df, acc[m][n]));
  }
  if constexpr (kHalfTail) {
    if (K - k >= 8) {
      const HalfF dh;
      for (size_t n = 0; n < kN; ++n) {
        const auto wv = LoadWeights(dh, w + n * ldw + k);
        for (size_t m = 0; m < kM; ++m) {
          sums[m][n] +=
              hn::GetLane(hn::SumOfLanes(dh, hn::Mul(hn::LoadU(dh, a + m * lda + k), wv)));
        }
      }
      k += 8;
    }
  }
  for (size_t m = 0; m < kM; ++m) {
    for (size_t n = 0; n < kN; ++n) {
      float sum = sums[m][n];
      for (int64_t kk = k; kk < K; ++kk) sum += a[m * lda + kk] * WeightToF32(w[n * ldw + kk]);
      out[m * ldo + n] = sum;
    }
  }
}

// kM rows of a against the w rows [n_begin, n_end).
template <size_t kM, class W>
HWY_INLINE void RowsTimesColumns(const float* a, int64_t lda, const W* w, int64_t K,
                                 int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  constexpr size_t kN = ColumnTile(kM);
  int64_t n = n_begin;
  for (; n + static_cast<int64_t>(kN) <= n_end; n += kN) {
    DotTile<kM, kN>(a, lda, w + n * K, K, K, out + n, ldo);
  }
  for (; n < n_end; ++n) DotTile<kM, 1>(a, lda, w + n * K, K, K, out + n, ldo);
}

// Rows per GEMV-style call (decode, and decode batches up to this size): every weight is
// streamed once per call and each output keeps its own accumulator, so a row's result does
// not depend on how many rows share the call.
constexpr int64_t kGemvRows = 8;

// Calls f(std::integral_constant<size_t, m>) for m in [1, kGemvRows].
template <class F>
HWY_INLINE void WithRows(size_t m, const F& f) {
  switch (m) {
    case 1:
      return f(std::integral_constant<size_t, 1>());
    case 2:
      return f(std::integral_constant<size_t, 2>());
    case 3:
      return f(std::integral_constant<size_t, 3>());
    case 4:
      return f(std::integral_constant<size_t, 4>());
    case 5:
      return f(std::integral_constant<size_t, 5>());
    case 6:
      return f(std::integral_constant<size_t, 6>());
    case 7:
      return f(std::integral_constant<size_t, 7>());
    default:
      return f(std::integral_constant<size_t, 8>());
  }
}

template <class W>
void RowsTimesColumns(size_t m, const float* a, int64_t lda, const W* w, int64_t K, int64_t n_begin,
                      int64_t n_end, float* out, int64_t ldo) {
  WithRows(m, [&](auto rows) HWY_ATTR {
    RowsTimesColumns<decltype(rows)::value>(a, lda, w, K, n_begin, n_end, out, ldo);
  });
}

// ---- BF16 GEMV: two weights per 32-bit lane.
// A u32 lane holding bf16 elements (2i, 2i+1) gives element 2i+1 as f32 by masking the low
// half and element 2i by shifting left 16: two f32 vectors from one load and two integer
// ops. `a` is pre-permuted per block of 2·lanes into [even elements | odd elements].

// a_perm[m, blk + i] = a[m, blk + 2i], a_perm[m, blk + lanes + i] = a[m, blk + 2i + 1] for
// every full block of 2·lanes; returns the number of permuted columns.
HWY_INLINE int64_t PermuteEvenOdd(const float* a, int64_t M, int64_t K, int64_t lda,
                                  float* a_perm) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(DF()));
  const int64_t K2 = K / (2 * lanes) * (2 * lanes);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t blk = 0; blk < K2; blk += 2 * lanes) {
      for (int64_t i = 0; i < lanes; ++i) {
        a_perm[m * K2 + blk + i] = a[m * lda + blk + 2 * i];
        a_perm[m * K2 + blk + lanes + i] = a[m * lda + blk + 2 * i + 1];
      }
    }
  }
  return K2;
}

template <size_t kM, size_t kN>
HWY_INLINE void DotTilePairs(const float* HWY_RESTRICT a, int64_t lda,
                             const float* HWY_RESTRICT a_perm, int64_t K2,
                             const BF16* HWY_RESTRICT w, int64_t K, float* HWY_RESTRICT out,
                             int64_t ldo) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto high_half = hn::Set(du, 0xFFFF0000u);
  VF acc[kM][kN];
  for (size_t m = 0; m < kM; ++m) {
    for (size_t n = 0; n < kN; ++n) acc[m][n] = hn::Zero(df);
  }
  for (int64_t k = 0; k < K2; k += 2 * lanes) {
    VF w_even[kN], w_odd[kN];
    for (size_t n = 0; n < kN; ++n) {
      const auto raw = hn::LoadU(du, reinterpret_cast<const uint32_t*>(w + n * K + k));
      w_even[n] = hn::BitCast(df, hn::ShiftLeft<16>(raw));
      w_odd[n] = hn::BitCast(df, hn::And(raw, high_half));
    }
    for (size_t m = 0; m < kM; ++m) {
      const VF a_even = hn::LoadU(df, a_perm + m * K2 + k);
      const VF a_odd = hn::LoadU(df, a_perm + m * K2 + k + lanes);
      for (size_t n = 0; n < kN; ++n) {
        acc[m][n] = hn::MulAdd(a_even, w_even[n], acc[m][n]);
        acc[m][n] = hn::MulAdd(a_odd, w_odd[n], acc[m][n]);
      }
    }
  }
  for (size_t m = 0; m < kM; ++m) {
    for (size_t n = 0; n < kN; ++n) {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[m][n]));
      for (int64_t kk = K2; kk < K; ++kk) sum += a[m * lda + kk] * WeightToF32(w[n * K + kk]);
      out[m * ldo + n] = sum;
    }
  }
}

template <size_t kM>
HWY_INLINE void RowsTimesColumnsPairs(const float* a, int64_t lda, const float* a_perm, int64_t K2,
                                      const BF16* w, int64_t K, int64_t n_begin, int64_t n_end,
                                      float* out, int64_t ldo) {
  constexpr size_t kN = ColumnTile(kM);
  int64_t n = n_begin;
  for (; n + static_cast<int64_t>(kN) <= n_end; n += kN) {
    DotTilePairs<kM, kN>(a, lda, a_perm, K2, w + n * K, K, out + n, ldo);
  }
  for (; n < n_end; ++n) DotTilePairs<kM, 1>(a, lda, a_perm, K2, w + n * K, K, out + n, ldo);
}

// a_perm: kGemvRows * K floats of scratch.
void GemvBF16(const float* a, int64_t M, int64_t K, int64_t lda, const BF16* w, int64_t n0,
              int64_t n1, float* out, int64_t ldo, float* a_perm) {
  const int64_t K2 = PermuteEvenOdd(a, M, K, lda, a_perm);
  const float* ap = a_perm;
  WithRows(static_cast<size_t>(M), [&](auto rows) HWY_ATTR {
    RowsTimesColumnsPairs<decltype(rows)::value>(a, lda, ap, K2, w, K, n0, n1, out, ldo);
  });
}

// ---- GEMM (M > 4): cache blocking. A block of kRowBlock rows of a stays in L2 while a strip
// of kColumnStrip rows of w (reused by every 4-row group of the block) stays in L1/L2.
// Non-f32 strips are converted once per (row block, strip) into a small f32 panel, so the
// conversion is amortized over kRowBlock rows instead of repeated per 4-row group.
constexpr int64_t kRowBlock = 64;
constexpr int64_t kColumnStrip = 24;

static_assert(kColumnStrip >= kGemvRows, "scratch holds a panel or the permuted rows");

// scratch: kernels::MatMulScratchFloats(K) = kColumnStrip * K floats.
template <class W>
void MatMulBlockT(const float* a, int64_t M, int64_t K, int64_t lda, const W* w, int64_t n0,
                  int64_t n1, float* out, int64_t ldo, float* scratch) {
  if (M <= kGemvRows) {  // GEMV-like: stream w once.
    if constexpr (std::is_same_v<W, BF16>) {
      GemvBF16(a, M, K, lda, w, n0, n1, out, ldo, scratch);
    } else {
      RowsTimesColumns(static_cast<size_t>(M), a, lda, w, K, n0, n1, out, ldo);
    }
    return;
  }
  float* panel = scratch;
  for (int64_t mb = 0; mb < M; mb += kRowBlock) {
    const int64_t mb_end = std::min(M, mb + kRowBlock);
    for (int64_t ns = n0; ns < n1; ns += kColumnStrip) {
      const int64_t ns_end = std::min(n1, ns + kColumnStrip);
      const float* strip;  // w rows [ns, ns_end) as f32, row stride K
      if constexpr (std::is_same_v<W, float>) {
        strip = w + ns * K;
      } else {
        const DF df;
        const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
        const int64_t count = (ns_end - ns) * K;
        const W* src = w + ns * K;
        int64_t i = 0;
        for (; i + lanes <= count; i += lanes) hn::StoreU(LoadWeights(df, src + i), df, &panel[i]);
        for (; i < count; ++i) panel[i] = WeightToF32(src[i]);
        strip = panel;
      }
      for (int64_t m = mb; m < mb_end; m += 4) {
        const size_t rows = static_cast<size_t>(std::min<int64_t>(4, mb_end - m));  // 4-row tiles
        RowsTimesColumns(rows, a + m * lda, lda, strip, K, 0, ns_end - ns, out + m * ldo + ns, ldo);
      }
    }
  }
}

// One table entry per float weight format; rows are contiguous (row_bytes == K * sizeof(W)).
template <class W>
void MatMulFormat(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                  int64_t n1, float* out, int64_t ldo, float* scratch) {
  MatMulBlockT(a, M, K, lda, reinterpret_cast<const W*>(w.data), n0, n1, out, ldo, scratch);
}

// ------------------------------------------------------------------ helpers

// Applies f(df, v) -> v to x[0, n) in place; the tail goes through a padded vector.
template <class F>
HWY_INLINE void Transform(float* HWY_RESTRICT x, int64_t n, const F& f) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(f(df, hn::LoadU(df, x + i)), df, x + i);
  if (i < n) {
    HWY_ALIGN float buf[hn::MaxLanes(df)] = {};
    std::copy(x + i, x + n, buf);
    hn::Store(f(df, hn::Load(df, buf)), df, buf);
    std::copy(buf, buf + (n - i), x + i);
  }
}

// out[i] = f(a[i], b[i]); out may alias a or b.
template <class F>
HWY_INLINE void Transform2(const float* a, const float* b, float* out, int64_t n, const F& f) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(f(hn::LoadU(df, a + i), hn::LoadU(df, b + i)), df, out + i);
  }
  if (i < n) {
    HWY_ALIGN float ba[hn::MaxLanes(df)] = {};
    HWY_ALIGN float bb[hn::MaxLanes(df)] = {};
    std::copy(a + i, a + n, ba);
    std::copy(b + i, b + n, bb);
    hn::Store(f(hn::Load(df, ba), hn::Load(df, bb)), df, ba);
    std::copy(ba, ba + (n - i), out + i);
  }
}

// Sum of x[i] (or of (x[i] - center)^2 when squared) in f64 vectors.
HWY_INLINE double SumF64(const float* x, int64_t n, bool squared, double center) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df_half;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  const auto c = hn::Set(dd, center);
  auto acc0 = hn::Zero(dd), acc1 = hn::Zero(dd);
  int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto v0 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df_half, x + i)), c);
    const auto v1 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df_half, x + i + lanes)), c);
    acc0 = squared ? hn::MulAdd(v0, v0, acc0) : hn::Add(acc0, v0);
    acc1 = squared ? hn::MulAdd(v1, v1, acc1) : hn::Add(acc1, v1);
  }
  double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(acc0, acc1)));
  for (; i < n; ++i) {
    const double v = x[i] - center;
    sum += squared ? v * v : v;
  }
  return sum;
}

// Loads dim-vector weights of any float dtype as f32 vectors at offset i.
HWY_INLINE VF LoadVector(DF df, const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kBF16:
      return LoadWeights(df, t.as<BF16>() + i);
    case DType::kF16:
      return LoadWeights(df, t.as<hwy::float16_t>() + i);
    default:
      return LoadWeights(df, t.as<float>() + i);
  }
}
HWY_INLINE float VectorAt(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kBF16:
      return WeightToF32(t.as<BF16>()[i]);
    case DType::kF16:
      return WeightToF32(t.as<hwy::float16_t>()[i]);
    default:
      return t.as<float>()[i];
  }
}

// ------------------------------------------------------------------ norms

void RmsNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, float eps,
             bool add_one, float* y) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const double sum_sq = SumF64(xr, dim, /*squared=*/true, 0.0);
    const float mean_sq = static_cast<float>(sum_sq / static_cast<double>(dim));
    const float inv_rms = 1.0f / std::sqrt(mean_sq + eps);
    const VF inv = hn::Set(df, inv_rms), one = hn::Set(df, add_one ? 1.0f : 0.0f);
    int64_t i = 0;
    for (; i + lanes <= dim; i += lanes) {
      const VF wv = hn::Add(one, LoadVector(df, w, i));
      hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, xr + i), inv), wv), df, yr + i);
    }
    for (; i < dim; ++i) {
      const float wi = VectorAt(w, i);
      yr[i] = (xr[i] * inv_rms) * (add_one ? 1.0f + wi : wi);
    }
  }
}

void LayerNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, const TensorView& b,
               float eps, float* y) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const double mean = SumF64(xr, dim, /*squared=*/false, 0.0) / static_cast<double>(dim);
    const double sum_sq = SumF64(xr, dim, /*squared=*/true, mean);
    const float var = static_cast<float>(sum_sq / static_cast<double>(dim));
    const float scale = 1.0f / std::sqrt(var + eps);
    const float bias = -scale * static_cast<float>(mean);
    const VF vs = hn::Set(df, scale), vb = hn::Set(df, bias);
    int64_t i = 0;
    for (; i + lanes <= dim; i += lanes) {
      const VF norm = hn::Add(hn::Mul(hn::LoadU(df, xr + i), vs), vb);
      hn::StoreU(hn::Add(hn::Mul(norm, LoadVector(df, w, i)), LoadVector(df, b, i)), df, yr + i);
    }
    for (; i < dim; ++i) yr[i] = (xr[i] * scale + bias) * VectorAt(w, i) + VectorAt(b, i);
  }
}

// ------------------------------------------------------------------ elementwise

void GeluTanh(float* x, int64_t n) {
  Transform(x, n, [](DF df, VF v) HWY_ATTR {
    const VF beta = hn::Set(df, static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5));
    const VF kappa = hn::Set(df, 0.044715f);
    const VF cube = hn::Mul(hn::Mul(v, v), v);
    const VF inner = hn::Mul(beta, hn::Add(v, hn::Mul(kappa, cube)));
    const VF half_x = hn::Mul(hn::Set(df, 0.5f), v);
    return hn::Mul(half_x, hn::Add(hn::Set(df, 1.0f), hn::Tanh(df, inner)));
  });
}

// No vector erf in Highway 1.0.3; std::erf per element (used by the Mllama vision tower only).
void GeluErf(float* x, int64_t n) {
  constexpr float kAlpha = static_cast<float>(M_SQRT1_2);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * 0.5f * (1.0f + std::erf(x[i] * kAlpha));
}

void Mul(const float* a, const float* b, float* out, int64_t n) {
  Transform2(a, b, out, n, [](VF u, VF v) HWY_ATTR { return hn::Mul(u, v); });
}
void Add(const float* a, const float* b, float* out, int64_t n) {
  Transform2(a, b, out, n, [](VF u, VF v) HWY_ATTR { return hn::Add(u, v); });
}
void Scale(float* x, int64_t n, float s) {
  Transform(x, n, [s](DF df, VF v) HWY_ATTR { return hn::Mul(v, hn::Set(df, s)); });
}
void SoftCap(float* x, int64_t n, float cap) {
  Transform(x, n, [cap](DF df, VF v) HWY_ATTR {
    const VF c = hn::Set(df, cap);
    return hn::Mul(hn::Tanh(df, hn::Div(v, c)), c);
  });
}

// bf16(x), round to nearest even; NaN stays NaN (quiet), as core/half.h F32ToBF16.
HWY_INLINE VF RoundBF16V(DF df, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto u = hn::BitCast(du, v);
  const auto mag = hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(mag, hn::Set(di, 0x7f800000)));
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto high = hn::Set(du, 0xffff0000u);
  const auto rounded = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb)), high);
  const auto quiet = hn::And(hn::Or(u, hn::Set(du, 0x400000u)), high);
  return hn::BitCast(df, hn::IfThenElse(is_nan, quiet, rounded));
}

void RoundBF16(float* x, int64_t n) {
  Transform(x, n, [](DF df, VF v) HWY_ATTR { return RoundBF16V(df, v); });
}

// ------------------------------------------------------------------ RoPE

// x1' = x1*cos - x2*sin, x2' = x2*cos + x1*sin with each product rounded before the sum, as
// torch evaluates q*cos and rotate_half(q)*sin as separate tensors; with kBF16 every product
// and sum is also rounded to bf16 (torch on bf16 q/k, ref/ RopeRowBF16). x1*c + (-x2)*s is
// exactly x1*c - x2*s in f32.
template <bool kBF16>
void RopeRowT(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t half = head_dim / 2;
  auto r = [df](VF v) HWY_ATTR { return kBF16 ? RoundBF16V(df, v) : v; };
  auto r1 = [](float v) { return kBF16 ? BF16ToF32(F32ToBF16(v)) : v; };
  for (int64_t h = 0; h < n_heads; ++h) {
    float* x1p = x + h * head_dim;
    float* x2p = x1p + half;
    int64_t k = 0;
    for (; k + lanes <= half; k += lanes) {
      const VF x1 = hn::LoadU(df, x1p + k), x2 = hn::LoadU(df, x2p + k);
      const VF c = hn::LoadU(df, cos + k), s = hn::LoadU(df, sin + k);
      hn::StoreU(r(hn::Add(r(hn::Mul(x1, c)), r(hn::Mul(hn::Neg(x2), s)))), df, x1p + k);
      hn::StoreU(r(hn::Add(r(hn::Mul(x2, c)), r(hn::Mul(x1, s)))), df, x2p + k);
    }
    for (; k < half; ++k) {
      const float x1 = x1p[k], x2 = x2p[k];
      x1p[k] = r1(r1(x1 * cos[k]) + r1(-x2 * sin[k]));
      x2p[k] = r1(r1(x2 * cos[k]) + r1(x1 * sin[k]));
    }
  }
}

void RopeRow(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
  RopeRowT<false>(x, n_heads, head_dim, cos, sin);
}
void RopeRowBF16(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
  RopeRowT<true>(x, n_heads, head_dim, cos, sin);
}

// ------------------------------------------------------------------ attention

// scores[q, t] = dot(q rows, k rows [0, nt)) for kM queries (row stride ldq), into s with
// row stride ls.
template <size_t kM, class KV>
HWY_INLINE void ScoreRows(const float* q, int64_t ldq, const KV* k, int64_t ldk, int64_t nt,
                          int64_t d, float* s, int64_t ls) {
  constexpr size_t kN = ColumnTile(kM) > 4 ? 4 : ColumnTile(kM);
  int64_t t = 0;
  for (; t + static_cast<int64_t>(kN) <= nt; t += kN) {
    DotTile<kM, kN>(q, ldq, k + t * ldk, ldk, d, s + t, ls);
  }
  for (; t < nt; ++t) DotTile<kM, 1>(q, ldq, k + t * ldk, ldk, d, s + t, ls);
}

// out[q, 0:d) = sum_t probs[q * ls + t] * v[t * ldv, 0:d) for kQ rows; with `accumulate` the
// sum continues from the values already in out (a ring's second segment: same f32 order).
template <size_t kQ, class KV>
HWY_INLINE void WeightedSumRows(const float* probs, int64_t ls, const KV* v, int64_t ldv,
                                int64_t nt, int64_t d, bool accumulate, float* out, int64_t ldo) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  for (; j + lanes <= d; j += lanes) {
    VF acc[kQ];
    for (size_t q = 0; q < kQ; ++q) {
      acc[q] = accumulate ? hn::LoadU(df, out + q * ldo + j) : hn::Zero(df);
    }
    for (int64_t t = 0; t < nt; ++t) {
      const VF vv = LoadWeights(df, v + t * ldv + j);
      for (size_t q = 0; q < kQ; ++q)
        acc[q] = hn::MulAdd(hn::Set(df, probs[q * ls + t]), vv, acc[q]);
    }
    for (size_t q = 0; q < kQ; ++q) hn::StoreU(acc[q], df, out + q * ldo + j);
  }
  if constexpr (kHalfTail) {
    if (d - j >= 8) {
      const HalfF dh;
      hn::Vec<HalfF> acc[kQ];
      for (size_t q = 0; q < kQ; ++q) {
        acc[q] = accumulate ? hn::LoadU(dh, out + q * ldo + j) : hn::Zero(dh);
      }
      for (int64_t t = 0; t < nt; ++t) {
        const auto vv = LoadWeights(dh, v + t * ldv + j);
        for (size_t q = 0; q < kQ; ++q)
          acc[q] = hn::MulAdd(hn::Set(dh, probs[q * ls + t]), vv, acc[q]);
      }
      for (size_t q = 0; q < kQ; ++q) hn::StoreU(acc[q], dh, out + q * ldo + j);
      j += 8;
    }
  }
  for (; j < d; ++j) {
    for (size_t q = 0; q < kQ; ++q) {
      float acc = accumulate ? out[q * ldo + j] : 0.0f;
      for (int64_t t = 0; t < nt; ++t) acc += probs[q * ls + t] * WeightToF32(v[t * ldv + j]);
      out[q * ldo + j] = acc;
    }
  }
}

// Calls fn(first_row, offset, count) for the physical row runs that hold logical keys
// [u0, u1), in logical order: one run, or two when a ring buffer wraps.
template <class F>
HWY_INLINE void ForEachKeyRun(int64_t ring, int64_t u0, int64_t u1, const F& fn) {
  if (ring == 0) return fn(u0, int64_t{0}, u1 - u0);
  const int64_t start = u0 % ring, first = std::min(u1 - u0, ring - start);
  fn(start, int64_t{0}, first);
  if (first < u1 - u0) fn(int64_t{0}, first, u1 - u0 - first);
}

template <class KV>
void ScoreRowsN(int64_t nq, const float* q, int64_t ldq, const KV* k, int64_t ldk, int64_t nt,
                int64_t d, float* s, int64_t ls) {
  switch (nq) {
    case 1:
      return ScoreRows<1>(q, ldq, k, ldk, nt, d, s, ls);
    case 2:
      return ScoreRows<2>(q, ldq, k, ldk, nt, d, s, ls);
    case 3:
      return ScoreRows<3>(q, ldq, k, ldk, nt, d, s, ls);
    default:
      return ScoreRows<4>(q, ldq, k, ldk, nt, d, s, ls);
  }
}

template <class KV>
void WeightedSumRowsN(int64_t nq, const float* probs, int64_t ls, const KV* v, int64_t ldv,
                      int64_t nt, int64_t d, bool accumulate, float* out, int64_t ldo) {
  switch (nq) {
    case 1:
      return WeightedSumRows<1>(probs, ls, v, ldv, nt, d, accumulate, out, ldo);
    case 2:
      return WeightedSumRows<2>(probs, ls, v, ldv, nt, d, accumulate, out, ldo);
    case 3:
      return WeightedSumRows<3>(probs, ls, v, ldv, nt, d, accumulate, out, ldo);
    default:
      return WeightedSumRows<4>(probs, ls, v, ldv, nt, d, accumulate, out, ldo);
  }
}

// max(x[0, n)), n >= 1.
HWY_INLINE float MaxOf(const float* x, int64_t n) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  VF m = hn::Set(df, -INFINITY);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) m = hn::Max(m, hn::LoadU(df, x + i));
  float best = hn::GetLane(hn::MaxOfLanes(df, m));
  for (; i < n; ++i) best = std::max(best, x[i]);
  return best;
}

// Softmax of one query's scores sr[0, n) in place, with the scale and softcap first
// (ref/ AttentionOne documents the order; with bf16 rounding at torch's points).
// vector_sum: the f64 sum of the exponentials in vector lanes (fast; another order than the
// scalar reference's, so a result may differ from it in the last bit) instead of in order.
HWY_INLINE void ScaledSoftmax(float* sr, int64_t n, float scale, float cap, bool bf16,
                              bool vector_sum = false) {
  if (bf16) {
    Transform(sr, n, [scale, cap](DF d, VF v) HWY_ATTR {
      v = RoundBF16V(d, hn::Mul(RoundBF16V(d, v), hn::Set(d, scale)));
      if (cap > 0.0f) {
        const VF t = RoundBF16V(d, hn::Tanh(d, RoundBF16V(d, hn::Div(v, hn::Set(d, cap)))));
        v = RoundBF16V(d, hn::Mul(t, hn::Set(d, cap)));
      }
      return v;
    });
  } else {
    Transform(sr, n, [scale, cap](DF d, VF v) HWY_ATTR {
      v = hn::Mul(v, hn::Set(d, scale));
      if (cap > 0.0f) v = hn::Mul(hn::Tanh(d, hn::Div(v, hn::Set(d, cap))), hn::Set(d, cap));
      return v;
    });
  }
  // softmax: e = exp(s - max); p = e * (1 / sum e).
  const float max_score = MaxOf(sr, n);
  Transform(sr, n, [max_score](DF d, VF v) HWY_ATTR {
    return hn::Exp(d, hn::Sub(v, hn::Set(d, max_score)));
  });
  double sum = 0.0;
  if (vector_sum) {
    sum = SumF64(sr, n, /*squared=*/false, 0.0);
  } else {
    for (int64_t j = 0; j < n; ++j) sum += sr[j];
  }
  const float inv_sum = 1.0f / static_cast<float>(sum);
  Transform(sr, n, [inv_sum, bf16](DF d, VF v) HWY_ATTR {
    v = hn::Mul(v, hn::Set(d, inv_sum));
    return bf16 ? RoundBF16V(d, v) : v;
  });
}

// The union [u0, u1) of the non-empty key ranges of queries [i_begin, i_end); u0 >= u1 when
// every range is empty.
HWY_INLINE std::pair<int64_t, int64_t> KeyUnion(const kernels::AttentionArgs& p, int64_t i_begin,
                                                int64_t i_end) {
  int64_t u0 = p.Tk, u1 = 0;
  for (int64_t i = i_begin; i < i_end; ++i) {
    if (p.key_begin[i] >= p.key_end[i]) continue;
    u0 = std::min<int64_t>(u0, p.key_begin[i]);
    u1 = std::max<int64_t>(u1, p.key_end[i]);
  }
  return {u0, u1};
}

// One head × up to kAttentionQueryBlock queries. Scores are computed for the union of the
// queries' key ranges; each query then softmaxes its own range, and probabilities outside it
// are zero so p·v can share each V row too. Keys are visited in chunks of kKeyChunk rows,
// each chunk used by every 4-query group of the block while it is in L1 (long contexts
// would otherwise stream K and V from memory once per 4 queries). Every query's sums run in
// the same order whatever the block, the chunking or a ring's wrap (bit-identical results).
constexpr int64_t kKeyChunk = 64;
constexpr int64_t kQueryGroup = 4;

template <class KV>
void AttentionBlock(const kernels::AttentionArgs& p, int64_t i_begin, int64_t i_end, int64_t h,
                    float* scratch) {
  const int64_t kvh = h / (p.Hq / p.Hkv);
  const std::pair<int64_t, int64_t> keys = KeyUnion(p, i_begin, i_end);
  const int64_t u0 = keys.first, u1 = keys.second;  // (not a structured binding: lambdas use them)
  const int64_t nq = i_end - i_begin;
  if (u0 >= u1) {  // every range empty: zero rows
    for (int64_t i = i_begin; i < i_end; ++i) std::fill_n(p.out + i * p.ldo + h * p.d, p.d, 0.0f);
    return;
  }
  const int64_t nt = u1 - u0, ls = nt;
  const float* q0 = p.q + i_begin * p.ldq + h * p.d;
  const KV* kbase = static_cast<const KV*>(p.k) + kvh * p.d;
  const KV* vbase = static_cast<const KV*>(p.v) + kvh * p.d;
  // Calls fn(first_row, offset, count) per chunk of the key runs, in logical key order.
  auto for_each_chunk = [&](const auto& fn) {
    ForEachKeyRun(p.kv_ring, u0, u1, [&](int64_t row, int64_t off, int64_t n) {
      for (int64_t c = 0; c < n; c += kKeyChunk) fn(row + c, off + c, std::min(kKeyChunk, n - c));
    });
  };
  for_each_chunk([&](int64_t row, int64_t off, int64_t n) {
    for (int64_t g = 0; g < nq; g += kQueryGroup) {
      ScoreRowsN(std::min(kQueryGroup, nq - g), q0 + g * p.ldq, p.ldq, kbase + row * p.ldk, p.ldk,
                 n, p.d, scratch + g * ls + off, ls);
    }
  });
  for (int64_t qi = 0; qi < nq; ++qi) {
    float* s = scratch + qi * ls;
    const int64_t b = p.key_begin[i_begin + qi] - u0, e = p.key_end[i_begin + qi] - u0;
    if (b >= e) {
      std::fill_n(s, nt, 0.0f);
      continue;
    }
    std::fill_n(s, b, 0.0f);
    std::fill(s + e, s + nt, 0.0f);
    ScaledSoftmax(s + b, e - b, p.scale, p.softcap, p.round_bf16);
  }
  // out[qi] = p[qi] · v over the union range, continuing each query's sum chunk by chunk.
  float* o0 = p.out + i_begin * p.ldo + h * p.d;
  for_each_chunk([&](int64_t row, int64_t off, int64_t n) {
    for (int64_t g = 0; g < nq; g += kQueryGroup) {
      WeightedSumRowsN(std::min(kQueryGroup, nq - g), scratch + g * ls + off, ls,
                       vbase + row * p.ldv, p.ldv, n, p.d, off > 0, o0 + g * p.ldo, p.ldo);
    }
  });
  if (p.round_bf16) {
    for (int64_t qi = 0; qi < nq; ++qi) RoundBF16(o0 + qi * p.ldo, p.d);
  }
}

// The bf16 bits of a bf16 value held in an f32 (its upper half; exact, no rounding).
HWY_INLINE uint16_t Bf16Bits(float x) {
  uint32_t u;
  hwy::CopyBytes<4>(&x, &u);
  return static_cast<uint16_t>(u >> 16);
}

// out[i] = Bf16Bits(x[i]) for i < n.
HWY_INLINE void Bf16BitsOf(const float* x, int64_t n, uint16_t* out) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto bits = hn::ShiftRight<16>(hn::BitCast(du32, hn::LoadU(df, x + i)));
    hn::StoreU(hn::TruncateTo(du16, bits), du16, out + i);
  }
  for (; i < n; ++i) out[i] = Bf16Bits(x[i]);
}

// One head × up to kAttentionDotQueries queries with bf16 dot products (cpu/gemm_bf16.h):
// scores = q·kᵀ over the 16-key groups covering the union of the queries' key ranges, each
// query's scaled softmax over its own range (zero elsewhere, rounded at torch's bf16 points),
// then p·v. The products are those of the f32 path on the same bf16 values; only the
// summation order differs. Both products store whole rows per query (GemmBf16T).
void AttentionDotBlock(const kernels::AttentionArgs& p, const kernels::AttentionDotArgs& dot,
                       int64_t i_begin, int64_t i_end, int64_t h, float* scratch) {
  const int64_t kvh = h / (p.Hq / p.Hkv), nq = i_end - i_begin;
  const std::pair<int64_t, int64_t> keys = KeyUnion(p, i_begin, i_end);
  const int64_t u0 = keys.first, u1 = keys.second;  // (not a structured binding: lambdas use them)
  float* o0 = p.out + i_begin * p.ldo + h * p.d;
  if (u0 >= u1) {
    for (int64_t qi = 0; qi < nq; ++qi) std::fill_n(o0 + qi * p.ldo, p.d, 0.0f);
    return;
  }
  // Keys [b0, b0 + span): whole 16-key groups (packed keys past Tk are zero).
  const int64_t b0 = u0 / 16 * 16, span = (u1 + 15) / 16 * 16 - b0;
  const int64_t width = kernels::AttentionDotKeys(p.Tk);
  float* s = scratch;  // [nq][width]
  uint16_t* probs = reinterpret_cast<uint16_t*>(s + kernels::kAttentionDotQueries * width);
  uint16_t* queries = probs + kernels::kAttentionDotQueries * width;  // [nq][d]
  for (int64_t qi = 0; qi < nq; ++qi) {  // bf16 values: the upper halves
    const float* q = p.q + (i_begin + qi) * p.ldq + h * p.d;
    for (int64_t j = 0; j < p.d; ++j) queries[qi * p.d + j] = Bf16Bits(q[j]);
  }
  const int64_t key_group = p.d / 2 * 16;  // words per packed group of 16 keys
  dot.gemm(dot.keys + kvh * dot.keys_head_stride + b0 / 16 * key_group, key_group, span, p.d,
           queries, p.d, 0, nq, s, width);
  for (int64_t qi = 0; qi < nq; ++qi) {
    float* sr = s + qi * width;
    uint16_t* pr = probs + qi * width;
    const int64_t b = p.key_begin[i_begin + qi] - b0, e = p.key_end[i_begin + qi] - b0;
    std::fill_n(pr, span, uint16_t{0});
    if (b >= e) continue;
    ScaledSoftmax(sr + b, e - b, p.scale, p.softcap, /*bf16=*/true, /*vector_sum=*/true);
    Bf16BitsOf(sr + b, e - b, pr + b);  // already bf16 values
  }
  const int64_t value_group = dot.value_pairs * 16;
  dot.gemm(dot.values + kvh * dot.values_head_stride + b0 / 2 * 16, value_group, p.d, span, probs,
           width, 0, nq, o0, p.ldo);
  for (int64_t qi = 0; qi < nq; ++qi) RoundBF16(o0 + qi * p.ldo, p.d);
}

void AttentionDotItems(const kernels::AttentionArgs& p, const kernels::AttentionDotArgs& dot,
                       int64_t begin, int64_t end, float* scratch) {
  const int64_t blocks = kernels::AttentionDotItemCount(p.Tq, 1);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t i_begin = item % blocks * kernels::kAttentionDotQueries;
    AttentionDotBlock(p, dot, i_begin, std::min(p.Tq, i_begin + kernels::kAttentionDotQueries),
                      item / blocks, scratch);
  }
}

// Heads [h0, h1) of one KV head × query i as the queries of one AttentionBlock (the heads'
// rows are d apart in q and out; K/V from their KV head): each K/V row it loads serves them all.
template <class KV>
void AttentionHeads(const kernels::AttentionArgs& p, int64_t i, int64_t h0, int64_t h1,
                    float* scratch) {
  int32_t begin[kernels::kAttentionQueryBlock], end[kernels::kAttentionQueryBlock];
  std::fill_n(begin, h1 - h0, p.key_begin[i]);
  std::fill_n(end, h1 - h0, p.key_end[i]);
  const int64_t kv_offset = h0 / (p.Hq / p.Hkv) * p.d;
  kernels::AttentionArgs heads = p;
  heads.q = p.q + i * p.ldq + h0 * p.d;
  heads.Tq = h1 - h0, heads.ldq = p.d, heads.Hq = 1, heads.Hkv = 1;
  heads.k = static_cast<const KV*>(p.k) + kv_offset;
  heads.v = static_cast<const KV*>(p.v) + kv_offset;
  heads.key_begin = begin, heads.key_end = end;
  heads.out = p.out + i * p.ldo + h0 * p.d, heads.ldo = p.d;
  AttentionBlock<KV>(heads, 0, h1 - h0, 0, scratch);
}

template <class KV>
void AttentionItemsT(const kernels::AttentionArgs& p, int64_t begin, int64_t end, float* scratch) {
  for (int64_t item = begin; item < end; ++item) {
    const kernels::AttentionItem it = kernels::AttentionItemAt(p.Tq, p.Hq, p.Hkv, item);
    if (it.h_end - it.h_begin > 1) {
      AttentionHeads<KV>(p, it.i_begin, it.h_begin, it.h_end, scratch);
    } else {
      AttentionBlock<KV>(p, it.i_begin, it.i_end, it.h_begin, scratch);
    }
  }
}

void AttentionItems(const kernels::AttentionArgs& p, int64_t begin, int64_t end, float* scratch) {
  if (p.kv_bf16) {
    AttentionItemsT<BF16>(p, begin, end, scratch);
  } else {
    AttentionItemsT<float>(p, begin, end, scratch);
  }
}

// ------------------------------------------------------------------ conversion

template <class W>
void ToF32T(const W* in, int64_t n, float* out) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(LoadWeights(df, in + i), df, out + i);
  for (; i < n; ++i) out[i] = WeightToF32(in[i]);
}

template <class W>
void RowToF32(const Matrix& w, int64_t r, float* out) {
  ToF32T(reinterpret_cast<const W*>(w.row(r)), w.cols, out);
}

void ToF32(const void* data, DType dtype, int64_t n, float* out) {
  switch (dtype) {
    case DType::kBF16:
      return ToF32T(static_cast<const BF16*>(data), n, out);
    case DType::kF16:
      return ToF32T(static_cast<const hwy::float16_t*>(data), n, out);
    default:
      return ToF32T(static_cast<const float*>(data), n, out);
  }
}

const kernels::KernelTable kTable = {
    HWY_TARGET == HWY_AVX3 ? "avx512" : (HWY_TARGET == HWY_AVX2 ? "avx2" : "baseline"),
    {MatMulFormat<float>, MatMulFormat<BF16>, MatMulFormat<hwy::float16_t>, nullptr, nullptr,
     nullptr, nullptr},
    {RowToF32<float>, RowToF32<BF16>, RowToF32<hwy::float16_t>, nullptr, nullptr, nullptr, nullptr},
    {},       // matmul_f32_act: set by ops.cc (cpu/quant_matmul.h)
    nullptr,  // set by ops.cc on AVX512_BF16 CPUs (cpu/bf16_dot.h)
    RmsNorm,
    LayerNorm,
    GeluTanh,
    GeluErf,
    Mul,
    Add,
    Scale,
    SoftCap,
    RoundBF16,
    RopeRow,
    RopeRowBF16,
    AttentionItems,
    ToF32,
    nullptr,  // pack_bf16, gemm_bf16, gemm_bf16_t: set by ops.cc on AVX512_BF16 CPUs
    nullptr,  // (cpu/gemm_bf16.h)
    nullptr,
    // Kept by ops.cc only where the CPU has AVX512_BF16 (it calls gemm_bf16).
    HWY_TARGET == HWY_AVX3 ? AttentionDotItems : nullptr,
    nullptr,  // matmul_bf16_rows: set by ops.cc on AVX512_BF16 CPUs (cpu/gemm_bf16.h)
    nullptr,  // quantize_act_row, matmul_quant_rows, packed_weight_bytes, pack_weights:
    nullptr,  // set by ops.cc (cpu/quant_matmul.h)
    nullptr,
    nullptr,
};

}  // namespace HWY_NAMESPACE
}  // namespace ocular::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ocular::cpu {

std::vector<IsaTable> HighwayTables() {
  std::vector<IsaTable> tables;
#if HWY_TARGETS & HWY_AVX3
  tables.push_back({"avx512", HWY_AVX3, &N_AVX3::kTable});
#endif
#if HWY_TARGETS & HWY_AVX2
  tables.push_back({"avx2", HWY_AVX2, &N_AVX2::kTable});
#endif
  return tables;
}

}  // namespace ocular::cpu
#endif  // HWY_ONCE

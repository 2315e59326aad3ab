// Reimplementation of Pillow's 8-bit resampling (python-pillow/Pillow, src/libImaging/Resample.c:
// precompute_coeffs, normalize_coeffs_8bpc, ImagingResampleHorizontal_8bpc /
// ImagingResampleVertical_8bpc, ImagingResampleInner). Every arithmetic step that affects the
// result (double-precision weights, their normalization, the conversion to fixed point with
// PRECISION_BITS = 32 - 8 - 2, the rounding bias, the clip after each pass, the pass order) is
// kept as Pillow has it, so the output is byte-identical.
#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"

namespace ocular {
namespace {

// 8 bits for the result plus 2 bits of headroom: filters have negative lobes, so partial sums
// can exceed 1.0 or drop below 0 before clipping.
constexpr int kPrecisionBits = 32 - 8 - 2;

struct Filter {
  double (*weight)(double x);
  double support;
};

double BilinearWeight(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution with a = -0.5 (Pillow's bicubic_filter).
double BicubicWeight(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

Filter GetFilter(ResampleFilter f) {
  return f == ResampleFilter::kBilinear ? Filter{BilinearWeight, 1.0} : Filter{BicubicWeight, 2.0};
}

// Per output position: the first input index, how many inputs contribute, and their
// fixed-point weights (ksize slots, unused ones zero).
struct Coefficients {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;  // [out_size, ksize]
};

// precompute_coeffs + normalize_coeffs_8bpc, for the whole input range (box = 0..in_size).
Coefficients ComputeCoefficients(int in_size, int out_size, const Filter& filter) {
  // Pillow computes (in1 - in0) in float; for box (0, in_size) that is exact.
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);  // antialias only when downscaling
  const double support = filter.support * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // (int) truncates toward zero, as in C; negatives are clamped to 0 right after.
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = filter.weight((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    int32_t* out = &c.weights[static_cast<size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[x] / ww : k[x];
      // Round half away from zero into fixed point.
      out[x] = w < 0 ? static_cast<int32_t>(-0.5 + w * (1 << kPrecisionBits))
                     : static_cast<int32_t>(0.5 + w * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

// Pillow's clip8: the top bits of the accumulator, clamped to [0, 255].
inline uint8_t Clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;  // arithmetic shift, as in Pillow
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);  // rounding bias

// Horizontal pass over input rows [row0, row0 + rows) → rows x c.first.size() output.
Image ResampleHorizontal(const Image& in, int row0, int rows, const Coefficients& c) {
  const int out_w = static_cast<int>(c.first.size());
  Image out(out_w, rows);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* src = in.pixel(0, y + row0);
    uint8_t* dst = out.pixel(0, y);
    for (int xx = 0; xx < out_w; ++xx, dst += 3) {
      const int32_t* k = &c.weights[static_cast<size_t>(xx) * c.ksize];
      const uint8_t* p = src + static_cast<size_t>(c.first[xx]) * 3;
      int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
      for (int x = 0; x < c.count[xx]; ++x, p += 3) {
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      dst[0] = Clip8(s0);
      dst[1] = Clip8(s1);
      dst[2] = Clip8(s2);
    }
  }
  return out;
}

// Vertical pass; c.first is relative to the first row of `in`. Rows are accumulated one input
// row at a time into an int32 row (contiguous, vectorizable); integer sums are exact, so the
// order of additions does not change the result.
Image ResampleVertical(const Image& in, const Coefficients& c) {
  const int out_h = static_cast<int>(c.first.size());
  const size_t row_bytes = static_cast<size_t>(in.width) * 3;
  Image out(in.width, out_h);
  std::vector<int32_t> acc(row_bytes);
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &c.weights[static_cast<size_t>(yy) * c.ksize];
    std::fill(acc.begin(), acc.end(), kHalf);
    for (int y = 0; y < c.count[yy]; ++y) {
      const uint8_t* src = in.pixel(0, c.first[yy] + y);
      const int32_t w = k[y];
      for (size_t i = 0; i < row_bytes; ++i) acc[i] += src[i] * w;
    }
    uint8_t* dst = out.pixel(0, yy);
    for (size_t i = 0; i < row_bytes; ++i) dst[i] = Clip8(acc[i]);
  }
  return out;
}

}  // namespace

bool ResampleFilterFromPil(int pil_code, ResampleFilter* out) {
  if (pil_code == static_cast<int>(ResampleFilter::kBilinear)) {
    *out = ResampleFilter::kBilinear;
    return true;
  }
  if (pil_code == static_cast<int>(ResampleFilter::kBicubic)) {
    *out = ResampleFilter::kBicubic;
    return true;
  }
  return false;
}

const char* ResampleFilterName(ResampleFilter f) {
  return f == ResampleFilter::kBilinear ? "bilinear" : "bicubic";
}

Image Resize(const Image& in, int width, int height, ResampleFilter filter) {
  OCULAR_CHECK(in.width > 0 && in.height > 0 &&
               in.rgb.size() == static_cast<size_t>(in.width) * in.height * 3);
  OCULAR_CHECK(width > 0 && height > 0 && width <= (1 << 24) && height <= (1 << 24));
  if (width == in.width && height == in.height) return in;  // Pillow returns a copy
  const Filter f = GetFilter(filter);
  // ImagingResampleInner: vertical coefficients first, to know which input rows the
  // horizontal pass needs; then horizontal over those rows only; then vertical.
  Coefficients vert = ComputeCoefficients(in.height, height, f);
  if (width == in.width) return ResampleVertical(in, vert);
  const Coefficients horiz = ComputeCoefficients(in.width, width, f);
  if (height == in.height) return ResampleHorizontal(in, 0, in.height, horiz);
  const int row_first = vert.first.front();
  const int row_last = vert.first.back() + vert.count.back();
  for (int& first : vert.first) first -= row_first;
  const Image temp = ResampleHorizontal(in, row_first, row_last - row_first, horiz);
  return ResampleVertical(temp, vert);
}

}  // namespace ocular

// Scalar reference of the quantized matmuls: the definition the SIMD kernels are tested
// against. Activations are quantized to int8 blocks (quant/activations.h), each weight block
// is multiplied in exact integer arithmetic, and the blocks' scaled sums accumulate in double.
// Per weight format (blocks as in quant/blocks.h; a = activation block with scale d_a, 16- or
// 32-value sums s16 / s32):
//   Q8_0  Σ_b d_w·d_a·Σ q_w·q_a
//   Q4_0  Σ_b d_w·d_a·(Σ q_w·q_a − 8·s32)                       (q_w the raw nibble)
//   Q5_0  Σ_b d_w·d_a·(Σ q_w·q_a − 16·s32)                      (q_w the raw 5-bit value)
//   Q4_K  Σ_B d_a·(d·Σ_j sc_j·Σ q_w·q_a − dmin·Σ_j m_j·(s16[2j] + s16[2j+1]))
//   Q6_K  Σ_B d_a·d·Σ_g sc_g·(Σ q_w·q_a − 32·s16[g])            (q_w the raw 6-bit value)
// — llama.cpp's ggml_vec_dot_{q8_0_q8_0, q4_0_q8_0, q4_K_q8_K, q6_K_q8_K} (ggml-cpu/quants.c).
// MatMulQuantF32 (QuantActivations::kF32) is the other mode's definition: f32 activations
// times the exactly dequantized rows, summed in double.
#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "kernels/quant/activations.h"
#include "kernels/quant/blocks.h"
#include "kernels/ref/ref_ops.h"

namespace ocular::ref {
namespace {

template <class Block>
Block BlockAt(const std::byte* row, int64_t b) {
  Block blk;  // rows are only byte-aligned
  std::memcpy(&blk, row + b * sizeof(Block), sizeof(Block));
  return blk;
}

// Σ over the row's blocks of `block_sum(block b, b)`, in double, in block order.
template <class Block, int kValues, class Fn>
double SumBlocks(const std::byte* w, int64_t K, const Fn& block_sum) {
  double sum = 0.0;
  for (int64_t b = 0; b < K / kValues; ++b) sum += block_sum(BlockAt<Block>(w, b), b);
  return sum;
}

double DotQ8_0(const std::byte* w, const quant::ActRow& a, int64_t K) {
  return SumBlocks<quant::BlockQ8_0, 32>(w, K, [&](const quant::BlockQ8_0& blk, int64_t b) {
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += blk.qs[i] * a.q[32 * b + i];
    return static_cast<double>(F16ToF32(blk.d)) * a.d[b] * s;
  });
}

// Q4_0 (kOffset 8: the raw nibble) and Q5_0 (16: the nibble | the fifth bit << 4).
template <class Block, int kOffset>
double DotSmall(const std::byte* w, const quant::ActRow& a, int64_t K) {
  return SumBlocks<Block, 32>(w, K, [&](const Block& blk, int64_t b) {
    uint32_t qh = 0;
    if constexpr (kOffset == 16) std::memcpy(&qh, blk.qh, 4);
    const int8_t* q = a.q + 32 * b;
    int32_t s = 0;
    for (int i = 0; i < 16; ++i) {
      s += ((blk.qs[i] & 0xF) | static_cast<int>(((qh >> i) & 1) << 4)) * q[i] +
           ((blk.qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1) << 4)) * q[i + 16];
    }
    return static_cast<double>(F16ToF32(blk.d)) * a.d[b] * (s - kOffset * a.sum32[b]);
  });
}

double DotQ4_K(const std::byte* w, const quant::ActRow& a, int64_t K) {
  return SumBlocks<quant::BlockQ4_K, 256>(w, K, [&](const quant::BlockQ4_K& blk, int64_t b) {
    const int8_t* q = a.q + 256 * b;
    const int16_t* s16 = a.sum16 + 16 * b;
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      quant::Q4KScaleMin(blk.scales, j, &sc, &m);
      const uint8_t* qs = blk.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int32_t s = 0;
      for (int i = 0; i < 32; ++i) s += ((qs[i] >> shift) & 0xF) * q[32 * j + i];
      isum += sc * s;
      msum += m * (s16[2 * j] + s16[2 * j + 1]);
    }
    return static_cast<double>(a.d[b]) * (static_cast<double>(F16ToF32(blk.d)) * isum -
                                          static_cast<double>(F16ToF32(blk.dmin)) * msum);
  });
}

double DotQ6_K(const std::byte* w, const quant::ActRow& a, int64_t K) {
  return SumBlocks<quant::BlockQ6_K, 256>(w, K, [&](const quant::BlockQ6_K& blk, int64_t b) {
    const int8_t* q = a.q + 256 * b;
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) {
        const int v = 16 * g + i, h = v / 128, r = v % 128;
        const int lo = (blk.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
        const int hi = (blk.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        s += (lo | (hi << 4)) * q[v];
      }
      isum += blk.scales[g] * (s - 32 * a.sum16[16 * b + g]);
    }
    return static_cast<double>(a.d[b]) * static_cast<double>(F16ToF32(blk.d)) * isum;
  });
}

}  // namespace

void MatMulQuant(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                 int64_t n1, float* out, int64_t ldo, float* scratch) {
  const WFormat f = w.format;
  double (*dot)(const std::byte*, const quant::ActRow&, int64_t) =
      f == WFormat::kQ8_0   ? DotQ8_0
      : f == WFormat::kQ4_0 ? DotSmall<quant::BlockQ4_0, 8>
      : f == WFormat::kQ5_0 ? DotSmall<quant::BlockQ5_0, 16>
      : f == WFormat::kQ4_K ? DotQ4_K
      : f == WFormat::kQ6_K ? DotQ6_K
                            : nullptr;
  OCULAR_CHECK(dot != nullptr, "HINT: MatMulQuant takes q8_0, q4_0, q5_0, q4_k or q6_k weights");
  quant::ForEachActChunk(f, a, M, K, lda, reinterpret_cast<std::byte*>(scratch),
                         kernels::MatMulScratchFloats(K) * 4, quant::QuantizeActRow,
                         [&](const std::byte* rows, int64_t m0, int64_t count, int64_t row_bytes) {
                           for (int64_t i = 0; i < count; ++i) {
                             const quant::ActRow act = quant::ActRowAt(f, rows + i * row_bytes, K);
                             for (int64_t n = n0; n < n1; ++n) {
                               out[(m0 + i) * ldo + n] = static_cast<float>(dot(w.row(n), act, K));
                             }
                           }
                         });
}

// QuantActivations::kF32: the f32 activations times the weight rows dequantized exactly
// (quant::DequantizeRow, gguf-py's values), summed in double — ref::MatMulBlock on the
// dequantized matrix.
void MatMulQuantF32(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                    int64_t n1, float* out, int64_t ldo, float* scratch) {
  OCULAR_CHECK(WFormatBlockValues(w.format) > 1, "HINT: MatMulQuantF32 takes quantized weights");
  for (int64_t n = n0; n < n1; ++n) {
    quant::DequantizeRow(w.format, w.row(n), K, scratch);
    for (int64_t m = 0; m < M; ++m) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(a[m * lda + k]) * scratch[k];
      out[m * ldo + n] = static_cast<float>(sum);
    }
  }
}

void RowToF32Quant(const Matrix& w, int64_t r, float* out) {
  quant::DequantizeRow(w.format, w.row(r), w.cols, out);
}

}  // namespace ocular::ref

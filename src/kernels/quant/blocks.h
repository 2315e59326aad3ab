// ggml's weight block formats, bit-compatible with GGUF files: encode (quantize) and decode
// (dequantize) one row, plus the block layouts the quantized kernels read.
//
// A row of `cols` values is cols / WFormatBlockValues(f) blocks stored back to back, with no
// padding and no alignment (a Q8_0 block is 34 bytes). Layouts and formulas follow
// ggml/src/ggml-common.h and ggml-quants.c (llama.cpp) and gguf-py's gguf/quants.py:
//
//   Q8_0  (32 values, 34 B):  f16 d, int8 q[32];                          x = q * d
//   Q4_0  (32 values, 18 B):  f16 d, u8 qs[16] (value j in the low nibble of qs[j], value
//                             16 + j in the high nibble);                 x = (q - 8) * d
//   Q5_0  (32 values, 22 B):  f16 d, u8 qh[4] (bit j: fifth bit of value j), u8 qs[16] as
//                             Q4_0;                                      x = (q - 16) * d
//   Q4_K  (256 values, 144 B): f16 d, f16 dmin, u8 scales[12] (eight 6-bit scales and eight
//                             6-bit mins, packed), u8 qs[128]; sub-block j of 32 values:
//                             x = (d * sc_j) * q - dmin * m_j
//   Q6_K  (256 values, 210 B): u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits), int8
//                             scales[16], f16 d; group j of 16 values:    x = (d * sc_j) * (q - 32)
//
// Every product above is one f32 multiply, in that order, so DequantizeRow equals gguf-py's
// numpy `dequantize` exactly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/matrix.h"

namespace ocular::quant {

inline constexpr int kQK8_0 = 32;  // values per Q8_0 / Q4_0 block
inline constexpr int kQK_K = 256;  // values per K-format super-block

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQK8_0];
};
struct BlockQ4_0 {
  uint16_t d;              // f16 scale
  uint8_t qs[kQK8_0 / 2];  // value j: qs[j] & 15; value 16 + j: qs[j] >> 4
};
struct BlockQ4_K {
  uint16_t d, dmin;       // f16 super-block scale for the scales and for the mins
  uint8_t scales[12];     // 6-bit scales and mins of the eight 32-value sub-blocks
  uint8_t qs[kQK_K / 2];  // 64-value chunk c: value 64c + l = qs[32c + l] & 15,
                          //                   value 64c + 32 + l = qs[32c + l] >> 4
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits (layout: ggml's dequantize_row_q6_K)
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // scale of each 16-value group
  uint16_t d;                 // f16 super-block scale
};
struct BlockQ5_0 {
  uint16_t d;              // f16 scale
  uint8_t qh[4];           // bit j (little-endian u32): bit 4 of value j
  uint8_t qs[kQK8_0 / 2];  // low 4 bits, as Q4_0
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

// Scale and min (6 bits each) of Q4_K sub-block j in [0, 8) (ggml's get_scale_min_k4).
inline void Q4KScaleMin(const uint8_t* scales, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Encodes one row of `cols` floats (cols % WFormatBlockValues(f) == 0) into
// WFormatRowBytes(f, cols) bytes.
// Every WFormat: f32 (copy), bf16 and f16 (round to nearest even, as gguf-py/numpy), q8_0,
// q4_0 and q5_0 (bit for bit gguf-py's `quantize`, i.e. ggml's quantize_row_*_ref), q4_k and
// q6_k (ggml's quantize_row_q4_K_ref / quantize_row_q6_K_ref algorithm: no importance matrix).
// REQUIRES: finite inputs (NaN/inf give unspecified blocks, never undefined behaviour).
// Thread-safe; `out` needs no alignment.
void QuantizeRow(WFormat f, const float* x, int64_t cols, std::byte* out);

// Decodes one row (every WFormat) — the scalar definition of each format; equal to gguf-py's
// `dequantize` bit for bit. Thread-safe; `row` needs no alignment.
void DequantizeRow(WFormat f, const std::byte* row, int64_t cols, float* out);

// f32 -> IEEE f16, round to nearest even (numpy's astype(float16)): overflow gives ±inf,
// NaN stays NaN.
uint16_t F32ToF16(float f);

}  // namespace ocular::quant

// The in-register 16×16 transpose of 32-bit words that the bf16 GEMMs share (gemm_bf16.cc packs
// activations with it, gemm_bf16_amx.cc turns its output tiles).
#pragma once

#include <immintrin.h>

namespace ocular::cpu {

// In-register transpose of a 16×16 matrix of 32-bit words: r[i] lane j -> r[j] lane i.
__attribute__((target("avx512f"))) inline void Transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // r[4b + c], 128-bit lane L: rows 4b..4b+3 of column 4L + c.
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // Column 4L + c gathers lane L of r[c], r[4 + c], r[8 + c], r[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512i u0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44);
    const __m512i u1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
    const __m512i u2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44);
    const __m512i u3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
    t[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(u0, u2, 0xDD);
    t[8 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

}  // namespace ocular::cpu

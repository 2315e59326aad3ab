// SIMD helpers the quantized kernels share (quant_matmul_inl.h, quant_f32_inl.h,
// quant_gemm_vnni.cc).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ocular::cpu {

// The f16 at p (a block's scale) in f32.
__attribute__((target("f16c"))) inline float LoadF16(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Q4_K's eight 6-bit scales and eight mins (12 packed bytes at p; 16 readable) as bytes
// sc[0..7], m[0..7] — quant::Q4KScaleMin (ggml's get_scale_min_k4) for all j at once:
//   j < 4:  sc = s[j] & 63,                          m = s[j+4] & 63
//   j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4,  m = (s[j+4] >> 4) | (s[j] >> 6) << 4
__attribute__((target("ssse3"))) inline __m128i Q4KScalesMins(const std::byte* p) {
  const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // a = [s0-3, s8-11, s4-7, s8-11], b = [0, s0-3, 0, s4-7]
  const __m128i a =
      _mm_shuffle_epi8(s, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i b =
      _mm_shuffle_epi8(s, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i lo = _mm_or_si128(
      _mm_and_si128(a, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
      _mm_and_si128(_mm_srli_epi16(a, 4),
                    _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
  // (x >> 6) << 4 = (x >> 2) & 0x30 per byte (the 16-bit shift's spill-over is masked off).
  return _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30)));
}

}  // namespace ocular::cpu

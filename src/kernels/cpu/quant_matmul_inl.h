// The AVX2 quantized matmul kernels' body (quant_avx2.cc includes it once, after `#pragma GCC
// target(...)` and inside its own namespace, having defined a policy struct `Isa` naming the
// instructions below; the AVX512-VNNI kernel, quant_gemm_vnni.cc, keeps one output per lane
// instead):
//
//   static __m256i DotU8(__m256i acc, __m256i w, __m256i a)
//       acc + the products w[i]·a[i] (w unsigned, < 64; a signed), summed in groups of
//       four bytes per int32 lane (any grouping inside a lane is fine: lanes are summed).
//   static __m256i PrepQ8(__m256i w);  static __m256i DotQ8(__m256i acc, __m256i w, __m256i a)
//       the same for signed weights after PrepQ8; DotQ8 computes Σ(w + kQ8Offset)·a.
//   static constexpr int kQ8Offset;    // 0 or 128 (then -kQ8Offset·Σa is folded into acc)
//   static __m256i DotScaled(__m256i acc, __m256i w, __m256i a, __m256i sc16)
//       acc + Σ over int16 lanes of (w[2i]·a[2i] + w[2i+1]·a[2i+1])·sc16[i].
//   static constexpr bool kWideTiles;  // prefill tiles of 4×4 (32 vector registers), else 4×2
//
// Numerics: the scalar reference (ref/ref_quant.cc) defines each format's sum; here every
// integer is the same, each block's integer sum is converted to f32 and scaled in f32, one
// f32 vector accumulator per output. Outputs do not depend on M, the tile or the thread split.
// 256-bit vectors throughout: a 32-value block is one register, and Zen 4 runs 512-bit
// integer ops as two 256-bit halves anyway.

namespace detail {

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

constexpr int kPrefetchBytes = 512;

inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline int32_t HSumI32(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(v);
}

// quant::QuantizeActRow, vectorized with the same arithmetic (max of |x|, quant::ActScale and
// 127 / amax, x·id clamped to ±127 and rounded half to even by vcvtps2dq), so the rows are
// byte-identical to the scalar definition (tested).
inline void QuantizeActRowSimd(WFormat f, const float* x, int64_t K, std::byte* dst) {
  const int64_t block = quant::ActBlock(f);
  const bool k_format = block == 256;
  int8_t* q = reinterpret_cast<int8_t*>(dst);
  float* d = reinterpret_cast<float*>(dst + K);
  std::byte* sums = dst + K + 4 * (K / block);
  const __m256 sign = _mm256_set1_ps(-0.0f), lo = _mm256_set1_ps(-127.0f),
               hi = _mm256_set1_ps(127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < K / block; ++b) {
    const float* xb = x + b * block;
    __m256 vmax = _mm256_setzero_ps();
    for (int64_t i = 0; i < block; i += 8)
      vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    d[b] = quant::ActScale(f, amax);
    const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    for (int64_t i = 0; i < block; i += 32) {
      __m256i v[4];
      for (int j = 0; j < 4; ++j) {
        const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(xb + i + 8 * j), id);
        v[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(y, lo), hi));
      }
      const __m256i packed = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3])),
          order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * block + i), packed);
      // Σq per 4 bytes per int32 lane: lanes 0-3 the first 16 values, 4-7 the next 16.
      const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, packed), ones16);
      const int32_t s_lo = HSumI32(_mm256_castsi256_si128(s4));
      const int32_t s_hi = HSumI32(_mm256_extracti128_si256(s4, 1));
      const int64_t g = (b * block + i) / 16;  // 16-value group index in the row
      if (k_format) {
        const int16_t pair[2] = {static_cast<int16_t>(s_lo), static_cast<int16_t>(s_hi)};
        std::memcpy(sums + 2 * g, pair, 4);
      } else {
        const int32_t s32 = s_lo + s_hi;
        std::memcpy(sums + 4 * (g / 2), &s32, 4);
      }
    }
  }
}

// Quantized activation rows of one tile (quant/activations.h layout).
template <int kM>
struct ActTile {
  quant::ActRow row[kM];
};

// ------------------------------------------------------------------ Q8_0 and Q4_0

// out[m·ldo + n] for kM activation rows × kN weight rows starting at w (stride row_bytes).
template <WFormat kF, int kM, int kN>
void Tile32(const std::byte* w, size_t row_bytes, const ActTile<kM>& act, int64_t K, float* out,
            int64_t ldo) {
  constexpr size_t kBlockBytes = kF == WFormat::kQ8_0   ? sizeof(quant::BlockQ8_0)
                                 : kF == WFormat::kQ4_0 ? sizeof(quant::BlockQ4_0)
                                                        : sizeof(quant::BlockQ5_0);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  // Q5_0: byte j of a 32-bit qh picks qh byte j / 8 and tests bit j % 8.
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  __m256 acc[kM][kN];
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) acc[m][n] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < K / 32; ++b) {
    __m256i wv[kN];
    __m256 wd[kN];
    for (int n = 0; n < kN; ++n) {
      const std::byte* blk = w + n * row_bytes + b * kBlockBytes;
      if (b % 2 == 0)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
      wd[n] = _mm256_set1_ps(LoadF16(blk));
      if constexpr (kF == WFormat::kQ8_0) {
        wv[n] = Isa::PrepQ8(Load256(blk + 2));
      } else {  // nibbles: value j low, value 16 + j high — the activations' order
        constexpr int kQs = kF == WFormat::kQ4_0 ? 2 : 6;
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQs));
        wv[n] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), low4);
        if constexpr (kF == WFormat::kQ5_0) {  // | 16 where bit j of qh is set
          int32_t qh;
          std::memcpy(&qh, blk + 2, 4);
          const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(qh), spread);
          const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
          wv[n] = _mm256_or_si256(wv[n], _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
        }
      }
    }
    for (int m = 0; m < kM; ++m) {
      const __m256i av = Load256(act.row[m].q + 32 * b);
      const __m256 ad = _mm256_set1_ps(act.row[m].d[b]);
      // The weights' offset (Q4_0: 8, Q5_0: 16; Q8_0 under VNNI: 128) times Σa, over 8 lanes.
      const int offset = kF == WFormat::kQ8_0 ? Isa::kQ8Offset : kF == WFormat::kQ4_0 ? 8 : 16;
      const __m256i corr = _mm256_set1_epi32(-(offset / 8) * act.row[m].sum32[b]);
      for (int n = 0; n < kN; ++n) {
        const __m256i dot =
            kF == WFormat::kQ8_0 ? Isa::DotQ8(corr, wv[n], av) : Isa::DotU8(corr, wv[n], av);
        acc[m][n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(wd[n], ad), acc[m][n]);
      }
    }
  }
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) out[m * ldo + n] = HSum(acc[m][n]);
  }
}

// ------------------------------------------------------------------ Q4_K and Q6_K

template <WFormat kF, int kM, int kN>
void TileK(const std::byte* w, size_t row_bytes, const ActTile<kM>& act, int64_t K, float* out,
           int64_t ldo) {
  constexpr size_t kBlockBytes =
      kF == WFormat::kQ4_K ? sizeof(quant::BlockQ4_K) : sizeof(quant::BlockQ6_K);
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(0x03);
  __m256 acc[kM][kN];
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) acc[m][n] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < K / 256; ++b) {
    // Two integer accumulators per output (even and odd chunks): half the dependency chain.
    __m256i isum[kM][kN], isum_odd[kM][kN];
    for (int m = 0; m < kM; ++m) {
      for (int n = 0; n < kN; ++n) isum[m][n] = isum_odd[m][n] = _mm256_setzero_si256();
    }
    const std::byte* blk[kN];
    // Per weight row: the per-16 scales as int16 for the offset/min correction (Q4_K: each
    // min twice, so that madd with the 16-value sums gives m_j·Σ_32), and the f16 scales.
    __m256i corr16[kN];
    float d[kN], dmin[kN];
    alignas(32) int16_t sc[kN][16];  // Q4_K: sc[0..7] (then the mins); Q6_K: 16 scales
    for (int n = 0; n < kN; ++n) {
      blk[n] = w + n * row_bytes + b * kBlockBytes;
      // kN rows stream at once: help the hardware prefetcher (as cpu/bf16_dot.cc does).
      for (size_t off = 0; off < kBlockBytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(blk[n]) + kPrefetchBytes + off, _MM_HINT_T0);
      }
      if constexpr (kF == WFormat::kQ4_K) {
        d[n] = LoadF16(blk[n]);
        dmin[n] = LoadF16(blk[n] + 2);
        const __m128i v = Q4KScalesMins(blk[n] + 4);
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc[n]), _mm256_cvtepu8_epi16(v));
        corr16[n] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(v, v));  // m0 m0 m1 m1 ... m7 m7
      } else {
        d[n] = LoadF16(blk[n] + 208);
        dmin[n] = 0.0f;
        corr16[n] =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[n] + 192)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc[n]), corr16[n]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {  // 32-value chunks (unrolled: shifts and offsets constant)
      __m256i wv[kN], sc16[kN];
      for (int n = 0; n < kN; ++n) {
        if constexpr (kF == WFormat::kQ4_K) {
          const __m256i x = Load256(blk[n] + 16 + 32 * (c / 2));
          wv[n] = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(x, 4) : x, low4);
          sc16[n] = _mm256_set1_epi16(sc[n][c]);
        } else {  // ql at 0 (low 4 bits), qh at 128 (high 2 bits); layout in quant/blocks.h
          const int h = c / 4, s = c % 4;
          const __m256i lo = Load256(blk[n] + 64 * h + 32 * (s & 1));
          const __m256i hi = Load256(blk[n] + 128 + 32 * h);
          wv[n] = _mm256_or_si256(
              _mm256_and_si256(_mm256_srli_epi16(lo, 4 * (s >> 1)), low4),
              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 2 * s), low2), 4));
          sc16[n] =
              _mm256_set_m128i(_mm_set1_epi16(sc[n][2 * c + 1]), _mm_set1_epi16(sc[n][2 * c]));
        }
      }
      for (int m = 0; m < kM; ++m) {
        const __m256i av = Load256(act.row[m].q + 256 * b + 32 * c);
        for (int n = 0; n < kN; ++n) {
          __m256i& acc_c = c % 2 ? isum_odd[m][n] : isum[m][n];
          acc_c = Isa::DotScaled(acc_c, wv[n], av, sc16[n]);
        }
      }
    }
    for (int m = 0; m < kM; ++m) {
      for (int n = 0; n < kN; ++n) isum[m][n] = _mm256_add_epi32(isum[m][n], isum_odd[m][n]);
    }
    for (int m = 0; m < kM; ++m) {
      const __m256i s16 = Load256(act.row[m].sum16 + 16 * b);
      const float ad = act.row[m].d[b];
      for (int n = 0; n < kN; ++n) {
        const __m256i corr = _mm256_madd_epi16(corr16[n], s16);
        if constexpr (kF == WFormat::kQ4_K) {  // d·Σ sc·q·a − dmin·Σ m·Σa
          acc[m][n] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m][n]), _mm256_set1_ps(d[n] * ad), acc[m][n]);
          acc[m][n] =
              _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_set1_ps(dmin[n] * ad), acc[m][n]);
        } else {  // d·Σ sc·(Σ q·a − 32·Σa)
          const __m256i total = _mm256_sub_epi32(isum[m][n], _mm256_slli_epi32(corr, 5));
          acc[m][n] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(d[n] * ad), acc[m][n]);
        }
      }
    }
  }
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) out[m * ldo + n] = HSum(acc[m][n]);
  }
}

template <WFormat kF, int kM, int kN>
void TileF(const std::byte* w, size_t row_bytes, const ActTile<kM>& act, int64_t K, float* out,
           int64_t ldo) {
  if constexpr (kF == WFormat::kQ8_0 || kF == WFormat::kQ4_0 || kF == WFormat::kQ5_0) {
    Tile32<kF, kM, kN>(w, row_bytes, act, K, out, ldo);
  } else {
    TileK<kF, kM, kN>(w, row_bytes, act, K, out, ldo);
  }
}

// Rows [i0, i0 + kM) of a quantized chunk against weight rows [n0, n1): tiles of kN weight
// rows, then singles.
template <WFormat kF, int kM, int kN>
void Rows(const std::byte* rows, int64_t row_bytes, int64_t i0, int64_t K, const Matrix& w,
          int64_t n0, int64_t n1, float* out, int64_t ldo) {
  ActTile<kM> act;
  for (int m = 0; m < kM; ++m) act.row[m] = quant::ActRowAt(kF, rows + (i0 + m) * row_bytes, K);
  int64_t n = n0;
  for (; n + kN <= n1; n += kN) TileF<kF, kM, kN>(w.row(n), w.row_bytes, act, K, out + n, ldo);
  if constexpr (kN > 1) {
    for (; n < n1; ++n) TileF<kF, kM, 1>(w.row(n), w.row_bytes, act, K, out + n, ldo);
  }
}

// Every row of a quantized chunk of `count` rows against weight rows [n0, n1): weight strips of
// 64 rows, so that a strip stays in L1/L2 while the chunk's rows pass over it in tiles of 4.
template <WFormat kF, int kN>
void ChunkRows(const std::byte* rows, int64_t row_bytes, int64_t count, int64_t K, const Matrix& w,
               int64_t n0, int64_t n1, float* out, int64_t ldo) {
  for (int64_t s0 = n0; s0 < n1; s0 += 64) {
    const int64_t s1 = std::min(n1, s0 + 64);
    int64_t i = 0;
    for (; i + 4 <= count; i += 4) {
      Rows<kF, 4, kN>(rows, row_bytes, i, K, w, s0, s1, out + i * ldo, ldo);
    }
    float* o = out + i * ldo;
    switch (count - i) {
      case 3:
        Rows<kF, 3, kN>(rows, row_bytes, i, K, w, s0, s1, o, ldo);
        break;
      case 2:
        Rows<kF, 2, kN>(rows, row_bytes, i, K, w, s0, s1, o, ldo);
        break;
      case 1:
        Rows<kF, 1, kN>(rows, row_bytes, i, K, w, s0, s1, o, ldo);
        break;
      default:
        break;
    }
  }
}

template <WFormat kF>
void MatMulFormat(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                  int64_t n1, float* out, int64_t ldo, float* scratch) {
  quant::ForEachActChunk(
      kF, a, M, K, lda, reinterpret_cast<std::byte*>(scratch), kernels::MatMulScratchFloats(K) * 4,
      QuantizeActRowSimd, [&](const std::byte* rows, int64_t m0, int64_t count, int64_t row_bytes) {
        float* o = out + m0 * ldo;
        if (count <= 8) {
          // Decode: the weights stream from DRAM once per call. One weight row at a time keeps
          // the stream sequential for the hardware prefetcher: measured 1.5-2.5× the GB/s of
          // 4- or 8-row tiles (which win in cache, by 20-40 %).
          ChunkRows<kF, 1>(rows, row_bytes, count, K, w, n0, n1, o, ldo);
        } else {  // prefill: the strip is in cache; wider tiles share the activation loads
          ChunkRows<kF, Isa::kWideTiles ? 4 : 2>(rows, row_bytes, count, K, w, n0, n1, o, ldo);
        }
      });
}

}  // namespace detail

void MatMulQuant(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                 int64_t n1, float* out, int64_t ldo, float* scratch) {
  ForQuantFormat(w.format, [&](auto f) {
    detail::MatMulFormat<decltype(f)::value>(a, M, K, lda, w, n0, n1, out, ldo, scratch);
  });
}

// The body of the quantized-weight × f32-activation matmuls (cpu/quant_matmul.h), shared by the
// 256-bit and the 512-bit translation units (no include guard: each includes it once, after
// `#pragma GCC target(...)` and inside its own namespace, having defined a policy struct `Isa`):
//
//   using V = __m256 / __m512;  static constexpr int kLanes = 8 / 16;
//   Set1, Fma(a, b, c) = a·b + c (one rounding), HSum (Zero, Load, Store, Add, Sub, Mul: Vec
//   below, on the compilers' vector operators);
//   I8ToF32(__m128i x, V* out) / U8ToF32: the 16 bytes of x (signed / unsigned) as 16 / kLanes
//       f32 vectors;
//   static constexpr int kTileM, kTileN: the prefill register tile (rows of a × panel rows);
//   static constexpr bool kTables (16-lane vectors only); Iota(s) = (s, s + 1, …, s + 15);
//       Lookup16(idx bytes, t) = t[idx]; Lookup32(idx bytes, high bits, t0, t1) = (t0|t1)[idx
//       + 16·bit]: Q4_0 / Q5_0 / Q4_K values as a table of the 16 or 32 integers' values, each
//       computed with DequantizeRow's operations, so the lookups give the same values with fewer
//       instructions than widening, converting and scaling every weight.
//
// Numerics. A 32-value chunk of a weight row is dequantized in registers with the f32
// operations of quant::DequantizeRow, in its order (compiled with -ffp-contract=off, so
// `ds·q − dm` rounds twice as there): the weights are exactly the dequantized values. Every
// output then sums a·w with f32 FMAs into two vector accumulators — vectors 0, 2, 4, … of the
// row into the first, 1, 3, 5, … into the second — and ends with HSum(first + second). The
// decode tiles (weights dequantized in registers) and the prefill tiles (weights read back from
// a dequantized f32 panel) run exactly this order, so an output does not depend on M, on the
// tile it lands in or on the thread split (tested bit for bit).

namespace detail {

using V = Isa::V;

// The lane-wise operations both widths spell alike (the TU's -ffp-contract=off keeps a·b + c
// two roundings; Isa::Fma is the one fused operation).
struct Vec : Isa {
  static V Zero() { return V{}; }
  static V Load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  }
  static void Store(float* p, V v) { std::memcpy(p, &v, sizeof(V)); }
  static V Add(V a, V b) { return a + b; }
  static V Sub(V a, V b) { return a - b; }
  static V Mul(V a, V b) { return a * b; }
};
constexpr int kL = Isa::kLanes;
constexpr int kChunkVecs = 32 / kL;  // vectors per 32-value chunk
constexpr int kHalfVecs = 16 / kL;   // vectors per 16 values

inline __m128i Load128(const std::byte* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The low / high nibbles of 16 bytes.
inline __m128i LowNibbles(__m128i x) { return _mm_and_si128(x, _mm_set1_epi8(0x0F)); }
inline __m128i HighNibbles(__m128i x) {
  return _mm_and_si128(_mm_srli_epi16(x, 4), _mm_set1_epi8(0x0F));
}

// Byte j = 0x10 where bit j of `bits` (16 bits) is set, else 0 (Q5_0's fifth bits).
inline __m128i FifthBits(uint32_t bits) {
  const __m128i spread =
      _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(bits)),
                       _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i bit = _mm_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(spread, bit), bit), _mm_set1_epi8(0x10));
}

// Per-block constants of each format: the scales DequantizeRow multiplies by, in f32.
template <WFormat kF>
struct Scales {
  float d;  // Q8_0, Q4_0, Q5_0
};
template <>
struct Scales<WFormat::kQ4_K> {
  float dl[8], ml[8];  // d·sc_j, dmin·m_j per 32-value sub-block
};
template <>
struct Scales<WFormat::kQ6_K> {
  float dl[16];  // d·sc_g per 16-value group
};

template <WFormat kF>
constexpr int kBlockValues = kF == WFormat::kQ4_K || kF == WFormat::kQ6_K ? 256 : 32;
template <WFormat kF>
constexpr size_t kBlockBytes = kF == WFormat::kQ8_0   ? sizeof(quant::BlockQ8_0)
                               : kF == WFormat::kQ4_0 ? sizeof(quant::BlockQ4_0)
                               : kF == WFormat::kQ5_0 ? sizeof(quant::BlockQ5_0)
                               : kF == WFormat::kQ4_K ? sizeof(quant::BlockQ4_K)
                                                      : sizeof(quant::BlockQ6_K);

// d · (8 bytes of x, zero- or sign-extended) in f32, stored to out[0, 8): one f32 multiply
// each, as DequantizeRow's `d * sc`.
template <bool kSigned>
inline void ScaleBytes(float d, __m128i x, float* out) {
  const __m256i i = kSigned ? _mm256_cvtepi8_epi32(x) : _mm256_cvtepu8_epi32(x);
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(i)));
}

template <WFormat kF>
inline Scales<kF> BlockScales(const std::byte* blk) {
  Scales<kF> s;
  if constexpr (kF == WFormat::kQ4_K) {  // 16 bytes readable at blk + 4 (qs follows)
    const __m128i v = Q4KScalesMins(blk + 4);
    ScaleBytes<false>(LoadF16(blk), v, s.dl);
    ScaleBytes<false>(LoadF16(blk + 2), _mm_srli_si128(v, 8), s.ml);
  } else if constexpr (kF == WFormat::kQ6_K) {
    const float d = LoadF16(blk + 208);
    const __m128i v = Load128(blk + 192);
    ScaleBytes<true>(d, v, s.dl);
    ScaleBytes<true>(d, _mm_srli_si128(v, 8), s.dl + 8);
  } else {
    s.d = LoadF16(blk);
  }
  return s;
}

// Values [32c, 32c + 32) of a block as f32 vectors w[0, kChunkVecs): DequantizeRow's values.
template <WFormat kF>
inline void Chunk(const std::byte* blk, int c, const Scales<kF>& s, V* w) {
  if constexpr (kF == WFormat::kQ8_0) {  // q·d
    Vec::I8ToF32(Load128(blk + 2), w);
    Vec::I8ToF32(Load128(blk + 18), w + kHalfVecs);
    const V d = Vec::Set1(s.d);
    for (int v = 0; v < kChunkVecs; ++v) w[v] = Vec::Mul(w[v], d);
  } else if constexpr ((kF == WFormat::kQ4_0 || kF == WFormat::kQ5_0) && Isa::kTables) {
    constexpr int kQs = kF == WFormat::kQ4_0 ? 2 : 6;
    const __m128i x = Load128(blk + kQs);
    const V d = Vec::Set1(s.d);
    if constexpr (kF == WFormat::kQ4_0) {  // t[j] = d·(j − 8)
      const V t = Vec::Mul(d, Vec::Iota(-8));
      w[0] = Vec::Lookup16(LowNibbles(x), t);
      w[1] = Vec::Lookup16(HighNibbles(x), t);
    } else {  // t[j] = d·(j − 16), j < 32
      uint32_t qh;
      std::memcpy(&qh, blk + 2, 4);
      const V t0 = Vec::Mul(d, Vec::Iota(-16)), t1 = Vec::Mul(d, Vec::Iota(0));
      w[0] = Vec::Lookup32(LowNibbles(x), qh & 0xFFFF, t0, t1);
      w[1] = Vec::Lookup32(HighNibbles(x), qh >> 16, t0, t1);
    }
  } else if constexpr (kF == WFormat::kQ4_0 || kF == WFormat::kQ5_0) {  // d·(q − 8), d·(q − 16)
    constexpr int kQs = kF == WFormat::kQ4_0 ? 2 : 6;
    const __m128i x = Load128(blk + kQs);
    __m128i lo = LowNibbles(x), hi = HighNibbles(x);
    if constexpr (kF == WFormat::kQ5_0) {
      uint32_t qh;
      std::memcpy(&qh, blk + 2, 4);
      lo = _mm_sub_epi8(_mm_or_si128(lo, FifthBits(qh & 0xFFFF)), _mm_set1_epi8(16));
      hi = _mm_sub_epi8(_mm_or_si128(hi, FifthBits(qh >> 16)), _mm_set1_epi8(16));
    } else {
      lo = _mm_sub_epi8(lo, _mm_set1_epi8(8));
      hi = _mm_sub_epi8(hi, _mm_set1_epi8(8));
    }
    Vec::I8ToF32(lo, w);
    Vec::I8ToF32(hi, w + kHalfVecs);
    const V d = Vec::Set1(s.d);
    for (int v = 0; v < kChunkVecs; ++v) w[v] = Vec::Mul(d, w[v]);
  } else if constexpr (kF == WFormat::kQ4_K) {  // (d·sc)·q − dmin·m, sub-block c
    const std::byte* qs = blk + 16 + 32 * (c / 2);
    const V dl = Vec::Set1(s.dl[c]), ml = Vec::Set1(s.ml[c]);
    if constexpr (Isa::kTables) {  // t[j] = (d·sc)·j − dmin·m
      const V t = Vec::Sub(Vec::Mul(dl, Vec::Iota(0)), ml);
      for (int i = 0; i < 2; ++i) {
        const __m128i x = Load128(qs + 16 * i);
        w[i] = Vec::Lookup16(c % 2 ? HighNibbles(x) : LowNibbles(x), t);
      }
      return;
    }
    for (int i = 0; i < 2; ++i) {
      const __m128i x = Load128(qs + 16 * i);
      Vec::U8ToF32(c % 2 ? HighNibbles(x) : LowNibbles(x), w + kHalfVecs * i);
    }
    for (int v = 0; v < kChunkVecs; ++v) w[v] = Vec::Sub(Vec::Mul(dl, w[v]), ml);
  } else {  // Q6_K: (d·sc)·(q − 32); ql at 0 (low 4 bits), qh at 128 (high 2), quant/blocks.h
    const int h = c / 4, sub = c % 4;
    const std::byte* ql = blk + 64 * h + 32 * (sub & 1);
    const std::byte* qh = blk + 128 + 32 * h;
    for (int i = 0; i < 2; ++i) {
      const __m128i l = _mm_srli_epi16(Load128(ql + 16 * i), 4 * (sub >> 1));
      const __m128i hb = _mm_srli_epi16(Load128(qh + 16 * i), 2 * sub);
      const __m128i q = _mm_or_si128(_mm_and_si128(l, _mm_set1_epi8(0x0F)),
                                     _mm_slli_epi16(_mm_and_si128(hb, _mm_set1_epi8(0x03)), 4));
      Vec::I8ToF32(_mm_sub_epi8(q, _mm_set1_epi8(32)), w + kHalfVecs * i);
      const V dl = Vec::Set1(s.dl[2 * c + i]);
      for (int v = 0; v < kHalfVecs; ++v) w[kHalfVecs * i + v] = Vec::Mul(dl, w[kHalfVecs * i + v]);
    }
  }
}

constexpr int kPrefetchBytes = 512;

// Prefetches the bytes kPrefetchBytes ahead of block b of a row: one prefetch per 64 bytes
// streamed (the K formats' blocks span 3-4 lines; a 32-value block starts a new line about
// every second or third block).
template <WFormat kF>
inline void PrefetchAhead(const std::byte* blk, int64_t b) {
  if constexpr (kBlockBytes<kF> < 64) {
    if ((static_cast<size_t>(b) * kBlockBytes<kF>) % 64 >= kBlockBytes<kF>) return;
  }
  for (size_t off = 0; off < kBlockBytes<kF>; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + off, _MM_HINT_T0);
  }
}

// The whole row, dequantized (the prefill panel; DequantizeRowAvx2/Avx512 for tests).
template <WFormat kF>
void DequantizeRowT(const std::byte* row, int64_t K, float* out) {
  for (int64_t b = 0; b < K / kBlockValues<kF>; ++b) {
    const std::byte* blk = row + b * kBlockBytes<kF>;
    const Scales<kF> s = BlockScales<kF>(blk);
    for (int c = 0; c < kBlockValues<kF> / 32; ++c) {
      V w[kChunkVecs];
      Chunk<kF>(blk, c, s, w);
      float* o = out + b * kBlockValues<kF> + 32 * c;
      for (int v = 0; v < kChunkVecs; ++v) Vec::Store(o + kL * v, w[v]);
    }
  }
}

inline float Finish(V even, V odd) { return Vec::HSum(Vec::Add(even, odd)); }

// ------------------------------------------------------------------ decode (M <= 8)

// out[m·ldo] = dot(a row m, weight row) for kM rows of a: the row dequantized once, in
// registers, for all kM rows.
template <WFormat kF, int kM>
void DecodeRow(const float* a, int64_t lda, const std::byte* row, int64_t K, float* out,
               int64_t ldo) {
  V acc[kM][2];
  for (int m = 0; m < kM; ++m) acc[m][0] = acc[m][1] = Vec::Zero();
  for (int64_t b = 0; b < K / kBlockValues<kF>; ++b) {
    const std::byte* blk = row + b * kBlockBytes<kF>;
    PrefetchAhead<kF>(blk, b);
    const Scales<kF> s = BlockScales<kF>(blk);
#pragma GCC unroll 8
    for (int c = 0; c < kBlockValues<kF> / 32; ++c) {
      V w[kChunkVecs];
      Chunk<kF>(blk, c, s, w);
      const int64_t k = b * kBlockValues<kF> + 32 * c;
      for (int m = 0; m < kM; ++m) {
        for (int v = 0; v < kChunkVecs; ++v) {
          acc[m][v % 2] = Vec::Fma(Vec::Load(a + m * lda + k + kL * v), w[v], acc[m][v % 2]);
        }
      }
    }
  }
  for (int m = 0; m < kM; ++m) out[m * ldo] = Finish(acc[m][0], acc[m][1]);
}

// Rows [0, kM) of a against weight rows [n0, n1), one weight row at a time: a sequential
// stream the hardware prefetcher follows (as the int8 decode does).
template <WFormat kF, int kM>
void DecodeRows(const float* a, int64_t lda, const Matrix& w, int64_t K, int64_t n0, int64_t n1,
                float* out, int64_t ldo) {
  for (int64_t n = n0; n < n1; ++n) DecodeRow<kF, kM>(a, lda, w.row(n), K, out + n, ldo);
}

// Up to 8 rows: groups of 4 over strips of 64 weight rows (a strip stays in cache for the
// second group).
template <WFormat kF>
void Decode(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
            int64_t n1, float* out, int64_t ldo) {
  const int64_t strip = M > 4 ? 64 : n1 - n0;
  for (int64_t s0 = n0; s0 < n1; s0 += strip) {
    const int64_t s1 = std::min(n1, s0 + strip);
    for (int64_t i = 0; i < M; i += 4) {
      const float* ai = a + i * lda;
      float* oi = out + i * ldo;
      switch (std::min<int64_t>(4, M - i)) {
        case 4:
          DecodeRows<kF, 4>(ai, lda, w, K, s0, s1, oi, ldo);
          break;
        case 3:
          DecodeRows<kF, 3>(ai, lda, w, K, s0, s1, oi, ldo);
          break;
        case 2:
          DecodeRows<kF, 2>(ai, lda, w, K, s0, s1, oi, ldo);
          break;
        default:
          DecodeRows<kF, 1>(ai, lda, w, K, s0, s1, oi, ldo);
          break;
      }
    }
  }
}

// ------------------------------------------------------------------ prefill (M > 8)

// out[m·ldo + n] for kM rows of a × kN rows of the f32 panel (row stride K), in the decode's
// order: vectors 2i into acc[·][·][0], 2i + 1 into acc[·][·][1].
template <int kM, int kN>
void PanelTile(const float* a, int64_t lda, const float* panel, int64_t K, float* out,
               int64_t ldo) {
  V acc[kM][kN][2];
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) acc[m][n][0] = acc[m][n][1] = Vec::Zero();
  }
  for (int64_t k = 0; k < K; k += 2 * kL) {
    for (int h = 0; h < 2; ++h) {
      V wv[kN];
      for (int n = 0; n < kN; ++n) wv[n] = Vec::Load(panel + n * K + k + kL * h);
      for (int m = 0; m < kM; ++m) {
        const V av = Vec::Load(a + m * lda + k + kL * h);
        for (int n = 0; n < kN; ++n) acc[m][n][h] = Vec::Fma(av, wv[n], acc[m][n][h]);
      }
    }
  }
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) out[m * ldo + n] = Finish(acc[m][n][0], acc[m][n][1]);
  }
}

// kM rows of a × panel rows [0, count): tiles of kTileN rows, then the rest.
template <int kM>
void PanelRows(const float* a, int64_t lda, const float* panel, int64_t count, int64_t K,
               float* out, int64_t ldo) {
  int64_t n = 0;
  for (; n + Isa::kTileN <= count; n += Isa::kTileN) {
    PanelTile<kM, Isa::kTileN>(a, lda, panel + n * K, K, out + n, ldo);
  }
  for (; n < count; ++n) PanelTile<kM, 1>(a, lda, panel + n * K, K, out + n, ldo);
}

// Blocks of 64 rows of a; per block, strips of 24 weight rows dequantized into the f32 panel
// (scratch: MatMulScratchFloats(K) = 24·K floats) and multiplied by every row of the block.
constexpr int64_t kRowBlock = 64;
constexpr int64_t kStrip = 24;

template <WFormat kF>
void Prefill(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
             int64_t n1, float* out, int64_t ldo, float* panel) {
  static_assert(Isa::kTileM <= 4);
  for (int64_t mb = 0; mb < M; mb += kRowBlock) {
    const int64_t mb_end = std::min(M, mb + kRowBlock);
    for (int64_t ns = n0; ns < n1; ns += kStrip) {
      const int64_t count = std::min(n1, ns + kStrip) - ns;
      for (int64_t r = 0; r < count; ++r) DequantizeRowT<kF>(w.row(ns + r), K, panel + r * K);
      for (int64_t m = mb; m < mb_end; m += Isa::kTileM) {
        const float* am = a + m * lda;
        float* om = out + m * ldo + ns;
        switch (std::min<int64_t>(Isa::kTileM, mb_end - m)) {
          case 4:
            PanelRows<4>(am, lda, panel, count, K, om, ldo);
            break;
          case 3:
            PanelRows<3>(am, lda, panel, count, K, om, ldo);
            break;
          case 2:
            PanelRows<2>(am, lda, panel, count, K, om, ldo);
            break;
          default:
            PanelRows<1>(am, lda, panel, count, K, om, ldo);
            break;
        }
      }
    }
  }
}

template <WFormat kF>
void MatMulFormat(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                  int64_t n1, float* out, int64_t ldo, float* scratch) {
  if (M <= 8) return Decode<kF>(a, M, K, lda, w, n0, n1, out, ldo);
  Prefill<kF>(a, M, K, lda, w, n0, n1, out, ldo, scratch);
}

}  // namespace detail

void MatMulQuantF32(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                    int64_t n1, float* out, int64_t ldo, float* scratch) {
  ForQuantFormat(w.format, [&](auto f) {
    detail::MatMulFormat<decltype(f)::value>(a, M, K, lda, w, n0, n1, out, ldo, scratch);
  });
}

void DequantizeRowSimd(WFormat f, const std::byte* row, int64_t K, float* out) {
  ForQuantFormat(f, [&](auto t) { detail::DequantizeRowT<decltype(t)::value>(row, K, out); });
}

// AVX512-VNNI quantized matmul with one output per 32-bit lane (cpu/quant_matmul.h,
// MatMulQuantVnni): strips of 16 weight rows are unpacked, 512 values at a time, into a small
// packed panel — vector v holds values 4v..4v+3 of each of the 16 rows as unsigned bytes, plus
// each block's scales per row — and `vpdpbusd` multiplies it by 4 broadcast activation bytes, 64
// products per instruction (llama.cpp's repacked AVX-512 GEMMs interleave rows the same way:
// ggml-cpu/repack.cpp, block_q8_0x4 / block_q4_Kx8; we repack per call, in the thread's
// scratch, so the weights stay in the GGUF layout — except Q8_0, whose panel layout takes no
// more bytes than its blocks: the loaders pack it once (PackQ8_0Vnni, Matrix::packed) and the
// tiles read it in place).
//
// Numerics (the same for every M, tile and thread split, so batching never changes a row):
// per output and weight block b, the integer sum of the block — exactly ref/ref_quant.cc's —
// is converted to f32 and added as acc = fma(f32(isum_b), d_b · d_a, acc), in block order, one
// chain per output (Q4_K: then acc = fnmadd(f32(Σ m·Σa), dmin_b · d_a, acc)). The integers:
//   Q8_0 / Q4_0 / Q5_0  Σ (q + o)·a − o·Σa, with o = 128 / 8 / 16 (q + o is the unsigned byte)
//   Q4_K                Σ_j sc_j·Σ q·a over its eight 32-value sub-blocks; Σ_j m_j·Σa apart
//   Q6_K                Σ_j sc_j·(Σ q·a − 32·Σa) over its sixteen 16-value sub-blocks
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized inside its masked-load and set1
// intrinsics (an intentionally undefined pass-through operand); nothing here is uninitialized.
// Set before the includes: the warnings point into the intrinsics' header.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "kernels/cpu/quant_dispatch.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/cpu/transpose16.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/activations.h"
#include "kernels/quant/blocks.h"

#if defined(__clang__)
#pragma clang attribute push(                                                      \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
#endif

namespace ocular::cpu {
namespace {

constexpr int kLanes = 16;             // weight rows per strip: one output per 32-bit lane
constexpr int kMaxTile = 8;            // activation rows per register tile
constexpr int64_t kPanelValues = 512;  // K values packed at a time (panel in L1)
constexpr int64_t kDecodeRows = 8;     // chunks of up to this many rows read the weights in place

constexpr bool IsK(WFormat f) { return f == WFormat::kQ4_K || f == WFormat::kQ6_K; }
constexpr int64_t BlockValues(WFormat f) { return IsK(f) ? 256 : 32; }
// Sub-blocks with an integer scale per block: Q4_K 8 × 32 values, Q6_K 16 × 16; others none.
constexpr int Subs(WFormat f) { return f == WFormat::kQ4_K ? 8 : f == WFormat::kQ6_K ? 16 : 0; }
constexpr size_t BlockBytes(WFormat f) {
  switch (f) {
    case WFormat::kQ8_0:
      return sizeof(quant::BlockQ8_0);
    case WFormat::kQ4_0:
      return sizeof(quant::BlockQ4_0);
    case WFormat::kQ5_0:
      return sizeof(quant::BlockQ5_0);
    case WFormat::kQ4_K:
      return sizeof(quant::BlockQ4_K);
    default:
      return sizeof(quant::BlockQ6_K);
  }
}

// One packed panel of a strip: `blocks` weight blocks of 16 rows.
//   q      u8 [values / 4][16][4]: vector v = values 4v..4v+3 of rows 0..15
//   d      f32 [blocks][16]; dmin f32 [blocks][16] (Q4_K)
//   sc     i32 [blocks][Subs][16] (K formats)
//   pairs  i32 [blocks][8][16]: int16 pairs multiplied with the activations' adjacent 16-value
//          sums: Q4_K (m_p, m_p) — its mins; Q6_K (sc_2p, sc_2p+1) — the offset 32's correction
struct Panel {
  uint8_t* q;
  float* d;
  float* dmin;
  int32_t* sc;
  int32_t* pairs;
};

template <WFormat kF>
constexpr int64_t PanelBytesPerBlock() {
  constexpr int64_t values = BlockValues(kF);
  return values * kLanes + 4 * kLanes * (1 + (kF == WFormat::kQ4_K) + Subs(kF) + (IsK(kF) ? 8 : 0));
}

template <WFormat kF>
Panel PanelAt(std::byte* base, int64_t blocks) {
  Panel p;
  p.q = reinterpret_cast<uint8_t*>(base);
  float* f = reinterpret_cast<float*>(base + blocks * BlockValues(kF) * kLanes);
  p.d = f;
  p.dmin = f + blocks * kLanes;
  int32_t* i = reinterpret_cast<int32_t*>(p.dmin + (kF == WFormat::kQ4_K ? blocks * kLanes : 0));
  p.sc = i;
  p.pairs = i + blocks * Subs(kF) * kLanes;
  return p;
}

inline __m256i Load256(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline int32_t Load32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 32 unsigned bytes of 32-value chunk c (values 32c..32c+31) of block `blk`.
template <WFormat kF>
inline __m256i ChunkU8(const std::byte* blk, int c) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (kF == WFormat::kQ8_0) {  // q + 128
    return _mm256_xor_si256(Load256(blk + 2), _mm256_set1_epi8(-128));
  } else if constexpr (kF == WFormat::kQ4_0 || kF == WFormat::kQ5_0) {
    // nibbles: value j low, value 16 + j high (quant/blocks.h)
    constexpr int kQs = kF == WFormat::kQ4_0 ? 2 : 6;
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQs));
    __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), low4);
    if constexpr (kF == WFormat::kQ5_0) {  // | 16 where bit j of qh is set
      const __mmask32 qh = static_cast<__mmask32>(static_cast<uint32_t>(Load32(blk + 2)));
      v = _mm256_mask_blend_epi8(qh, v, _mm256_or_si256(v, _mm256_set1_epi8(0x10)));
    }
    return v;
  } else if constexpr (kF == WFormat::kQ4_K) {  // chunk c: low (even c) / high nibbles
    const __m256i x = Load256(blk + 16 + 32 * (c / 2));
    return _mm256_and_si256(c % 2 ? _mm256_srli_epi16(x, 4) : x, low4);
  } else {  // Q6_K: ql at 0 (low 4 bits), qh at 128 (high 2 bits); ggml's dequantize_row_q6_K
    const int h = c / 4, s = c % 4;
    const __m256i lo = Load256(blk + 64 * h + 32 * (s & 1));
    const __m256i hi = Load256(blk + 128 + 32 * h);
    return _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi16(lo, 4 * (s >> 1)), low4),
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 2 * s), _mm256_set1_epi8(3)), 4));
  }
}

// Q4_K's 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
inline void Q4KScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

inline int32_t Pair16(int lo, int hi) {
  return static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16) |
                              static_cast<uint16_t>(lo));
}

// The scales of block `blk` of strip row r into block slot b of the panel.
template <WFormat kF>
inline void PackScales(const std::byte* blk, int64_t b, int r, const Panel& p) {
  if constexpr (kF == WFormat::kQ4_K) {
    p.d[b * kLanes + r] = LoadF16(blk);
    p.dmin[b * kLanes + r] = LoadF16(blk + 2);
    const uint8_t* s = reinterpret_cast<const uint8_t*>(blk + 4);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      Q4KScaleMin(s, j, &sc, &m);
      p.sc[(b * 8 + j) * kLanes + r] = sc;
      p.pairs[(b * 8 + j) * kLanes + r] = Pair16(m, m);
    }
  } else if constexpr (kF == WFormat::kQ6_K) {
    p.d[b * kLanes + r] = LoadF16(blk + 208);
    const int8_t* s = reinterpret_cast<const int8_t*>(blk + 192);
    for (int j = 0; j < 16; ++j) p.sc[(b * 16 + j) * kLanes + r] = s[j];
    for (int j = 0; j < 8; ++j) p.pairs[(b * 8 + j) * kLanes + r] = Pair16(s[2 * j], s[2 * j + 1]);
  } else {
    p.d[b * kLanes + r] = LoadF16(blk);
  }
}

// Chunks c and c + 1 (zero past `chunks`) of the blocks from b0 of strip rows [0, rows) (the
// rest zero), as vector v = values 4v..4v+3 of the 16 rows: v < 8 chunk c, v >= 8 chunk c + 1.
template <WFormat kF>
inline void ChunkPair(const std::byte* row0, size_t row_bytes, int rows, int64_t b0, int64_t chunks,
                      int64_t c, __m512i (&r)[16]) {
  constexpr int kChunks = static_cast<int>(BlockValues(kF) / 32);  // 32-value chunks per block
  for (int i = 0; i < kLanes; ++i) {
    if (i >= rows) {
      r[i] = _mm512_setzero_si512();
      continue;
    }
    const std::byte* row = row0 + i * row_bytes;
    const int64_t c1 = c + 1;
    const __m256i lo =
        ChunkU8<kF>(row + (b0 + c / kChunks) * BlockBytes(kF), static_cast<int>(c % kChunks));
    const __m256i hi = c1 < chunks ? ChunkU8<kF>(row + (b0 + c1 / kChunks) * BlockBytes(kF),
                                                 static_cast<int>(c1 % kChunks))
                                   : _mm256_setzero_si256();
    r[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
  Transpose16(r);
}

// Packs blocks [b0, b0 + nb) of strip rows [0, rows) (the rest zero) at `row0` (rows
// row_bytes apart) into panel p: two 32-value chunks per row at a time, one 16×16 transpose of
// 32-bit words for the 16 rows.
template <WFormat kF>
void PackPanel(const std::byte* row0, size_t row_bytes, int rows, int64_t b0, int64_t nb,
               const Panel& p) {
  const int64_t chunks = nb * (BlockValues(kF) / 32);
  for (int64_t c = 0; c < chunks; c += 2) {
    __m512i r[16];
    ChunkPair<kF>(row0, row_bytes, rows, b0, chunks, c, r);
    const int vectors = c + 1 < chunks ? 16 : 8;
    for (int v = 0; v < vectors; ++v) _mm512_storeu_si512(p.q + (8 * c + v) * 64, r[v]);
  }
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < kLanes; ++r) {
      if (r < rows) {
        PackScales<kF>(row0 + r * row_bytes + (b0 + b) * BlockBytes(kF), b, r, p);
      } else {
        p.d[b * kLanes + r] = 0.0f;
        if constexpr (kF == WFormat::kQ4_K) p.dmin[b * kLanes + r] = 0.0f;
        for (int j = 0; j < Subs(kF); ++j) p.sc[(b * Subs(kF) + j) * kLanes + r] = 0;
        if constexpr (IsK(kF)) {
          for (int j = 0; j < 8; ++j) p.pairs[(b * 8 + j) * kLanes + r] = 0;
        }
      }
    }
  }
}

inline __m512i Bcast(const int8_t* p) { return _mm512_set1_epi32(Load32(p)); }

// Where Blocks32 finds block b's 8 vectors of unsigned bytes and its 16 rows' d: a panel packed
// per call, or a strip of Q8_0 weights packed at load (PackQ8_0Vnni: 512 bytes of vectors, then
// the 16 f16 d, per block — the GGUF's bytes, reordered).
struct PanelBlocks {
  const Panel& p;
  const uint8_t* q(int64_t b) const { return p.q + 8 * b * 64; }
  __m512 d(int64_t b) const { return _mm512_loadu_ps(p.d + b * kLanes); }
  void Prefetch(int64_t) const {}
};
constexpr int64_t kPackedQ8Block = 32 * kLanes + 2 * kLanes;  // bytes per block of a strip
struct PackedQ8Blocks {
  const std::byte* strip;  // block 0 of the slice
  bool stream;             // read once (decode rows): prefetch 8 blocks (4 KiB) ahead
  const uint8_t* q(int64_t b) const {
    return reinterpret_cast<const uint8_t*>(strip + b * kPackedQ8Block);
  }
  __m512 d(int64_t b) const { return _mm512_cvtph_ps(Load256(strip + b * kPackedQ8Block + 512)); }
  // The hardware prefetchers stop at 4 KiB boundaries. Past the slice, the prefetch reads the
  // strip's or the next strip's bytes, or names an address past the end (harmless). Measured
  // end to end, q8_0 decode on a Sapphire Rapids VM: 1.04× (six alternating pairs).
  void Prefetch(int64_t b) const {
    if (!stream) return;
    const uintptr_t p = reinterpret_cast<uintptr_t>(strip) + (b + 8) * kPackedQ8Block;
    for (int i = 0; i < kPackedQ8Block; i += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
  }
};

// acc[m] over the panel's nb blocks for kM activation rows (act[m]: quantized rows, their
// blocks b0..): Q8_0 / Q4_0 / Q5_0.
template <WFormat kF, int kM, class Src>
inline void Blocks32(const Src& p, int64_t nb, const quant::ActRow* act, int64_t b0,
                     __m512 (&acc)[kM]) {
  constexpr int kOffset = kF == WFormat::kQ8_0 ? 128 : kF == WFormat::kQ4_0 ? 8 : 16;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t ab = b0 + b;
    p.Prefetch(b);
    __m512i isum[kM];
    for (int m = 0; m < kM; ++m) isum[m] = _mm512_set1_epi32(-kOffset * act[m].sum32[ab]);
    for (int v = 0; v < 8; ++v) {
      const __m512i w = _mm512_loadu_si512(p.q(b) + v * 64);
      for (int m = 0; m < kM; ++m)
        isum[m] = _mm512_dpbusd_epi32(isum[m], w, Bcast(act[m].q + 32 * ab + 4 * v));
    }
    const __m512 d = p.d(b);
    for (int m = 0; m < kM; ++m) {
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]),
                               _mm512_mul_ps(d, _mm512_set1_ps(act[m].d[ab])), acc[m]);
    }
  }
}

// The same for Q4_K / Q6_K super-blocks.
template <WFormat kF, int kM>
inline void BlocksK(const Panel& p, int64_t nb, const quant::ActRow* act, int64_t b0,
                    __m512 (&acc)[kM]) {
  constexpr int kSubs = Subs(kF), kVecs = 64 / kSubs;  // 4-value vectors per sub-block
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t ab = b0 + b;
    __m512i isum[kM], corr[kM];
    for (int m = 0; m < kM; ++m) isum[m] = corr[m] = _mm512_setzero_si512();
    for (int j = 0; j < kSubs; ++j) {
      __m512i s[kM];
      for (int m = 0; m < kM; ++m) s[m] = _mm512_setzero_si512();
      for (int v = 0; v < kVecs; ++v) {
        const __m512i w = _mm512_loadu_si512(p.q + (64 * b + kVecs * j + v) * 64);
        for (int m = 0; m < kM; ++m) {
          s[m] = _mm512_dpbusd_epi32(s[m], w, Bcast(act[m].q + 256 * ab + 4 * (kVecs * j + v)));
        }
      }
      const __m512i sc = _mm512_loadu_si512(p.sc + (b * kSubs + j) * kLanes);
      for (int m = 0; m < kM; ++m)
        isum[m] = _mm512_add_epi32(isum[m], _mm512_mullo_epi32(s[m], sc));
    }
    for (int j = 0; j < 8; ++j) {  // Σ pair · (Σa over 16 values 32j.., over the next 16)
      const __m512i pr = _mm512_loadu_si512(p.pairs + (b * 8 + j) * kLanes);
      for (int m = 0; m < kM; ++m) {
        const __m512i sums = _mm512_set1_epi32(Load32(act[m].sum16 + 16 * ab + 2 * j));
        corr[m] = _mm512_dpwssd_epi32(corr[m], pr, sums);
      }
    }
    const __m512 d = _mm512_loadu_ps(p.d + b * kLanes);
    for (int m = 0; m < kM; ++m) {
      const __m512 ad = _mm512_set1_ps(act[m].d[ab]);
      if constexpr (kF == WFormat::kQ4_K) {  // d·Σ sc·q·a − dmin·Σ m·Σa
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]), _mm512_mul_ps(d, ad), acc[m]);
        const __m512 dmin = _mm512_loadu_ps(p.dmin + b * kLanes);
        acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr[m]), _mm512_mul_ps(dmin, ad), acc[m]);
      } else {  // d·Σ sc·(Σ q·a − 32·Σa)
        const __m512i total = _mm512_sub_epi32(isum[m], _mm512_slli_epi32(corr[m], 5));
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, ad), acc[m]);
      }
    }
  }
}

// Rows [i0, i0 + kM) of a quantized activation chunk times the panel (blocks b0 .. b0 + nb of
// the row): out[m][0, 16) (lanes under `mask`) holds the running sums; `first` starts them.
template <WFormat kF, int kM, class Src = Panel>
void PanelTile(const Src& p, int64_t nb, const std::byte* rows, int64_t row_bytes, int64_t i0,
               int64_t K, int64_t b0, bool first, float* out, int64_t ldo, __mmask16 mask) {
  quant::ActRow act[kM];
  __m512 acc[kM];
  for (int m = 0; m < kM; ++m) {
    act[m] = quant::ActRowAt(kF, rows + (i0 + m) * row_bytes, K);
    acc[m] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, out + m * ldo);
  }
  if constexpr (!std::is_same_v<Src, Panel>) {
    Blocks32<kF, kM>(p, nb, act, b0, acc);
  } else if constexpr (IsK(kF)) {
    BlocksK<kF, kM>(p, nb, act, b0, acc);
  } else {
    Blocks32<kF, kM>(PanelBlocks{p}, nb, act, b0, acc);
  }
  for (int m = 0; m < kM; ++m) _mm512_mask_storeu_ps(out + m * ldo, mask, acc[m]);
}

template <class Src>
using PanelTileFn = void (*)(const Src&, int64_t, const std::byte*, int64_t, int64_t, int64_t,
                             int64_t, bool, float*, int64_t, __mmask16);
template <WFormat kF, class Src, int... kM>
constexpr PanelTileFn<Src> kTiles[] = {PanelTile<kF, kM, Src>...};

// ------------------------------------------------------------------ decode rows
// Few activation rows (decode) do not repay a panel's packing: the weights are read in place,
// 16 rows a strip — Q8_0 / Q4_0 / Q5_0 a block of the 16 rows at a time (DecodeStrip), Q4_K /
// Q6_K one row at a time (DecodeStripK) — each row's integer partial sums kept in lanes and then
// summed across lanes into one lane per row: the integers, and so the outputs, equal the
// panels' bit for bit.

// z[i]: lanes 0-7 row i's partial sums, lanes 8-15 row i + 8's. Returns lane r = row r's sum.
inline __m512i SumLanes(const __m512i (&z)[8]) {
  __m512i y[4], x[2];
  for (int k = 0; k < 4; ++k) {  // per 128-bit lane: (A0+A2, B0+B2, A1+A3, B1+B3)
    y[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2 * k], z[2 * k + 1]),
                            _mm512_unpackhi_epi32(z[2 * k], z[2 * k + 1]));
  }
  for (int k = 0; k < 2; ++k) {  // per 128-bit lane: rows 4k..4k+3 (halves 0-1) or 4k+8.. (2-3)
    x[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(y[2 * k], y[2 * k + 1]),
                            _mm512_unpackhi_epi64(y[2 * k], y[2 * k + 1]));
  }
  const __m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_i32x4(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_shuffle_i32x4(s, s, _MM_SHUFFLE(3, 1, 2, 0));  // rows 0-3, 4-7, 8-11, 12-15
}

inline __m512i Pair256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// One row's K-format super-block against kM activation rows (their super-block b), in 8 int32
// lanes each: isum = Σ_j sc_j·Σ q·a (maddubs pairs, then vpdpwssd by the int16 scales), corr =
// the Σa term (Q4_K: Σ m_j·Σa_j; Q6_K: Σ sc_j·Σa_j). The weights are decoded once for all rows.
template <WFormat kF, int kM>
inline void RowK(const std::byte* blk, const quant::ActRow* act, int64_t b, __m256i (&isum)[kM],
                 __m256i (&corr)[kM]) {
  // 64 values (two 32-value chunks) per 512-bit step; two accumulator chains per row (even and
  // odd steps), added at the end: the integers are the same in any order.
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m256i scales;  // int16: Q4_K sc0..7 then m0..7; Q6_K the 16 scales
  if constexpr (kF == WFormat::kQ4_K) {
    scales = _mm256_cvtepu8_epi16(Q4KScalesMins(blk + 4));
  } else {
    scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
  }
  const __m512i sc512 = _mm512_castsi256_si512(scales);
  __m512i acc[2][kM];
  for (int m = 0; m < kM; ++m) acc[0][m] = acc[1][m] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  // chunks 2j (lanes 0-15) and 2j + 1 (lanes 16-31)
    __m512i wv, idx;
    if constexpr (kF == WFormat::kQ4_K) {  // 32 bytes: low nibbles chunk 2j, high 2j + 1
      const __m256i x = Load256(blk + 16 + 32 * j);
      wv = _mm512_and_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(x), _mm256_srli_epi16(x, 4), 1), low4);
      idx = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * j)),
                               _mm256_set1_epi16(static_cast<int16_t>(2 * j + 1)), 1);
    } else {  // Q6_K chunks 2j, 2j + 1: ql 64 bytes at 64h, shifted by 4(j%2); qh at 128 + 32h
      const int h = j / 2, s0 = 2 * (j % 2);
      const __m512i lo = _mm512_loadu_si512(blk + 64 * h);
      const __m256i hi = Load256(blk + 128 + 32 * h);
      const __m512i hi2 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(hi, 2 * s0)),
                                             _mm256_srli_epi16(hi, 2 * s0 + 2), 1);
      wv = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 2 * s0), low4),
                           _mm512_slli_epi16(_mm512_and_si512(hi2, _mm512_set1_epi8(3)), 4));
      idx =
          _mm512_setr_epi32(0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00010001, 0x00010001,
                            0x00010001, 0x00010001, 0x00020002, 0x00020002, 0x00020002, 0x00020002,
                            0x00030003, 0x00030003, 0x00030003, 0x00030003);
      idx = _mm512_add_epi16(idx, _mm512_set1_epi16(static_cast<int16_t>(4 * j)));
    }
    const __m512i sc = _mm512_permutexvar_epi16(idx, sc512);
    for (int m = 0; m < kM; ++m) {
      const __m512i av = _mm512_loadu_si512(act[m].q + 256 * b + 64 * j);
      acc[j & 1][m] = _mm512_dpwssd_epi32(acc[j & 1][m], _mm512_maddubs_epi16(wv, av), sc);
    }
  }
  const __m256i corr16 =
      kF == WFormat::kQ4_K
          ? _mm256_permutexvar_epi16(
                _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15),
                scales)  // m0 m0 m1 m1 ... m7 m7
          : scales;
  for (int m = 0; m < kM; ++m) {
    const __m512i t = _mm512_add_epi32(acc[0][m], acc[1][m]);
    isum[m] = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
    corr[m] = _mm256_madd_epi16(
        corr16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[m].sum16 + 16 * b)));
  }
}

// out[m][0, 16) (lanes under `mask`) = kM activation rows × the 16 weight rows at rp[0..15]
// (invalid rows point at a valid one; their lanes are not stored), every block of the rows.
template <WFormat kF, int kM>
void DecodeStrip(const std::byte* const (&rp)[kLanes], __m512i offsets, const quant::ActRow* act,
                 int64_t blocks, const std::byte* next, int64_t next_bytes, float* out, int64_t ldo,
                 __mmask16 mask) {
  constexpr int kOffset = kF == WFormat::kQ8_0 ? 128 : kF == WFormat::kQ4_0 ? 8 : 16;
  constexpr size_t kBytes = BlockBytes(kF);
  __m512 acc[kM];
  for (int m = 0; m < kM; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t off = next_bytes * b / blocks; off < next_bytes * (b + 1) / blocks; off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T1);
    // Each row's scale word (d in its low half).
    const __m512i words = _mm512_i32gather_epi32(offsets, rp[0] + b * kBytes, 1);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
    __m512i wv[8];
    for (int i = 0; i < 8; ++i) {
      wv[i] = Pair256(ChunkU8<kF>(rp[i] + b * kBytes, 0), ChunkU8<kF>(rp[i + 8] + b * kBytes, 0));
    }
    for (int m = 0; m < kM; ++m) {
      const __m512i av =
          _mm512_broadcast_i64x4(Load256(reinterpret_cast<const std::byte*>(act[m].q + 32 * b)));
      __m512i z[8];
      for (int i = 0; i < 8; ++i) z[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[i], av);
      const __m512i isum =
          _mm512_sub_epi32(SumLanes(z), _mm512_set1_epi32(kOffset * act[m].sum32[b]));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                               _mm512_mul_ps(d, _mm512_set1_ps(act[m].d[b])), acc[m]);
    }
  }
  for (int m = 0; m < kM; ++m) _mm512_mask_storeu_ps(out + m * ldo, mask, acc[m]);
}

template <WFormat kF>
using DecodeStripFn = void (*)(const std::byte* const (&)[kLanes], __m512i, const quant::ActRow*,
                               int64_t, const std::byte*, int64_t, float*, int64_t, __mmask16);
template <WFormat kF, int... kM>
constexpr DecodeStripFn<kF> kDecodeStrips[] = {DecodeStrip<kF, kM>...};
constexpr int kMaxDecodeTile = 4;

// K formats: the strip's rows are taken one at a time, kChunkK<kM> super-blocks of each (the
// whole row up to K = 9216 for 1-2 activation rows, 4608 for 3-4: the buffer below stays in
// L1), so the weights stream in address order as main's row-at-a-time kernel read them
// (interleaving the 16 rows block by block measured 0.7-0.9x of it), each block prefetching
// the next row's. Each row's 8-lane integer partials (isum, corr) of two consecutive blocks
// fold together into 4 lanes (FoldPair) parked in `part`; per block, 16 rows' partials
// then turn into one lane per row (ToLanes) and the f32 chain runs as in BlocksK, so the
// outputs equal the panels'.
template <int kM>
constexpr int64_t kChunkK = kM <= 2 ? 36 : 18;

// p: 16 rows × (isum, corr) of blocks 2q and 2q + 1 (the pair slot q). *isum / *corr: lane r =
// row r's sum of block 2q + odd.
inline void ToLanes(const int32_t* p, int odd, __m512i* isum, __m512i* corr) {
  const __m512i idx =
      _mm512_add_epi32(_mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29),
                       _mm512_set1_epi32(2 * odd));
  const __m512i u01 = _mm512_permutex2var_epi32(_mm512_load_si512(p), idx,
                                                _mm512_load_si512(p + 16));  // isum 0-7, corr 0-7
  const __m512i u23 =
      _mm512_permutex2var_epi32(_mm512_load_si512(p + 32), idx, _mm512_load_si512(p + 48));
  *isum = _mm512_shuffle_i64x2(u01, u23, _MM_SHUFFLE(1, 0, 1, 0));
  *corr = _mm512_shuffle_i64x2(u01, u23, _MM_SHUFFLE(3, 2, 3, 2));
}

// (isum, corr, isum', corr') of two blocks' 8-lane partials (s, c) and (s2, c2): three vphaddd
// and one add of the halves for two blocks.
inline __m128i FoldPair(__m256i s, __m256i c, __m256i s2, __m256i c2) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s, c), _mm256_hadd_epi32(s2, c2));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

template <WFormat kF, int kM>
void DecodeStripK(const std::byte* const (&rp)[kLanes], const quant::ActRow* act, int64_t blocks,
                  const std::byte* next, float* out, int64_t ldo, __mmask16 mask) {
  constexpr size_t kBytes = BlockBytes(kF);
  constexpr int64_t kPairs = (kChunkK<kM> + 1) / 2;
  alignas(64) int32_t part[kM][kPairs][kLanes][4];
  alignas(64) uint16_t dh[kChunkK<kM>][kLanes], mh[kChunkK<kM>][kLanes];  // f16 d, dmin per row
  __m512 acc[kM];
  for (int m = 0; m < kM; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t b0 = 0; b0 < blocks; b0 += kChunkK<kM>) {
    const int64_t nb = std::min(kChunkK<kM>, blocks - b0);
    for (int r = 0; r < kLanes; ++r) {
      for (int64_t i = 0; i < nb; i += 2) {
        const bool two = i + 1 < nb;
        __m256i s[2][kM], c[2][kM];
        for (int k = 0; k < 1 + two; ++k) {
          const std::byte* blk = rp[r] + (b0 + i + k) * kBytes;
          // The same block of the next row (the last row: the next chunk's, or the next strip's
          // first row): one row's chunk ahead, wherever the rows' chunks lie.
          const std::byte* ahead = r + 1 < kLanes     ? rp[r + 1] + (b0 + i + k) * kBytes
                                   : b0 + nb < blocks ? rp[0] + (b0 + nb + i + k) * kBytes
                                                      : next + (i + k) * kBytes;
          for (size_t off = 0; off < kBytes; off += 64)
            _mm_prefetch(reinterpret_cast<const char*>(ahead) + off, _MM_HINT_T0);
          RowK<kF, kM>(blk, act, b0 + i + k, s[k], c[k]);
          std::memcpy(&dh[i + k][r], blk + (kF == WFormat::kQ6_K ? 208 : 0), 2);
          if constexpr (kF == WFormat::kQ4_K) std::memcpy(&mh[i + k][r], blk + 2, 2);
          for (int m = 0; m < kM; ++m) {
            if constexpr (kF == WFormat::kQ6_K) {  // Σ sc·(Σ q·a − 32·Σa)
              s[k][m] = _mm256_sub_epi32(s[k][m], _mm256_slli_epi32(c[k][m], 5));
            }
          }
        }
        for (int m = 0; m < kM; ++m) {
          const __m256i zero = _mm256_setzero_si256();
          _mm_store_si128(reinterpret_cast<__m128i*>(part[m][i / 2][r]),
                          FoldPair(s[0][m], c[0][m], two ? s[1][m] : zero, two ? c[1][m] : zero));
        }
      }
    }
    for (int64_t i = 0; i < nb; ++i) {
      const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dh[i])));
      for (int m = 0; m < kM; ++m) {
        __m512i isum, corr;
        ToLanes(&part[m][i / 2][0][0], static_cast<int>(i % 2), &isum, &corr);
        const __m512 ad = _mm512_set1_ps(act[m].d[b0 + i]);
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, ad), acc[m]);
        if constexpr (kF == WFormat::kQ4_K) {
          const __m512 dmin =
              _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(mh[i])));
          acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr), _mm512_mul_ps(dmin, ad), acc[m]);
        }
      }
    }
  }
  for (int m = 0; m < kM; ++m) _mm512_mask_storeu_ps(out + m * ldo, mask, acc[m]);
}

template <WFormat kF>
using DecodeStripKFn = void (*)(const std::byte* const (&)[kLanes], const quant::ActRow*, int64_t,
                                const std::byte*, float*, int64_t, __mmask16);
template <WFormat kF, int... kM>
constexpr DecodeStripKFn<kF> kDecodeStripsK[] = {DecodeStripK<kF, kM>...};

// Every row of a quantized chunk of count <= 8 rows against weight rows [n0, n1).
template <WFormat kF>
void DecodeRows(const std::byte* rows, int64_t row_bytes, int64_t count, int64_t K, const Matrix& w,
                int64_t n0, int64_t n1, float* out, int64_t ldo) {
  const int64_t blocks = K / BlockValues(kF);
  quant::ActRow act[8];
  for (int64_t i = 0; i < count; ++i) act[i] = quant::ActRowAt(kF, rows + i * row_bytes, K);
  for (int64_t n = n0; n < n1; n += kLanes) {
    const int strip = static_cast<int>(std::min<int64_t>(kLanes, n1 - n));
    const std::byte* rp[kLanes];
    alignas(64) int32_t offsets[kLanes];
    for (int r = 0; r < kLanes; ++r) {
      rp[r] = w.row(r < strip ? n + r : n);
      offsets[r] = r < strip ? static_cast<int32_t>(r * w.row_bytes) : 0;
    }
    const std::byte* next = w.row(std::min(n + kLanes, n1));
    const int64_t next_bytes =
        static_cast<int64_t>(w.row_bytes) * std::min<int64_t>(kLanes, n1 - n - strip);
    const __mmask16 mask = static_cast<__mmask16>((1u << strip) - 1);
    for (int64_t i = 0; i < count; i += kMaxDecodeTile) {
      const int64_t tile = std::min<int64_t>(kMaxDecodeTile, count - i);
      if constexpr (IsK(kF)) {
        kDecodeStripsK<kF, 1, 2, 3, 4>[tile - 1](rp, act + i, blocks, next, out + i * ldo + n, ldo,
                                                 mask);
      } else {
        kDecodeStrips<kF, 1, 2, 3, 4>[tile - 1](rp, _mm512_load_si512(offsets), act + i, blocks,
                                                next, i == 0 ? next_bytes : 0, out + i * ldo + n,
                                                ldo, mask);
      }
    }
  }
}

// Prefill rows (more than 8) on quantized activation rows (M rows at `act`, row_bytes apart):
// each 16-row weight strip is packed one K slice of the panel's width at a time, and every row
// runs over each slice; the running sums stay in `out`, whose 16 columns of the M rows stay in
// cache across the strip's slices (slices outside the strip loop revisited all of `out` per
// slice: 26 % of the tiles' time went to those loads' cache misses at 272 × 9216).
template <WFormat kF>
void PanelRows(const std::byte* act, int64_t row_bytes, int64_t M, int64_t K, const Matrix& w,
               int64_t n0, int64_t n1, float* out, int64_t ldo, std::byte* panel) {
  const int64_t blocks = K / BlockValues(kF);
  const int64_t panel_blocks =
      std::min(blocks, std::max<int64_t>(1, kPanelValues / BlockValues(kF)));
  const size_t slice_bytes = panel_blocks * BlockBytes(kF);
  for (int64_t n = n0; n < n1; n += kLanes) {
    const int strip = static_cast<int>(std::min<int64_t>(kLanes, n1 - n));
    const __mmask16 mask = static_cast<__mmask16>((1u << strip) - 1);
    for (int64_t b0 = 0; b0 < blocks; b0 += panel_blocks) {
      const int64_t nb = std::min(panel_blocks, blocks - b0);
      // The next slice of the strip's rows, or the next strip's first one.
      const bool last = b0 + nb >= blocks;
      const int64_t next_n = last ? n + kLanes : n, next_b = last ? 0 : b0 + nb;
      for (int64_t r = next_n; r < std::min(n1, next_n + kLanes); ++r) {
        const char* next = reinterpret_cast<const char*>(w.row(r)) + next_b * BlockBytes(kF);
        for (size_t off = 0; off < slice_bytes; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
      }
      const Panel p = PanelAt<kF>(panel, nb);
      PackPanel<kF>(w.row(n), w.row_bytes, strip, b0, nb, p);
      for (int64_t i = 0; i < M; i += kMaxTile) {
        const int64_t tile = std::min<int64_t>(kMaxTile, M - i);
        kTiles<kF, Panel, 1, 2, 3, 4, 5, 6, 7, 8>[tile - 1](p, nb, act, row_bytes, i, K, b0,
                                                            b0 == 0, out + i * ldo + n, ldo, mask);
      }
    }
  }
}

// Rows as PanelRows / DecodeRows, on Q8_0 weights packed at load (`packed`, PackQ8_0Vnni;
// n0 a multiple of 16): the panels' loops without the packing, each strip one stream of
// bytes — up to 8 rows over the whole K at once, more in K slices of the panel's width with
// the running sums in `out`. The same operations as the panels', so the same bits.
void PackedRowsQ8_0(const std::byte* act, int64_t row_bytes, int64_t M, int64_t K,
                    const std::byte* packed, int64_t n0, int64_t n1, float* out, int64_t ldo) {
  OCULAR_CHECK(n0 % kLanes == 0, "HINT: packed strips start at multiples of 16 rows");
  const int64_t blocks = K / 32;
  const int64_t slice = M > kMaxTile ? kPanelValues / 32 : blocks;
  for (int64_t n = n0; n < n1; n += kLanes) {
    const int strip = static_cast<int>(std::min<int64_t>(kLanes, n1 - n));
    const __mmask16 mask = static_cast<__mmask16>((1u << strip) - 1);
    const std::byte* blocks0 = packed + (n / kLanes) * blocks * kPackedQ8Block;
    for (int64_t b0 = 0; b0 < blocks; b0 += slice) {
      const PackedQ8Blocks src{blocks0 + b0 * kPackedQ8Block, M <= kMaxTile};
      const int64_t nb = std::min(slice, blocks - b0);
      for (int64_t i = 0; i < M; i += kMaxTile) {
        const int64_t tile = std::min<int64_t>(kMaxTile, M - i);
        kTiles<WFormat::kQ8_0, PackedQ8Blocks, 1, 2, 3, 4, 5, 6, 7, 8>[tile - 1](
            src, nb, act, row_bytes, i, K, b0, b0 == 0, out + i * ldo + n, ldo, mask);
      }
    }
  }
}

template <WFormat kF>
constexpr int64_t PanelBytes() {
  return (std::max<int64_t>(1, kPanelValues / BlockValues(kF)) * PanelBytesPerBlock<kF>() + 63) /
         64 * 64;
}

template <WFormat kF>
void MatMulFormat(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                  int64_t n1, float* out, int64_t ldo, float* scratch) {
  std::byte* base = reinterpret_cast<std::byte*>(scratch);
  const int64_t scratch_bytes = kernels::MatMulScratchFloats(K) * 4;
  // Prefill rows here (callers that did not quantize them: ops.cc does, once per call) come
  // in chunks after the panel.
  const std::byte* packed = kF == WFormat::kQ8_0 ? w.packed_bytes() : nullptr;
  const int64_t panel = M > kDecodeRows && packed == nullptr ? PanelBytes<kF>() : 0;
  quant::ForEachActChunk(
      kF, a, M, K, lda, base + panel, scratch_bytes - panel, QuantizeActRowAvx2,
      [&](const std::byte* rows, int64_t m0, int64_t count, int64_t row_bytes) {
        if (packed != nullptr) {
          return PackedRowsQ8_0(rows, row_bytes, count, K, packed, n0, n1, out + m0 * ldo, ldo);
        }
        if (M > kDecodeRows) {
          return PanelRows<kF>(rows, row_bytes, count, K, w, n0, n1, out + m0 * ldo, ldo, base);
        }
        DecodeRows<kF>(rows, row_bytes, count, K, w, n0, n1, out + m0 * ldo, ldo);
      });
}

template <WFormat kF>
void RowsFormat(const std::byte* act, int64_t row_bytes, int64_t M, int64_t K, const Matrix& w,
                int64_t n0, int64_t n1, float* out, int64_t ldo, float* scratch) {
  if (kF == WFormat::kQ8_0 && w.packed_bytes() != nullptr) {
    return PackedRowsQ8_0(act, row_bytes, M, K, w.packed_bytes(), n0, n1, out, ldo);
  }
  if (M > kDecodeRows) {
    return PanelRows<kF>(act, row_bytes, M, K, w, n0, n1, out, ldo,
                         reinterpret_cast<std::byte*>(scratch));
  }
  DecodeRows<kF>(act, row_bytes, M, K, w, n0, n1, out, ldo);
}

}  // namespace

bool QuantVnniSupported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni") &&
         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

size_t PackedQ8_0VnniBytes(const Matrix& w) {
  if (w.format != WFormat::kQ8_0) return 0;
  return static_cast<size_t>((w.rows + kLanes - 1) / kLanes * (w.cols / 32) * kPackedQ8Block);
}

void PackQ8_0Vnni(const Matrix& w, std::byte* out) {
  OCULAR_CHECK(w.format == WFormat::kQ8_0 && w.cols % 32 == 0);
  const int64_t blocks = w.cols / 32;
  for (int64_t n = 0; n < w.rows; n += kLanes) {
    const int rows = static_cast<int>(std::min<int64_t>(kLanes, w.rows - n));
    std::byte* strip = out + (n / kLanes) * blocks * kPackedQ8Block;
    for (int64_t c = 0; c < blocks; c += 2) {
      __m512i r[16];
      ChunkPair<WFormat::kQ8_0>(w.row(n), w.row_bytes, rows, 0, blocks, c, r);
      for (int v = 0; v < (c + 1 < blocks ? 16 : 8); ++v)
        _mm512_storeu_si512(strip + (c + v / 8) * kPackedQ8Block + (v % 8) * 64, r[v]);
    }
    for (int64_t b = 0; b < blocks; ++b) {
      for (int i = 0; i < kLanes; ++i) {  // each row's f16 d (zero for the padding rows)
        std::byte* d = strip + b * kPackedQ8Block + 512 + 2 * i;
        if (i < rows) {
          std::memcpy(d, w.row(n + i) + b * BlockBytes(WFormat::kQ8_0), 2);
        } else {
          std::memset(d, 0, 2);
        }
      }
    }
  }
}

void MatMulQuantVnni(const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w, int64_t n0,
                     int64_t n1, float* out, int64_t ldo, float* scratch) {
  ForQuantFormat(w.format, [&](auto f) {
    MatMulFormat<decltype(f)::value>(a, M, K, lda, w, n0, n1, out, ldo, scratch);
  });
}

void MatMulQuantRowsVnni(const std::byte* act, int64_t row_bytes, int64_t M, int64_t K,
                         const Matrix& w, int64_t n0, int64_t n1, float* out, int64_t ldo,
                         float* scratch) {
  ForQuantFormat(w.format, [&](auto f) {
    RowsFormat<decltype(f)::value>(act, row_bytes, M, K, w, n0, n1, out, ldo, scratch);
  });
}

}  // namespace ocular::cpu

#include "kernels/cpu/target_pop.h"  // IWYU pragma: keep

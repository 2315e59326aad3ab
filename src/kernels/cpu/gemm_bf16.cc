#include "kernels/cpu/gemm_bf16.h"

// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized inside its masked-load and set1
// intrinsics (an intentionally undefined pass-through operand); nothing here is uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "kernels/cpu/transpose16.h"

namespace ocular::cpu {

#define OCULAR_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace {

constexpr int64_t kGroup = 16;  // activation rows per packed group (lanes of a vector)
constexpr int kTileGroups = 4;  // groups per register tile (64 rows)
constexpr int kTileCols = 6;    // weight rows per register tile

// One group of 16 rows, column pairs [p0, p0 + count) with count <= 16: the rows as words of
// bf16 pairs, transposed into 16 packed vectors. False if exact_only and a value is not bf16.
OCULAR_BF16_TARGET bool PackBlock(const float* a, int64_t rows, int64_t lda, int64_t p0,
                                  int64_t count, bool exact_only, uint32_t* dst) {
  const __mmask16 lo = static_cast<__mmask16>(count >= 8 ? 0xFFFF : (1u << (2 * count)) - 1);
  const __mmask16 hi = static_cast<__mmask16>(count <= 8    ? 0
                                              : count >= 16 ? 0xFFFF
                                                            : (1u << (2 * (count - 8))) - 1);
  const __m512i low_bits = _mm512_set1_epi32(0xFFFF);
  __mmask16 inexact = 0;
  __m512i r[16];
  for (int i = 0; i < 16; ++i) {
    if (i >= rows) {
      r[i] = _mm512_setzero_si512();
      continue;
    }
    const float* src = a + i * lda + 2 * p0;
    const __m512 x0 = _mm512_maskz_loadu_ps(lo, src);
    const __m512 x1 = _mm512_maskz_loadu_ps(hi, src + 16);
    inexact |= _mm512_test_epi32_mask(_mm512_castps_si512(x0), low_bits) |
               _mm512_test_epi32_mask(_mm512_castps_si512(x1), low_bits);
    // Lane j: (bf16(x[2j]), bf16(x[2j + 1])), round to nearest even (exact for bf16 values).
    r[i] = (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
  }
  if (exact_only && inexact != 0) return false;
  Transpose16(r);
  for (int64_t j = 0; j < count; ++j) _mm512_storeu_si512(dst + j * kGroup, r[j]);
  return true;
}

// The same from bf16 rows: 16 pairs of a row are 16 words already.
OCULAR_BF16_TARGET void PackBlock(const uint16_t* a, int64_t rows, int64_t lda, int64_t p0,
                                  int64_t count, uint32_t* dst) {
  const __mmask16 words = static_cast<__mmask16>(count >= 16 ? 0xFFFF : (1u << count) - 1);
  __m512i r[16];
  for (int i = 0; i < 16; ++i) {
    r[i] =
        i < rows ? _mm512_maskz_loadu_epi32(words, a + i * lda + 2 * p0) : _mm512_setzero_si512();
  }
  Transpose16(r);
  for (int64_t j = 0; j < count; ++j) _mm512_storeu_si512(dst + j * kGroup, r[j]);
}

// acc[c][v] += over column pairs [0, pairs): a = the tile's first group at its first pair
// (groups `group_stride` words apart), w = its first weight row at the same column (rows ldw
// apart): acc[c][v] lane i accumulates row 16 v + i times weight row c.
template <int kV, int kC>
OCULAR_BF16_TARGET inline void Accumulate(__m512 (&acc)[kC][kV], const uint32_t* a,
                                          int64_t group_stride, const uint16_t* w, int64_t ldw,
                                          int64_t pairs) {
  for (int64_t p = 0; p < pairs; ++p) {
    if ((p & 15) == 0) {  // the next strip's rows, a cache line each, while these compute
      for (int c = 0; c < kTileCols; ++c) {
        _mm_prefetch(reinterpret_cast<const char*>(w + (kTileCols + c) * ldw + 2 * p), _MM_HINT_T0);
      }
    }
    __m512bh av[kV];
    for (int v = 0; v < kV; ++v)
      av[v] = (__m512bh)_mm512_loadu_si512(a + v * group_stride + p * kGroup);
    for (int c = 0; c < kC; ++c) {
      uint32_t pair;
      std::memcpy(&pair, w + c * ldw + 2 * p, sizeof(pair));
      const __m512bh b = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      for (int v = 0; v < kV; ++v) acc[c][v] = _mm512_dpbf16_ps(acc[c][v], av[v], b);
    }
  }
}

// Writes tile[c][16 v + i] = row 16 v + i times weight row c.
template <int kV, int kC>
OCULAR_BF16_TARGET void Tile(const uint32_t* a, int64_t group_stride, const uint16_t* w,
                             int64_t ldw, int64_t pairs, float* tile) {
  __m512 acc[kC][kV];
  for (int c = 0; c < kC; ++c) {
    for (int v = 0; v < kV; ++v) acc[c][v] = _mm512_setzero_ps();
  }
  Accumulate<kV, kC>(acc, a, group_stride, w, ldw, pairs);
  for (int c = 0; c < kC; ++c) {
    for (int v = 0; v < kV; ++v)
      _mm512_storeu_ps(tile + c * kTileGroups * kGroup + v * kGroup, acc[c][v]);
  }
}

// The transposed tile straight into out: out[c * ldo + 16 v + i] (+)= row 16 v + i times weight
// row c, for the first `rows` rows (masked stores past them).
template <int kV, int kC>
OCULAR_BF16_TARGET void TileT(const uint32_t* a, int64_t group_stride, const uint16_t* w,
                              int64_t ldw, int64_t pairs, float* out, int64_t ldo, int64_t rows,
                              bool accumulate) {
  __m512 acc[kC][kV];
  for (int c = 0; c < kC; ++c) {
    for (int v = 0; v < kV; ++v) acc[c][v] = _mm512_setzero_ps();
  }
  Accumulate<kV, kC>(acc, a, group_stride, w, ldw, pairs);
  for (int v = 0; v < kV; ++v) {
    const int64_t lanes = std::clamp<int64_t>(rows - v * kGroup, 0, kGroup);
    const __mmask16 mask = static_cast<__mmask16>(lanes >= 16 ? 0xFFFF : (1u << lanes) - 1);
    for (int c = 0; c < kC; ++c) {
      float* o = out + c * ldo + v * kGroup;
      const __m512 x =
          accumulate ? _mm512_add_ps(acc[c][v], _mm512_maskz_loadu_ps(mask, o)) : acc[c][v];
      _mm512_mask_storeu_ps(o, mask, x);
    }
  }
}

using TileFn = void (*)(const uint32_t*, int64_t, const uint16_t*, int64_t, int64_t, float*);
using TileTFn = void (*)(const uint32_t*, int64_t, const uint16_t*, int64_t, int64_t, float*,
                         int64_t, int64_t, bool);

template <int kV, int... kC>
constexpr TileFn kTileRow[] = {Tile<kV, kC>...};
constexpr const TileFn* kTiles[kTileGroups] = {
    kTileRow<1, 1, 2, 3, 4, 5, 6>, kTileRow<2, 1, 2, 3, 4, 5, 6>, kTileRow<3, 1, 2, 3, 4, 5, 6>,
    kTileRow<4, 1, 2, 3, 4, 5, 6>};
template <int kV, int... kC>
constexpr TileTFn kTileTRow[] = {TileT<kV, kC>...};
constexpr const TileTFn* kTilesT[kTileGroups] = {
    kTileTRow<1, 1, 2, 3, 4, 5, 6>, kTileTRow<2, 1, 2, 3, 4, 5, 6>, kTileTRow<3, 1, 2, 3, 4, 5, 6>,
    kTileTRow<4, 1, 2, 3, 4, 5, 6>};
static_assert(kTileCols == 6, "kTiles lists tiles of 1..6 weight rows");

// Calls tile(g, tile_groups, n, cols, p0, pairs) over the blocks and tiles of a product of
// `groups` packed groups, K2 column pairs and weight rows [n0, n1).
template <class F>
inline void ForEachTile(int64_t groups, int64_t K2, int64_t n0, int64_t n1, const F& tile) {
  const Bf16Blocking block = Bf16BlockShape(groups, K2);
  for (int64_t p0 = 0; p0 < K2; p0 += block.pairs) {
    const int64_t pairs = std::min(block.pairs, K2 - p0);
    for (int64_t gb = 0; gb < groups; gb += block.groups) {
      const int64_t count = std::min(groups, gb + block.groups) - gb;
      // Tiles of (nearly) equal size: 17 groups as 4+4+3+3+3, never 4+4+4+4+1.
      const int64_t tiles = (count + kTileGroups - 1) / kTileGroups;
      for (int64_t n = n0; n < n1; n += kTileCols) {
        const int64_t cols = std::min<int64_t>(kTileCols, n1 - n);
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t g = gb + count * t / tiles;
          tile(g, gb + count * (t + 1) / tiles - g, n, cols, p0, pairs);
        }
      }
    }
  }
}

}  // namespace

Bf16Blocking Bf16BlockShape(int64_t groups, int64_t K2) {
  // Depth blocks of equal size, at most kMaxPairs column pairs, chosen from K alone: an output
  // sums its depth blocks' partial sums in the same order whatever M, so a row's result does
  // not depend on how many rows share the call (batch invariance). An L2 block of packed
  // activations: as many groups as fit in kBlockWords words (640 KiB) at that depth.
  constexpr int64_t kBlockWords = 160 * 1024;
  constexpr int64_t kMaxPairs = 640;
  const int64_t depth_blocks = std::max<int64_t>(1, (K2 + kMaxPairs - 1) / kMaxPairs);
  const int64_t pairs = std::max<int64_t>(1, (K2 + depth_blocks - 1) / depth_blocks);
  return {std::max<int64_t>(1, std::min(groups, kBlockWords / (kGroup * pairs))), pairs};
}

int64_t PackedBf16Words(int64_t M, int64_t K) {
  return (M + kGroup - 1) / kGroup * kGroup * (K / 2);
}

bool PackBf16Rows(const float* a, int64_t M, int64_t K, int64_t lda, int64_t g0, int64_t g1,
                  bool exact_only, uint32_t* packed) {
  OCULAR_CHECK(K % 2 == 0);
  const int64_t K2 = K / 2;
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t rows = std::min(kGroup, M - g * kGroup);
    for (int64_t p = 0; p < K2; p += kGroup) {
      if (!PackBlock(a + g * kGroup * lda, rows, lda, p, std::min(kGroup, K2 - p), exact_only,
                     packed + (g * K2 + p) * kGroup)) {
        return false;
      }
    }
  }
  return true;
}

void PackBf16Rows(const uint16_t* a, int64_t M, int64_t K, int64_t lda, uint32_t* packed) {
  OCULAR_CHECK(K % 2 == 0);
  const int64_t K2 = K / 2;
  for (int64_t g = 0; g * kGroup < M; ++g) {
    const int64_t rows = std::min(kGroup, M - g * kGroup);
    for (int64_t p = 0; p < K2; p += kGroup) {
      PackBlock(a + g * kGroup * lda, rows, lda, p, std::min(kGroup, K2 - p),
                packed + (g * K2 + p) * kGroup);
    }
  }
}

namespace {

// Lane i of word p: (x[2p][c0 + i], x[2p + 1][c0 + i]) as bf16 (rows past T, lanes past `lanes`
// zero). x holds bf16 values (f32 rows: their upper halves).
template <class T>
OCULAR_BF16_TARGET inline __m512i ColumnPair(const T* x, int64_t T_rows, int64_t ldx, int64_t p,
                                             int64_t c0, __mmask16 mask) {
  __m512i w[2];
  for (int r = 0; r < 2; ++r) {
    const int64_t t = 2 * p + r;
    if (t >= T_rows) {
      w[r] = _mm512_setzero_si512();
    } else if constexpr (std::is_same_v<T, float>) {
      w[r] = _mm512_srli_epi32(_mm512_maskz_loadu_epi32(mask, x + t * ldx + c0), 16);
    } else {
      w[r] = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x + t * ldx + c0));
    }
  }
  return _mm512_or_si512(w[0], _mm512_slli_epi32(w[1], 16));
}

template <class T>
OCULAR_BF16_TARGET void PackColumns(const T* x, int64_t T_rows, int64_t cols, int64_t ldx,
                                    int64_t pairs, uint32_t* packed) {
  for (int64_t g = 0; g * kGroup < cols; ++g) {
    const int64_t lanes = std::min(kGroup, cols - g * kGroup);
    const __mmask16 mask = static_cast<__mmask16>(lanes >= 16 ? 0xFFFF : (1u << lanes) - 1);
    for (int64_t p = 0; p < pairs; ++p) {
      _mm512_storeu_si512(packed + (g * pairs + p) * kGroup,
                          ColumnPair(x, T_rows, ldx, p, g * kGroup, mask));
    }
  }
}

}  // namespace

void PackBf16Columns(const float* x, int64_t T, int64_t cols, int64_t ldx, int64_t pairs,
                     uint32_t* packed) {
  PackColumns(x, T, cols, ldx, pairs, packed);
}
void PackBf16Columns(const uint16_t* x, int64_t T, int64_t cols, int64_t ldx, int64_t pairs,
                     uint32_t* packed) {
  PackColumns(x, T, cols, ldx, pairs, packed);
}

void GemmBf16(const uint32_t* packed, int64_t M, int64_t K, const Matrix& w, int64_t n0, int64_t n1,
              float* out, int64_t ldo) {
  OCULAR_CHECK(w.format == WFormat::kBF16 && w.cols == K && K % 2 == 0 && w.row_bytes % 4 == 0);
  const int64_t K2 = K / 2, groups = (M + kGroup - 1) / kGroup;
  const int64_t group_stride = K2 * kGroup;
  const int64_t ldw = static_cast<int64_t>(w.row_bytes / 2);
  const uint16_t* wb = reinterpret_cast<const uint16_t*>(w.data);
  alignas(64) float tile[kTileCols * kTileGroups * kGroup];
  ForEachTile(
      groups, K2, n0, n1,
      [&](int64_t g, int64_t tile_groups, int64_t n, int64_t cols, int64_t p0, int64_t pairs) {
        kTiles[tile_groups - 1][cols - 1](packed + g * group_stride + p0 * kGroup, group_stride,
                                          wb + n * ldw + 2 * p0, ldw, pairs, tile);
        const int64_t m0 = g * kGroup, rows = std::min(tile_groups * kGroup, M - m0);
        for (int64_t i = 0; i < rows; ++i) {
          float* o = out + (m0 + i) * ldo + n;
          if (p0 == 0) {
            for (int64_t c = 0; c < cols; ++c) o[c] = tile[c * kTileGroups * kGroup + i];
          } else {
            for (int64_t c = 0; c < cols; ++c) o[c] += tile[c * kTileGroups * kGroup + i];
          }
        }
      });
}

void GemmBf16T(const uint32_t* packed, int64_t group_stride, int64_t M, int64_t K,
               const uint16_t* w, int64_t ldw, int64_t n0, int64_t n1, float* out, int64_t ldo) {
  OCULAR_CHECK(K % 2 == 0 && ldw % 2 == 0);
  const int64_t groups = (M + kGroup - 1) / kGroup;
  ForEachTile(
      groups, K / 2, n0, n1,
      [&](int64_t g, int64_t tile_groups, int64_t n, int64_t cols, int64_t p0, int64_t pairs) {
        kTilesT[tile_groups - 1][cols - 1](packed + g * group_stride + p0 * kGroup, group_stride,
                                           w + n * ldw + 2 * p0, ldw, pairs,
                                           out + n * ldo + g * kGroup, ldo, M - g * kGroup, p0 > 0);
      });
}

}  // namespace ocular::cpu

#include "kernels/cpu/gemm_bf16_amx.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/bf16_dot.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/transpose16.h"

namespace ocular::cpu {

#define OCULAR_AMX_TARGET \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

namespace {

constexpr int64_t kGroup = 16;  // activation rows per packed group = columns of a C tile
constexpr int64_t kStep = 16;   // column pairs per tile step (a 64-byte tile row)

// Linux keeps AMX's tile data off until a process asks for it (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, kernel 5.16+).
bool RequestTileData() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// LDTILECFG with all 64 bytes of c as the asm's input: GCC 12's _tile_loadconfig names only the
// first 8, so the compiler may drop the stores that set the rows and columns (it did in an
// AMX-INT8 kernel tried for the quantized matmuls: tiles left unconfigured, SIGILL).
inline void LoadTiles(const TileConfig& c) { __asm__ volatile("ldtilecfg %0" : : "m"(c)); }

// Every tile 16 rows of 64 bytes: C tiles tmm0-3 (16 weight rows × 16 activation rows, f32),
// A tiles tmm4-5 (16 weight rows × 16 column pairs), B tiles tmm6-7 (16 column pairs × 16
// activation rows: 16 vectors of the packed layout).
OCULAR_AMX_TARGET void LoadConfig() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  LoadTiles(c);
}

// C[nb][g] (tile 2 nb + g) += over `steps` steps of 16 pairs: A = weight rows a[nb] (row stride
// lda[nb] bytes), B = packed group b[g] (16 words per pair). Each output element accumulates its
// own products in step order, whatever kN and kG: results never depend on the tile's shape.
template <int kN, int kG>
OCULAR_AMX_TARGET inline void Steps(const char* a0, int64_t lda0, const char* a1, int64_t lda1,
                                    const uint32_t* b0, const uint32_t* b1, int64_t steps) {
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, a0 + 64 * s, lda0);
    if constexpr (kN > 1) _tile_loadd(5, a1 + 64 * s, lda1);
    _tile_loadd(6, b0 + kStep * kGroup * s, 64);
    if constexpr (kG > 1) _tile_loadd(7, b1 + kStep * kGroup * s, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (kG > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (kN > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (kN > 1 && kG > 1) _tile_dpbf16ps(3, 5, 7);
  }
}

template <int kN, int kG>
OCULAR_AMX_TARGET void ZeroC() {
  _tile_zero(0);
  if constexpr (kG > 1) _tile_zero(1);
  if constexpr (kN > 1) _tile_zero(2);
  if constexpr (kN > 1 && kG > 1) _tile_zero(3);
}

template <int kN, int kG>
OCULAR_AMX_TARGET void StoreC(float* c) {  // c: 4 tiles of 16 × 16, tile 2 nb + g
  _tile_stored(0, c, 64);
  if constexpr (kG > 1) _tile_stored(1, c + 256, 64);
  if constexpr (kN > 1) _tile_stored(2, c + 512, 64);
  if constexpr (kN > 1 && kG > 1) _tile_stored(3, c + 768, 64);
}

// The A tile of block nb at step s: in place, or (a block with fewer than 16 rows left in the
// matrix, or the rows' last pairs) the `bytes` bytes of its `valid` rows copied into `pad`, whose
// other bytes are zero.
struct ATile {
  const char* rows;  // the block's first row at the pass's first pair
  int64_t lda;       // row stride in bytes
  int valid;         // rows that exist (16: read in place)
};

inline const char* Padded(const ATile& a, int64_t offset, int64_t bytes, char* pad) {
  for (int r = 0; r < a.valid; ++r) std::memcpy(pad + 64 * r, a.rows + r * a.lda + offset, bytes);
  return pad;
}

// One C tile pass over pairs [p0, p0 + pairs): `pairs / 16` steps, then the remaining pairs
// (fewer than 16, the end of the rows) from zero-padded copies.
template <int kN, int kG>
OCULAR_AMX_TARGET void Pass(const ATile a[2], const uint32_t* const b[2], int64_t pairs, float* c) {
  ZeroC<kN, kG>();
  const int64_t full = pairs / kStep, rest = pairs % kStep;
  alignas(64) char pad[2][1024];
  if (a[0].valid == 16 && (kN == 1 || a[1].valid == 16)) {
    Steps<kN, kG>(a[0].rows, a[0].lda, a[1].rows, a[1].lda, b[0], b[1], full);
  } else {  // a partial block: copied step by step (its missing rows stay zero)
    std::memset(pad, 0, sizeof pad);
    for (int64_t s = 0; s < full; ++s) {
      const char* t[2];
      int64_t ld[2];
      for (int nb = 0; nb < kN; ++nb) {
        const bool copy = a[nb].valid < 16;
        t[nb] = copy ? Padded(a[nb], 64 * s, 64, pad[nb]) : a[nb].rows + 64 * s;
        ld[nb] = copy ? 64 : a[nb].lda;
      }
      Steps<kN, kG>(t[0], ld[0], kN > 1 ? t[1] : nullptr, kN > 1 ? ld[1] : 0,
                    b[0] + kStep * kGroup * s, b[1] + kStep * kGroup * s, 1);
    }
  }
  if (rest > 0) {
    std::memset(pad, 0, sizeof pad);
    alignas(64) uint32_t bt[2][kStep * kGroup] = {};
    for (int nb = 0; nb < kN; ++nb) Padded(a[nb], 64 * full, 4 * rest, pad[nb]);
    for (int g = 0; g < kG; ++g) {
      std::memcpy(bt[g], b[g] + kStep * kGroup * full, 4 * kGroup * rest);
    }
    Steps<kN, kG>(pad[0], 64, pad[1], 64, bt[0], bt[1], 1);
  }
  StoreC<kN, kG>(c);
}

// out[m, n] (+)= C[n][m] for the tile's first `rows` activation rows and `cols` weight rows.
OCULAR_AMX_TARGET void AddTransposed(const float* c, int64_t rows, int64_t cols, bool accumulate,
                                     float* out, int64_t ldo) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(c + 16 * i);
  Transpose16(r);
  const __mmask16 mask = static_cast<__mmask16>(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
  for (int64_t m = 0; m < rows; ++m) {
    float* o = out + m * ldo;
    __m512 x = _mm512_castsi512_ps(r[m]);
    if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, o));
    _mm512_mask_storeu_ps(o, mask, x);
  }
}

using PassFn = void (*)(const ATile[2], const uint32_t* const[2], int64_t, float*);
constexpr PassFn kPasses[2][2] = {{Pass<1, 1>, Pass<1, 2>}, {Pass<2, 1>, Pass<2, 2>}};

// GemmBf16TAmx's tiles: C tmm0-1 (`rows` rows of w × 16 packed rows, f32), A tmm2 (`rows`
// rows × 16 pairs) and tmm3 (the last `rest` pairs), B tmm4-5 (16 pairs of one packed group)
// and tmm6-7 (its last `rest` pairs).
OCULAR_AMX_TARGET void LoadConfigT(int rows, int rest) {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = t < 4 ? rows : t < 6 || rest == 0 ? 16 : rest;
    c.colsb[t] = t == 3 && rest > 0 ? 4 * rest : 64;
  }
  LoadTiles(c);
}

// C tiles 0 (group at b0) and, kG = 2, 1 (group at b1) over `full` steps of 16 pairs and
// `rest` pairs more: A = w's rows at `a` (lda bytes apart), B = the packed groups.
template <int kG>
OCULAR_AMX_TARGET void PassT(const char* a, int64_t lda, const char* b0, const char* b1,
                             int64_t full, int rest) {
  _tile_zero(0);
  if constexpr (kG > 1) _tile_zero(1);
  for (int64_t s = 0; s < full; ++s) {
    _tile_loadd(2, a + 64 * s, lda);
    _tile_loadd(4, b0 + 1024 * s, 64);
    _tile_dpbf16ps(0, 2, 4);
    if constexpr (kG > 1) {
      _tile_loadd(5, b1 + 1024 * s, 64);
      _tile_dpbf16ps(1, 2, 5);
    }
  }
  if (rest > 0) {
    _tile_loadd(3, a + 64 * full, lda);
    _tile_loadd(6, b0 + 1024 * full, 64);
    _tile_dpbf16ps(0, 3, 6);
    if constexpr (kG > 1) {
      _tile_loadd(7, b1 + 1024 * full, 64);
      _tile_dpbf16ps(1, 3, 7);
    }
  }
}

// out[r * ldo + j] = C tile t's element (r, j) for r < rows, j < cols: in place when all 16
// columns exist, else through a copy.
OCULAR_AMX_TARGET void StoreT(int t, int rows, int64_t cols, float* out, int64_t ldo) {
  if (cols >= 16) {
    if (t == 0) {
      _tile_stored(0, out, ldo * 4);
    } else {
      _tile_stored(1, out, ldo * 4);
    }
    return;
  }
  alignas(64) float c[256];
  if (t == 0) {
    _tile_stored(0, c, 64);
  } else {
    _tile_stored(1, c, 64);
  }
  for (int r = 0; r < rows; ++r) std::memcpy(out + r * ldo, c + 16 * r, cols * sizeof(float));
}

}  // namespace

bool AmxBf16Supported() {
  static const bool supported = [] {
    if (!Bf16DotSupported()) return false;
    // CPUID.(EAX=7, ECX=0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE; XCR0 bits 17-18 (XTILECFG,
    // XTILEDATA) enabled by the OS.
    unsigned eax, ebx, ecx, edx;
    __asm__("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(0));
    if ((edx & (1u << 22)) == 0 || (edx & (1u << 24)) == 0) return false;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    return RequestTileData();
  }();
  return supported;
}

OCULAR_AMX_TARGET void GemmBf16Amx(const uint32_t* packed, int64_t M, int64_t K, const Matrix& w,
                                   int64_t n0, int64_t n1, float* out, int64_t ldo) {
  OCULAR_CHECK(w.format == WFormat::kBF16 && w.cols == K && K % 2 == 0 && w.row_bytes % 4 == 0);
  OCULAR_CHECK(AmxBf16Supported());
  const int64_t K2 = K / 2, groups = (M + kGroup - 1) / kGroup;
  const int64_t group_stride = K2 * kGroup;
  const int64_t lda_bytes = static_cast<int64_t>(w.row_bytes);
  const auto* wbytes = reinterpret_cast<const char*>(w.data);
  // Depth blocks of at most kMaxPairs pairs (equal, whole 16-pair steps, from K alone) and L2
  // blocks of packed activations up to kBlockWords: deeper than the AVX-512 GEMM's blocks
  // (Bf16BlockShape), so fewer C-tile round trips through the output. kernels_bench, SPR VM,
  // 2 threads, against those blocks: SigLIP fc2 (K = 4304) 1.12×, Gemma 2 prefill 1.07–1.10×.
  constexpr int64_t kMaxPairs = 1152, kBlockWords = 320 * 1024;
  const int64_t depth_blocks = (K2 + kMaxPairs - 1) / kMaxPairs;
  const int64_t block_pairs = ((K2 + depth_blocks - 1) / depth_blocks + kStep - 1) / kStep * kStep;
  const int64_t block_groups =
      std::max<int64_t>(1, std::min(groups, kBlockWords / (kGroup * block_pairs)));
  LoadConfig();
  alignas(64) float c[4 * 256];
  for (int64_t p0 = 0; p0 < K2; p0 += block_pairs) {
    const int64_t pairs = std::min(block_pairs, K2 - p0);
    for (int64_t gb = 0; gb < groups; gb += block_groups) {
      const int64_t g_end = std::min(groups, gb + block_groups);
      for (int64_t n = n0; n < n1; n += 32) {
        const int kN = n1 - n > 16 ? 2 : 1;
        ATile a[2] = {};
        for (int nb = 0; nb < kN; ++nb) {
          const int64_t first = n + 16 * nb;
          // Rows past the matrix are never read: a block with fewer left is copied.
          a[nb] = {wbytes + first * lda_bytes + 4 * p0, lda_bytes,
                   static_cast<int>(std::min<int64_t>(16, w.rows - first))};
        }
        for (int64_t g = gb; g < g_end; g += 2) {
          const int kG = g_end - g > 1 ? 2 : 1;
          const uint32_t* b[2] = {packed + g * group_stride + p0 * kGroup,
                                  packed + (g + kG - 1) * group_stride + p0 * kGroup};
          kPasses[kN - 1][kG - 1](a, b, pairs, c);
          for (int nb = 0; nb < kN; ++nb) {
            for (int gg = 0; gg < kG; ++gg) {
              const int64_t m0 = (g + gg) * kGroup;
              AddTransposed(c + 512 * nb + 256 * gg, std::min(kGroup, M - m0),
                            std::min<int64_t>(16, n1 - n - 16 * nb), p0 > 0,
                            out + m0 * ldo + n + 16 * nb, ldo);
            }
          }
        }
      }
    }
  }
  _tile_release();
}

OCULAR_AMX_TARGET void GemmBf16TAmx(const uint32_t* packed, int64_t group_stride, int64_t M,
                                    int64_t K, const uint16_t* w, int64_t ldw, int64_t n0,
                                    int64_t n1, float* out, int64_t ldo) {
  OCULAR_CHECK(K % 2 == 0 && ldw % 2 == 0 && AmxBf16Supported());
  const int64_t K2 = K / 2, full = K2 / kStep, groups = (M + kGroup - 1) / kGroup;
  const int rest = static_cast<int>(K2 % kStep);
  const char* words = reinterpret_cast<const char*>(packed);
  int configured = 0;
  for (int64_t n = n0; n < n1; n += 16) {
    const int rows = static_cast<int>(std::min<int64_t>(16, n1 - n));
    if (rows != configured) LoadConfigT(configured = rows, rest);
    const char* a = reinterpret_cast<const char*>(w + n * ldw);
    for (int64_t g = 0; g < groups; g += 2) {
      const char* b0 = words + 4 * g * group_stride;
      float* o = out + n * ldo + g * kGroup;
      if (groups - g > 1) {
        PassT<2>(a, 2 * ldw, b0, b0 + 4 * group_stride, full, rest);
        StoreT(0, rows, 16, o, ldo);
        StoreT(1, rows, M - (g + 1) * kGroup, o + kGroup, ldo);
      } else {
        PassT<1>(a, 2 * ldw, b0, nullptr, full, rest);
        StoreT(0, rows, M - g * kGroup, o, ldo);
      }
    }
  }
  _tile_release();
}

}  // namespace ocular::cpu

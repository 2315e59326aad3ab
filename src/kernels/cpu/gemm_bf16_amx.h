// The bf16 GEMM of gemm_bf16.h on AMX tiles (`tdpbf16ps`, Sapphire Rapids and later): the
// same packed activations and the same HF [N, K] weight rows read in place, the product
// computed transposed — a C tile is 16 weight rows × 16 activation rows, its A tile 16 weight
// rows × 16 column pairs straight from the weights, its B tile 16 consecutive vectors of one
// packed 16-row group — then turned with an in-register transpose as it is added to the output.
// 2 × 2 C tiles per pass (tmm0-3) over an L2 block of the packed activations; the rows' last
// pairs (fewer than 16) and a last block of fewer than 16 weight rows through zero-padded
// copies.
//
// Products of bf16 values are exact and sums accumulate in f32, as with `vdpbf16ps`, in another
// order (the instruction's pairs and per-step sums): results differ from gemm_bf16.h's in the
// last bits, never by more than f32 summation does. Each output element accumulates only its
// own products in a fixed order set by M and K: results do not depend on the column range, the
// thread split or which other rows share a tile.
#pragma once

#include <cstdint>

#include "core/matrix.h"

namespace ocular::cpu {

// AMX-TILE + AMX-BF16 on the CPU, enabled by the OS, and the process granted tile data
// (Linux arch_prctl; asked once).
bool AmxBf16Supported();

// As GemmBf16 (gemm_bf16.h). REQUIRES: AmxBf16Supported().
void GemmBf16Amx(const uint32_t* packed, int64_t M, int64_t K, const Matrix& w, int64_t n0,
                 int64_t n1, float* out, int64_t ldo);

// As GemmBf16T (gemm_bf16.h, attention's products) on AMX tiles: C = 16 rows of w × one packed
// group (the packed layout is AMX's B layout), A = w's rows in place, 16 pairs a step and then
// the last K/2 mod 16 pairs in narrower tiles. Each output sums its own products in pair
// order, whatever M, N and the split (results differ from GemmBf16T's in the last bits, as
// GemmBf16Amx's from GemmBf16's). REQUIRES: AmxBf16Supported(), K and ldw even.
void GemmBf16TAmx(const uint32_t* packed, int64_t group_stride, int64_t M, int64_t K,
                  const uint16_t* w, int64_t ldw, int64_t n0, int64_t n1, float* out, int64_t ldo);

}  // namespace ocular::cpu

// Weight matrices as format-tagged, row-addressable blocks of bytes.
//
// A linear layer's weight is HF's [out_features, in_features] = [rows, cols]; row r (one
// output feature) starts at data + r * row_bytes. The format says how a row's cols values are
// encoded: plain floats, or ggml's quantized blocks (32 or 256 values per block; layouts in
// kernels/quant/blocks.h), which is why a row is addressed in bytes rather than elements.
// Kernels keep one entry per format (kernels/kernel_table.h); a format with no kernel is
// refused at load time. Data needs no alignment.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace ocular {

// kQ5_0 comes last so the others keep their indices (llama.cpp's fallback for Q4_K rows that
// are not a multiple of 256, e.g. in Gemma 3 270M's Q4_K_M file).
enum class WFormat : uint8_t { kF32, kBF16, kF16, kQ8_0, kQ4_0, kQ4_K, kQ6_K, kQ5_0 };
inline constexpr int kNumWFormats = 8;

const char* WFormatName(WFormat f);  // "f32", "bf16", "f16", "q8_0", ...
// Values per block (1 for float formats) and bytes per block.
int64_t WFormatBlockValues(WFormat f);
int64_t WFormatBlockBytes(WFormat f);
// Bytes of one row of `cols` values; -1 if cols is not a multiple of the block.
int64_t WFormatRowBytes(WFormat f, int64_t cols);
// The float formats a checkpoint tensor can be stored in; false for any other dtype.
bool WFormatFromDType(DType t, WFormat* out);

// The same values in a kernel's own layout, made once at load (ops::PackWeights): `bytes` holds
// rows [0, rows) of the matrix whose data was `source`.
struct PackedMatrix {
  const std::byte* bytes = nullptr;
  const std::byte* source = nullptr;
  int64_t rows = 0;
};

struct Matrix {
  const std::byte* data = nullptr;
  WFormat format = WFormat::kF32;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  // Optional (kernels that know the layout read it; every other reader uses data). A copy of
  // the Matrix with other data or rows (a row slice, a join) does not match it and has none.
  const PackedMatrix* packed = nullptr;

  const std::byte* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  size_t bytes() const { return static_cast<size_t>(rows) * row_bytes; }
  bool empty() const { return data == nullptr; }
  const std::byte* packed_bytes() const {
    return packed != nullptr && packed->source == data && packed->rows == rows ? packed->bytes
                                                                               : nullptr;
  }
};

// A [rows, cols] matrix of format f over rows * WFormatRowBytes(f, cols) bytes at data (a GGUF
// tensor, say). REQUIRES: cols is a multiple of WFormatBlockValues(f) (checked by the loader).
Matrix MatrixFromBlocks(const std::byte* data, WFormat f, int64_t rows, int64_t cols);

// A [rows, cols] matrix over a float tensor view (F32/BF16/F16). REQUIRES: view.numel() ==
// rows * cols and a float dtype (checked by the loader before calling).
Matrix MatrixFromView(const TensorView& view, int64_t rows, int64_t cols);

}  // namespace ocular

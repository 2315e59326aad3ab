#include "core/matrix.h"

#include "core/check.h"

namespace ocular {

namespace {
struct FormatInfo {
  const char* name;
  int64_t block_values, block_bytes;
};
// ggml's block sizes (QK8_0 = QK4_0 = 32, QK_K = 256): a Q8_0 block is an f16 scale + 32 int8,
// Q4_0 an f16 scale + 16 bytes of nibbles, Q4_K 144 bytes, Q6_K 210 bytes per 256 values,
// Q5_0 an f16 scale + 4 bytes of fifth bits + 16 bytes of nibbles.
constexpr FormatInfo kInfo[kNumWFormats] = {
    {"f32", 1, 4},    {"bf16", 1, 2},     {"f16", 1, 2},      {"q8_0", 32, 34},
    {"q4_0", 32, 18}, {"q4_k", 256, 144}, {"q6_k", 256, 210}, {"q5_0", 32, 22},
};
const FormatInfo& Info(WFormat f) { return kInfo[static_cast<int>(f)]; }
}  // namespace

const char* WFormatName(WFormat f) { return Info(f).name; }
int64_t WFormatBlockValues(WFormat f) { return Info(f).block_values; }
int64_t WFormatBlockBytes(WFormat f) { return Info(f).block_bytes; }

int64_t WFormatRowBytes(WFormat f, int64_t cols) {
  const FormatInfo& i = Info(f);
  if (cols < 0 || cols % i.block_values != 0) return -1;
  return cols / i.block_values * i.block_bytes;
}

bool WFormatFromDType(DType t, WFormat* out) {
  switch (t) {
    case DType::kF32:
      *out = WFormat::kF32;
      return true;
    case DType::kBF16:
      *out = WFormat::kBF16;
      return true;
    case DType::kF16:
      *out = WFormat::kF16;
      return true;
    default:
      return false;
  }
}

Matrix MatrixFromBlocks(const std::byte* data, WFormat f, int64_t rows, int64_t cols) {
  const int64_t row_bytes = WFormatRowBytes(f, cols);
  OCULAR_CHECK(row_bytes >= 0 && rows >= 0, "HINT: cols must be a multiple of the block size");
  Matrix m;
  m.data = data;
  m.format = f;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<size_t>(row_bytes);
  return m;
}

Matrix MatrixFromView(const TensorView& view, int64_t rows, int64_t cols) {
  Matrix m;
  OCULAR_CHECK(WFormatFromDType(view.dtype, &m.format), "HINT: a float tensor");
  OCULAR_CHECK(view.numel() == rows * cols);
  m.data = static_cast<const std::byte*>(view.data);
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<size_t>(WFormatRowBytes(m.format, cols));
  return m;
}

}  // namespace ocular

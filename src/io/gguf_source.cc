#include "io/gguf_source.h"

#include <cstdlib>
#include <set>
#include <string_view>

#include "kernels/ops.h"
#include "kernels/quant/blocks.h"

namespace ocular {

GgufSource::GgufSource(std::shared_ptr<const GgufFile> file, const std::vector<GgufName>& names)
    : file_(std::move(file)) {
  const char* env = std::getenv("OCULAR_GGUF_DEQUANTIZE");
  dequantize_ = env != nullptr && std::string_view(env) == "1";
  for (const GgufName& n : names) {
    if (file_->FindTensor(n.gguf) != nullptr) by_hf_[n.hf] = n;
  }
}

std::vector<std::string> GgufSource::Names() const {
  std::vector<std::string> out;
  std::set<std::string> mapped;
  for (const auto& [hf, n] : by_hf_) {
    out.push_back(hf);
    mapped.insert(n.gguf);
  }
  for (const GgufTensor& t : file_->tensors()) {
    if (!mapped.count(t.name)) out.push_back(t.name);
  }
  return out;
}

bool GgufSource::Has(const std::string& name) const { return by_hf_.count(name) != 0; }

StatusOr<const GgufTensor*> GgufSource::Lookup(const std::string& name, const Shape& shape,
                                               const GgufName** entry) const {
  auto it = by_hf_.find(name);
  if (it == by_hf_.end()) {
    return Error(StatusCode::kDataLoss, "gguf", origin(), ": missing tensor '", name, "'");
  }
  *entry = &it->second;
  const GgufTensor* t = file_->FindTensor(it->second.gguf);
  if (t->shape() != shape) {
    return Error(StatusCode::kDataLoss, "gguf", origin(), ": tensor '", t->name, "' has shape ",
                 ShapeString(t->shape()), ", config expects ", ShapeString(shape));
  }
  return t;
}

StatusOr<TensorView> GgufSource::Get(const std::string& name, const Shape& shape) const {
  const GgufName* entry = nullptr;
  OCULAR_ASSIGN_OR_RETURN(const GgufTensor* t, Lookup(name, shape, &entry));
  WFormat f;
  if (!WFormatFromGgml(t->type, &f)) {
    return Error(StatusCode::kUnimplemented, "gguf", origin(), ": tensor '", t->name, "' has type ",
                 FindGgmlType(t->type)->name, ", which ocular does not implement");
  }
  const bool is_float = f == WFormat::kF32 || f == WFormat::kBF16 || f == WFormat::kF16;
  if (is_float && !entry->stored_plus_one) {
    const DType dt = f == WFormat::kF32    ? DType::kF32
                     : f == WFormat::kBF16 ? DType::kBF16
                                           : DType::kF16;
    return TensorView{t->data, dt, shape};
  }
  // An f32 copy: rows of ne[0] values decoded one at a time.
  const int64_t cols = t->ne[0], rows = NumElements(shape) / cols;
  const size_t row_bytes = static_cast<size_t>(WFormatRowBytes(f, cols));
  std::vector<float>& out = owned_.emplace_back(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    quant::DequantizeRow(f, t->data + r * row_bytes, cols, out.data() + r * cols);
  }
  if (entry->stored_plus_one) {
    for (float& v : out) v -= 1.0f;
  }
  return TensorView{out.data(), DType::kF32, shape};
}

StatusOr<Matrix> GgufSource::GetMatrix(const std::string& name, const Shape& shape) const {
  const GgufName* entry = nullptr;
  OCULAR_ASSIGN_OR_RETURN(const GgufTensor* t, Lookup(name, shape, &entry));
  Matrix m;
  if (!WFormatFromGgml(t->type, &m.format)) {
    return Error(StatusCode::kUnimplemented, "gguf", origin(), ": tensor '", t->name, "' has type ",
                 FindGgmlType(t->type)->name, ", which ocular does not implement");
  }
  if (!ops::WeightFormatSupported(m.format)) {
    return Error(StatusCode::kUnimplemented, "gguf", origin(), ": tensor '", t->name, "' is ",
                 WFormatName(m.format), ", which ocular's kernels do not implement yet");
  }
  const int64_t rows = shape.empty() ? 1 : shape[0];
  const bool is_float =
      m.format == WFormat::kF32 || m.format == WFormat::kBF16 || m.format == WFormat::kF16;
  if (dequantize_ && !is_float) {
    OCULAR_ASSIGN_OR_RETURN(TensorView f32, Get(name, shape));
    return MatrixFromView(f32, rows, NumElements(shape) / (rows > 0 ? rows : 1));
  }
  return MatrixFromBlocks(t->data, m.format, rows, NumElements(shape) / (rows > 0 ? rows : 1));
}

const MappedFile* GgufSource::MappingOf(const std::byte* p, size_t n) const {
  return file_->mapping().Contains(p, n) ? &file_->mapping() : nullptr;
}

}  // namespace ocular

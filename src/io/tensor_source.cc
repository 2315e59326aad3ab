#include "io/tensor_source.h"

#include <cstring>

#include "kernels/ops.h"

namespace ocular {

const MappedFile* TensorSource::MappingOf(const std::byte*, size_t) const { return nullptr; }

Status TensorSource::PlaceMatrix(Matrix* m, const std::string& name) const {
  constexpr size_t kMinCopyBytes = size_t{2} << 20;
  const size_t packed_bytes = ops::PackedWeightBytes(*m);
  const size_t bytes = packed_bytes > 0 ? packed_bytes : m->bytes();
  const MappedFile* mapping = MappingOf(m->data, m->bytes());
  if (mapping == nullptr || (packed_bytes == 0 && bytes < kMinCopyBytes) ||
      !CopyWeightsOutOfFiles(bytes)) {
    return Status::Ok();
  }
  if (placed_ == nullptr) placed_ = std::make_shared<Placed>();
  const std::tuple<const std::byte*, int64_t, bool> key{m->data, m->rows, packed_bytes > 0};
  if (auto it = placed_->done.find(key);
      it != placed_->done.end() && it->second.format == m->format && it->second.cols == m->cols) {
    *m = it->second;
    return Status::Ok();
  }
  std::byte* copy = placed_->bytes.emplace_back(AllocateHugePages(bytes)).get();
  if (copy == nullptr) {
    placed_->bytes.pop_back();
    return Error(StatusCode::kResourceExhausted, "weights", origin(), ": no memory for tensor '",
                 name, "' (", bytes, " bytes)");
  }
  const std::byte* stored = m->data;
  if (packed_bytes > 0) {
    ops::PackWeights(*m, copy);
    m->packed = &placed_->packed.emplace_back(PackedMatrix{copy, m->data, m->rows});
  } else {
    std::memcpy(copy, m->data, bytes);
    m->data = copy;
  }
  mapping->ReleasePages(stored, m->rows * m->row_bytes);
  placed_->done[key] = *m;
  return Status::Ok();
}

StatusOr<Matrix> TensorSource::GetMatrix(const std::string& name, const Shape& shape) const {
  OCULAR_ASSIGN_OR_RETURN(TensorView view, Get(name, shape));
  const int64_t rows = shape.empty() ? 1 : shape[0];
  return MatrixFromView(view, rows, rows > 0 ? view.numel() / rows : 0);
}

UnionSource::UnionSource(std::vector<std::unique_ptr<TensorSource>> sources)
    : sources_(std::move(sources)) {
  for (const auto& s : sources_) origin_ += (origin_.empty() ? "" : " + ") + s->origin();
}

std::vector<std::string> UnionSource::Names() const {
  std::vector<std::string> out;
  for (const auto& s : sources_) {
    std::vector<std::string> names = s->Names();
    out.insert(out.end(), names.begin(), names.end());
  }
  return out;
}

const TensorSource* UnionSource::Owner(const std::string& name) const {
  for (const auto& s : sources_) {
    if (s->Has(name)) return s.get();
  }
  return nullptr;
}

StatusOr<TensorView> UnionSource::Get(const std::string& name, const Shape& shape) const {
  const TensorSource* s = Owner(name);
  if (s == nullptr) {
    return Error(StatusCode::kDataLoss, "gguf", origin_, ": missing tensor '", name, "'");
  }
  return s->Get(name, shape);
}

const MappedFile* UnionSource::MappingOf(const std::byte* p, size_t n) const {
  for (const auto& s : sources_) {
    if (const MappedFile* f = s->MappingOf(p, n)) return f;
  }
  return nullptr;
}

StatusOr<Matrix> UnionSource::GetMatrix(const std::string& name, const Shape& shape) const {
  const TensorSource* s = Owner(name);
  if (s == nullptr) {
    return Error(StatusCode::kDataLoss, "gguf", origin_, ": missing tensor '", name, "'");
  }
  return s->GetMatrix(name, shape);
}

}  // namespace ocular

#include "io/tensor_source.h"

namespace ocular {

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

StatusOr<Matrix> UnionSource::GetMatrix(const std::string& name, const Shape& shape) const {
  const TensorSource* s = Owner(name);
  if (s == nullptr) {
    return Error(StatusCode::kDataLoss, "gguf", origin_, ": missing tensor '", name, "'");
  }
  return s->GetMatrix(name, shape);
}

}  // namespace ocular

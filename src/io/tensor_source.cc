#include "io/tensor_source.h"

namespace ocular {

StatusOr<Matrix> TensorSource::GetMatrix(const std::string& name, const Shape& shape) const {
  OCULAR_ASSIGN_OR_RETURN(TensorView view, Get(name, shape));
  const int64_t rows = shape.empty() ? 1 : shape[0];
  return MatrixFromView(view, rows, rows > 0 ? view.numel() / rows : 0);
}

}  // namespace ocular

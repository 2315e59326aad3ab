// Where a model's weights come from, by HF tensor name: a safetensors checkpoint directory
// today (io/checkpoint.h); GGUF files and quantized blocks implement the same interface.
// Models ask for each tensor with the shape their config expects; the source checks it.
#pragma once

#include <string>
#include <vector>

#include "core/matrix.h"
#include "core/tensor.h"
#include "ocular/status.h"

namespace ocular {

class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // The directory or file, for error messages.
  virtual const std::string& origin() const = 0;
  virtual std::vector<std::string> Names() const = 0;
  virtual bool Has(const std::string& name) const = 0;

  // A float tensor (F32/BF16/F16) of exactly `shape`: norm weights, biases, position tables.
  virtual StatusOr<TensorView> Get(const std::string& name, const Shape& shape) const = 0;

  // A weight matrix: `shape` as the config expects it, read as [shape[0], product of the
  // rest] rows (a Conv2d [D, C, P, P] is the matrix [D, C*P*P]), in the stored format.
  // The default builds it from Get(); quantized sources override it.
  virtual StatusOr<Matrix> GetMatrix(const std::string& name, const Shape& shape) const;
};

}  // namespace ocular

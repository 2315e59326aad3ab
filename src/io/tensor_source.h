// Where a model's weights come from, by HF tensor name: a safetensors checkpoint directory
// today (io/checkpoint.h); GGUF files and quantized blocks implement the same interface.
// Models ask for each tensor with the shape their config expects; the source checks it.
#pragma once

#include <memory>
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

// The tensors of several sources as one: each name from the first source that has it (a
// llama.cpp text GGUF and its mmproj file). Names() lists every source's names, so a loader
// that checks for unused tensors reports those of either file.
class UnionSource final : public TensorSource {
 public:
  explicit UnionSource(std::vector<std::unique_ptr<TensorSource>> sources);

  const std::string& origin() const override { return origin_; }  // "a + b"
  std::vector<std::string> Names() const override;
  bool Has(const std::string& name) const override { return Owner(name) != nullptr; }
  StatusOr<TensorView> Get(const std::string& name, const Shape& shape) const override;
  StatusOr<Matrix> GetMatrix(const std::string& name, const Shape& shape) const override;

 private:
  const TensorSource* Owner(const std::string& name) const;

  std::vector<std::unique_ptr<TensorSource>> sources_;
  std::string origin_;
};

}  // namespace ocular

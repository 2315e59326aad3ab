// A checkpoint directory in HF layout: model.safetensors, or shards listed by
// model.safetensors.index.json. Tensors are memory-mapped and used in their stored dtype
// (TensorSource::PlaceMatrix moves the large matrices into memory of their own).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "io/tensor_source.h"
#include "ocular/status.h"

namespace ocular {

class Checkpoint : public TensorSource {
 public:
  // Opens and validates every shard. Errors name the directory or file.
  static StatusOr<Checkpoint> Open(const std::string& dir);

  // The tensor called `name`, checked against `shape` and against the allowed float dtypes
  // (F32/BF16/F16). Errors name the file and tensor:
  //   [checkpoint] model.safetensors: tensor 'x' has shape [3,4], config expects [4,3]
  StatusOr<TensorView> Get(const std::string& name, const Shape& shape) const override;
  const TensorView* Find(const std::string& name) const;
  bool Has(const std::string& name) const override { return Find(name) != nullptr; }
  std::vector<std::string> Names() const override;
  const std::string& origin() const override { return dir_; }
  const MappedFile* MappingOf(const std::byte* p, size_t n) const override;
  // Total bytes of tensor data (for memory reporting).
  size_t TotalBytes() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, size_t> where_;  // tensor name -> shard index
};

}  // namespace ocular

// Where a model's weights come from, by HF tensor name: a safetensors checkpoint directory
// today (io/checkpoint.h); GGUF files and quantized blocks implement the same interface.
// Models ask for each tensor with the shape their config expects; the source checks it.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/mapped_file.h"
#include "core/matrix.h"
#include "core/tensor.h"
#include "core/weight_memory.h"
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

  // The file mapping of this source that holds [p, p + n), or null (other memory: a copy, a
  // join). Sources over files override it.
  virtual const MappedFile* MappingOf(const std::byte* p, size_t n) const;

  // Places matrix *m (as GetMatrix gave it; `name` for errors) that lies in a file mapping in
  // memory of its own (core/weight_memory.h), owned by this source, and gives the mapping's
  // pages back (MappedFile::ReleasePages): the active ISA's packed layout where it has one
  // (ops::PackWeights: m->packed; m->data keeps reading the file for the ops that need the
  // stored rows, an embedding's), else a copy on 2 MiB pages for matrices of 2 MiB or more
  // (m->data). The same stored matrix placed again gets the first placement. Nothing when
  // CopyWeightsOutOfFiles says no. kResourceExhausted if the memory cannot be allocated.
  Status PlaceMatrix(Matrix* m, const std::string& name) const;

 private:
  struct Placed {
    std::deque<HugePages> bytes;
    std::deque<PackedMatrix> packed;
    // By stored data, rows and whether packed.
    std::map<std::tuple<const std::byte*, int64_t, bool>, Matrix> done;
  };
  mutable std::shared_ptr<Placed> placed_;  // shared by copies of the source
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
  const MappedFile* MappingOf(const std::byte* p, size_t n) const override;

 private:
  const TensorSource* Owner(const std::string& name) const;

  std::vector<std::unique_ptr<TensorSource>> sources_;
  std::string origin_;
};

}  // namespace ocular

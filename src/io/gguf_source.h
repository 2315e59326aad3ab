// The tensors of a GGUF file under the names a model family asks for (HF names), through a
// family-provided name table: llama.cpp's names for the Gemma text decoders, ocular's own for
// the vision tower and projector (docs/quantization.md lists them).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/tensor_source.h"

namespace ocular {

struct GgufName {
  std::string hf;    // e.g. "language_model.model.layers.0.input_layernorm.weight"
  std::string gguf;  // e.g. "blk.0.attn_norm.weight"
  // llama.cpp stores Gemma's RMSNorm weights as 1 + w (its norm multiplies by the weight;
  // Gemma's by 1 + w): such tensors are read back as stored - 1, as transformers'
  // GGUF loader does. ocular's own files store w.
  bool stored_plus_one = false;
};

class GgufSource final : public TensorSource {
 public:
  GgufSource(std::shared_ptr<const GgufFile> file, const std::vector<GgufName>& names);

  const std::string& origin() const override { return file_->origin(); }
  // HF names of the mapped tensors, and the GGUF names of tensors no entry maps (so a
  // loader that checks for unused tensors reports them).
  std::vector<std::string> Names() const override;
  bool Has(const std::string& name) const override;
  // Float tensors are returned in place; quantized ones, and norms stored plus one, as an
  // f32 copy owned by this source.
  StatusOr<TensorView> Get(const std::string& name, const Shape& shape) const override;
  // In the stored format (quantized blocks stay quantized; f32 under OCULAR_GGUF_DEQUANTIZE=1).
  StatusOr<Matrix> GetMatrix(const std::string& name, const Shape& shape) const override;
  const MappedFile* MappingOf(const std::byte* p, size_t n) const override;

 private:
  // The tensor behind HF `name`, checked against `shape`.
  StatusOr<const GgufTensor*> Lookup(const std::string& name, const Shape& shape,
                                     const GgufName** entry) const;

  std::shared_ptr<const GgufFile> file_;
  // OCULAR_GGUF_DEQUANTIZE=1: quantized matrices are dequantized to f32 at load, so the
  // kernels run in f32 (no int8 activations): a parity check of the model on the file's exact
  // values against a reference that dequantizes the same way (tools/reference).
  bool dequantize_ = false;
  std::map<std::string, GgufName> by_hf_;
  mutable std::deque<std::vector<float>> owned_;  // f32 copies handed out by Get
};

}  // namespace ocular

#include "models/family.h"

#include <cstring>

#include "io/checkpoint.h"

namespace ocular {

std::vector<std::string> AliasedNames(const std::string& name, std::span<const NameAlias> aliases) {
  std::vector<std::string> out = {name};
  for (const NameAlias& a : aliases) {
    const size_t n = std::strlen(a.legacy);
    if (name.compare(0, n, a.legacy) == 0) out.push_back(a.current + name.substr(n));
  }
  return out;
}

void SetWeightStats(const BoundWeights& bound, ModelSpec* spec) {
  spec->weight_bytes = bound.weight_bytes;
  spec->text_weight_bytes = bound.text_weight_bytes;
  spec->weight_dtype = bound.weight_dtype;
  spec->float_dtype = bound.float_dtype;
  spec->quantized = bound.quantized;
  spec->weight_formats = bound.weight_formats;
}

StatusOr<std::unique_ptr<TensorSource>> OpenTensors(const ModelFiles& files,
                                                    const GgufTensorsFn& gguf,
                                                    const std::string& tag,
                                                    const std::string& model) {
  if (files.gguf != nullptr) {
    if (gguf == nullptr) {
      return Error(StatusCode::kUnimplemented, tag, files.path, ": ", model,
                   " runs from HF directories only (no GGUF names yet)");
    }
    return gguf();
  }
  OCULAR_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(files.path));
  return std::unique_ptr<TensorSource>(std::make_unique<Checkpoint>(std::move(ckpt)));
}

}  // namespace ocular

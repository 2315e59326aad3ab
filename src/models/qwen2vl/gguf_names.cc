#include "models/qwen2vl/gguf_names.h"

#include <cstring>

#include "models/gguf_rename.h"

namespace ocular::qwen2vl {

namespace {

using gguf_rename::Rename;
using gguf_rename::StartsWith;

// The image path: the mergers (projectors) under "mm.", the rest of the tower under "v.".
constexpr Rename kVision[] = {
    {"merger.", "mm.merger."},
    {"deepstack_merger_list.", "mm.deepstack."},
    {"", "v."},
};

// GgufSource with HF's shapes over GgufShape's.
class FlatSource final : public TensorSource {
 public:
  explicit FlatSource(std::unique_ptr<GgufSource> file) : file_(std::move(file)) {}
  const std::string& origin() const override { return file_->origin(); }
  std::vector<std::string> Names() const override { return file_->Names(); }
  bool Has(const std::string& name) const override { return file_->Has(name); }
  StatusOr<TensorView> Get(const std::string& name, const Shape& shape) const override {
    OCULAR_ASSIGN_OR_RETURN(TensorView v, file_->Get(name, GgufShape(shape)));
    v.shape = shape;
    return v;
  }
  StatusOr<Matrix> GetMatrix(const std::string& name, const Shape& shape) const override {
    return file_->GetMatrix(name, GgufShape(shape));  // [shape[0], the rest] either way
  }
  const MappedFile* MappingOf(const std::byte* p, size_t n) const override {
    return file_->MappingOf(p, n);
  }

 private:
  std::unique_ptr<GgufSource> file_;
};

}  // namespace

std::string GgufTensorName(const std::string& hf) {
  if (hf == "lm_head.weight") return "output.weight";
  for (const char* prefix : {"model.visual.", "visual."}) {
    if (StartsWith(hf, prefix))
      return gguf_rename::RenamePrefix(hf.substr(std::strlen(prefix)), kVision);
  }
  return gguf_rename::RenameDecoder(hf, {"model.language_model.", "model."},
                                    gguf_rename::kPreMlpNorm);
}

std::vector<GgufName> GgufNames(const TensorWalk& walk) {
  std::vector<GgufName> out;
  (void)walk([&](const std::string& name, const Shape&, WeightSlot, bool) {
    out.push_back({name, GgufTensorName(name), false});
    return Status::Ok();
  });
  return out;
}

Shape GgufShape(const Shape& shape) {
  if (shape.size() <= 4) return shape;
  return {shape[0], NumElements(shape) / shape[0]};
}

std::unique_ptr<TensorSource> GgufTensors(std::shared_ptr<const GgufFile> file,
                                          const TensorWalk& walk) {
  return std::make_unique<FlatSource>(
      std::make_unique<GgufSource>(std::move(file), GgufNames(walk)));
}

Status ForEachGgufWeight(const TensorWalk& walk, const VlModel::WeightVisitor& fn,
                         const char* tag) {
  return walk([&](const std::string& name, const Shape& shape, WeightSlot slot, bool) -> Status {
    const std::string gguf = GgufTensorName(name);
    if (gguf.empty()) {
      return Error(StatusCode::kInternal, tag, "no GGUF name for tensor '", name, "'");
    }
    return fn(gguf, GgufShape(shape), slot.matrix, slot.vector);
  });
}

}  // namespace ocular::qwen2vl

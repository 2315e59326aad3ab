// The skeleton every family's VlModel shares (models/model.h): its config, tensor source,
// weights and spec, loading in one order (open the tensors, bind every weight the family's
// ForEachTensor visits, build the spec), and the small helpers of that order. A family class
// derives from FamilyModel<Family, Config, Weights> and writes only what is its own: the
// binding rules (BindWeights), the spec (BuildSpec) and the forward pass.
// docs/architecture.md, "Adding a model family", walks through it.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/model_files.h"
#include "io/tensor_source.h"
#include "models/model.h"
#include "models/weights.h"
#include "ocular/status.h"

namespace ocular {

// A module path saved under another name by other transformers versions: transformers >= 4.52
// saves the new names of _checkpoint_conversion_mapping ("language_model.model." ->
// "model.language_model.").
struct NameAlias {
  const char* legacy;
  const char* current;
};
// {name} and, for each alias whose legacy prefix `name` starts with, the name under the
// current prefix (BindRules::candidates).
std::vector<std::string> AliasedNames(const std::string& name, std::span<const NameAlias> aliases);

// Copies BindTensors' totals (bytes, dtypes, formats) into the spec.
void SetWeightStats(const BoundWeights& bound, ModelSpec* spec);

// The tensors of `files`: a checkpoint directory's safetensors, or, for a GGUF file, what
// `gguf` makes of it. A family without GGUF names passes a null `gguf`: a GGUF file is then
// kUnimplemented, with `tag` ("qwen2_vl"), the file and `model` ("Qwen2-VL").
using GgufTensorsFn = std::function<std::unique_ptr<TensorSource>()>;
StatusOr<std::unique_ptr<TensorSource>> OpenTensors(const ModelFiles& files,
                                                    const GgufTensorsFn& gguf,
                                                    const std::string& tag = "",
                                                    const std::string& model = "");

// The VlModel calls (models/model.h) every family class overrides, declared once: a family
// class says OCULAR_FAMILY_MODEL_METHODS() in its public section and defines them in its .cc;
// its class comment says what its calls tap and what is its own.
#define OCULAR_FAMILY_MODEL_METHODS()                                                           \
  size_t WorkspaceBytes(const WorkspaceShape& shape) const override;                            \
  void EncodeImages(const Exec& ex, std::span<const VisionInput> images, const float* pixels,   \
                    float* features, Tracer* tracer) const override;                            \
  Status Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,             \
               int64_t feature_rows, float* x, Tracer* tracer) const override;                  \
  void ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer, int begin,   \
                     int end) const override;                                                   \
  void Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const override; \
  Status ForEachWeight(const WeightVisitor& fn) const override

// Base of a family's model class: `Config` is the family's parsed config.json, `Weights` the
// struct its ForEachTensor(const Config&, Weights*, const TensorVisitor&) fills (found by
// argument-dependent lookup, in the family's namespace).
template <typename Config, typename Weights>
class FamilyModel : public VlModel {
 public:
  const Config& config() const { return cfg_; }
  const ModelSpec& spec() const final { return spec_; }

 protected:
  FamilyModel() = default;

  // The loading order: takes the config and the tensors, BindWeights(), BuildSpec().
  template <typename Model>
  static StatusOr<std::unique_ptr<Model>> Assemble(std::unique_ptr<Model> model, Config config,
                                                   std::unique_ptr<TensorSource> source) {
    FamilyModel& m = *model;
    m.cfg_ = std::move(config);
    m.source_ = std::move(source);
    OCULAR_RETURN_IF_ERROR(m.BindWeights());
    m.BuildSpec();
    return model;
  }

  // Binds every tensor ForEachTensor(cfg_, &w_) visits from source_ (BindTensors: a missing
  // one is kDataLoss, an unused one kUnimplemented) and records the totals in spec_.
  Status BindAll(const BindRules& rules) {
    OCULAR_ASSIGN_OR_RETURN(BoundWeights bound,
                            BindTensors(*source_, rules, [&](const TensorVisitor& fn) {
                              return ForEachTensor(cfg_, &w_, fn);
                            }));
    SetWeightStats(bound, &spec_);
    return Status::Ok();
  }

  // ForEachWeight's walk: every tensor ForEachTensor visits, under gguf_name(its HF name);
  // `skip_optional` leaves out the optional ones (an lm_head the checkpoint ties). A tensor
  // without a GGUF name is kInternal.
  Status VisitUnderGgufNames(const std::function<std::string(const std::string&)>& gguf_name,
                             const VlModel::WeightVisitor& fn, bool skip_optional = false) const {
    Weights w = w_;  // views; the visitor only reads them
    return ForEachTensor(
        cfg_, &w,
        [&](const std::string& name, const Shape& shape, WeightSlot slot, bool required) -> Status {
          if (!required && skip_optional) return Status::Ok();
          const std::string gguf = gguf_name(name);
          if (gguf.empty()) {
            return Error(StatusCode::kInternal, spec_.family, "no GGUF name for tensor '", name,
                         "'");
          }
          return fn(gguf, shape, slot.matrix, slot.vector);
        });
  }

  // Binds the weights (most families: BindAll with their rules, then derived views).
  virtual Status BindWeights() = 0;
  // Fills spec_ from cfg_ (the weight totals are already there).
  virtual void BuildSpec() = 0;

  Config cfg_;
  std::unique_ptr<TensorSource> source_;
  Weights w_;
  ModelSpec spec_;
};

}  // namespace ocular

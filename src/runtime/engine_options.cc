#include "runtime/engine_options.h"

#include <cmath>

namespace ocular {

// Sampling options are user input: NaN, negative or out-of-range values are refused.
Status CheckOptions(const GenerateOptions& o) {
  if (o.max_tokens < 0) {
    return Error(StatusCode::kInvalidArgument, "generate", "max_tokens must be >= 0, got ",
                 o.max_tokens);
  }
  if (!(o.temperature >= 0.0f) || !std::isfinite(o.temperature)) {
    return Error(StatusCode::kInvalidArgument, "generate",
                 "temperature must be a finite number >= 0 (0 = greedy), got ", o.temperature);
  }
  if (o.top_k < 0)
    return Error(StatusCode::kInvalidArgument, "generate", "top_k must be >= 0, got ", o.top_k);
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) {
    return Error(StatusCode::kInvalidArgument, "generate", "top_p must be in (0, 1], got ",
                 o.top_p);
  }
  return Status::Ok();
}

// The precision a user asked for, checked against what the checkpoint stores. The bf16
// precisions run bf16 checkpoints, and quantized files whose other matrices are all bf16 (a
// GGUF quantized from a bf16 checkpoint: its vision tower, projector, mllama's cross-attention
// K/V): those parts are bf16 models, and their bf16 GEMMs are 3x the f32 path's speed.
StatusOr<Precision> ChoosePrecision(const std::string& name, const ModelSpec& spec) {
  const bool bf16 =
      spec.weight_dtype == DType::kBF16 || (spec.quantized && spec.float_dtype == DType::kBF16);
  if (name == "auto") return bf16 ? Precision::kBF16 : Precision::kF32;
  Precision p;
  if (!ParsePrecision(name, &p)) {
    return Error(StatusCode::kInvalidArgument, "engine", "unknown precision '", name,
                 "' (auto, f32, bf16, bf16-fast)");
  }
  if (p != Precision::kF32 && !bf16) {
    return Error(StatusCode::kUnimplemented, "engine", "precision ", name,
                 " runs bf16 checkpoints (or quantized ones whose other matrices are bf16); "
                 "this one stores ",
                 spec.weight_formats, " weights (use f32)");
  }
  return p;
}

StatusOr<QuantActivations> ChooseQuantActivations(const std::string& name) {
  QuantActivations q;
  if (!ParseQuantActivations(name, &q)) {
    return Error(StatusCode::kInvalidArgument, "engine", "unknown quant_activations '", name,
                 "' (int8, f32)");
  }
  return q;
}

StatusOr<KvDType> ChooseKv(const std::string& name, Precision p) {
  if (name == "auto") return p == Precision::kF32 ? KvDType::kF32 : KvDType::kBF16;
  if (name == "f32") return KvDType::kF32;
  if (name == "bf16") return KvDType::kBF16;
  return Error(StatusCode::kInvalidArgument, "engine", "unknown kv_cache '", name,
               "' (auto, f32, bf16)");
}

}  // namespace ocular

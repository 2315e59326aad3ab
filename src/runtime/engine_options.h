// The Engine's option checks: user input (EngineOptions / GenerateOptions strings and numbers)
// to the runtime's types, with an error that names the option and its accepted values.
#pragma once

#include <string>

#include "kernels/exec.h"
#include "models/model.h"
#include "ocular/engine.h"

namespace ocular {

// Sampling options: NaN, negative or out-of-range values are refused.
Status CheckOptions(const GenerateOptions& o);
// `name` ("auto", "f32", "bf16", "bf16-fast") against what the checkpoint stores.
StatusOr<Precision> ChoosePrecision(const std::string& name, const ModelSpec& spec);
StatusOr<QuantActivations> ChooseQuantActivations(const std::string& name);
StatusOr<KvDType> ChooseKv(const std::string& name, Precision p);

}  // namespace ocular

// Reading the reference's golden case files (tools/reference/make_*.py): a case's id tensors,
// its comma-separated image names, and a runner over a tiny checkpoint as torch runs it.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/exec.h"
#include "models/registry.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"

namespace ocular::testing_support {

// An int64 tensor's values.
inline std::vector<int64_t> I64(const TensorView& t) {
  return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + t.numel());
}

// An int64 tensor of token ids as ocular's int32 ids.
inline std::vector<int32_t> Ids(const TensorView& t) {
  std::vector<int32_t> ids(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) ids[i] = static_cast<int32_t>(t.as<int64_t>()[i]);
  return ids;
}

// "a,b" -> {"a", "b"}; "" -> {}.
inline std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// A loaded checkpoint with a runner as torch runs it (bf16 weights: bf16 activations and KV
// cache, else f32), below the public API.
struct LoadedRunner {
  LoadedModel m;
  ThreadPool pool{2};
  Backend backend{pool};
  std::unique_ptr<KvPool> kv;
  std::unique_ptr<Runner> runner;
};

inline StatusOr<std::unique_ptr<LoadedRunner>> LoadRunner(const std::string& path,
                                                          RunnerLimits limits,
                                                          const std::string& mmproj = "") {
  auto l = std::make_unique<LoadedRunner>();
  OCULAR_ASSIGN_OR_RETURN(l->m, LoadModel(path, mmproj));
  const bool bf16 = l->m.model->spec().weight_dtype == DType::kBF16;
  l->kv = std::make_unique<KvPool>(l->m.model->spec().kv, bf16 ? KvDType::kBF16 : KvDType::kF32);
  l->runner = std::make_unique<Runner>(*l->m.model, l->backend,
                                       bf16 ? Precision::kBF16 : Precision::kF32, limits);
  return l;
}

}  // namespace ocular::testing_support

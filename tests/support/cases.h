// Reading the reference's golden case files (tools/reference/make_*.py): a checkpoint's case
// files, a case's id tensors, its comma-separated image names, a runner over a tiny checkpoint
// as torch runs it, and the checkpoint as a float GGUF file.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/exec.h"
#include "models/registry.h"
#include "ocular/quantize.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"

namespace ocular::testing_support {

// The case files of a checkpoint's goldens (testdata/golden/<checkpoint>/*.safetensors), sorted.
inline std::vector<std::string> CaseFiles(const std::string& checkpoint) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("testdata/golden/" + checkpoint)) {
    if (e.path().extension() == ".safetensors") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A float tensor's copy.
inline Tensor ToTensor(const TensorView& t) {
  Tensor out(t.shape);
  std::copy_n(t.as<float>(), t.numel(), out.data.data());
  return out;
}

// The checkpoint at `dir` as a GGUF file that `ocular quantize` writes with its weights in
// their stored float type (bf16 or f32), in a per-process temporary file (ctest runs the ISA
// variants of a test at the same time); the caller removes it.
inline std::string FloatGguf(const std::string& dir, const std::string& name, bool bf16) {
  QuantizeOptions o;
  o.input = dir;
  o.output = (std::filesystem::temp_directory_path() /
              ("ocular_golden_" + name + "_" + std::to_string(::getpid()) + ".gguf"))
                 .string();
  o.type = bf16 ? "bf16" : "f32";
  auto r = QuantizeModel(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return o.output;
}

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

// Loads `path` (and its `mmproj`) into *l, a LoadedRunner or a harness derived from it.
inline Status LoadRunnerInto(const std::string& path, RunnerLimits limits, LoadedRunner* l,
                             const std::string& mmproj = "") {
  OCULAR_ASSIGN_OR_RETURN(l->m, LoadModel(path, mmproj));
  const bool bf16 = l->m.model->spec().weight_dtype == DType::kBF16;
  l->kv = std::make_unique<KvPool>(l->m.model->spec().kv, bf16 ? KvDType::kBF16 : KvDType::kF32);
  l->runner = std::make_unique<Runner>(*l->m.model, l->backend,
                                       bf16 ? Precision::kBF16 : Precision::kF32, limits);
  return Status::Ok();
}

inline StatusOr<std::unique_ptr<LoadedRunner>> LoadRunner(const std::string& path,
                                                          RunnerLimits limits,
                                                          const std::string& mmproj = "") {
  auto l = std::make_unique<LoadedRunner>();
  OCULAR_RETURN_IF_ERROR(LoadRunnerInto(path, limits, l.get(), mmproj));
  return l;
}

}  // namespace ocular::testing_support

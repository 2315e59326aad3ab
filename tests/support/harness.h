// A PaliGemma checkpoint with everything needed to run it below the public API: the model,
// a thread pool, the backend of the active ISA, a runner and a KV pool (tests only).
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "kernels/exec.h"
#include "kernels/ops.h"
#include "models/paligemma/paligemma.h"
#include "runtime/generator.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"

namespace ocular::testing_support {

struct Harness {
  // precision: nullptr = as the engine's "auto" (bf16 for a bf16 checkpoint, else f32).
  static StatusOr<std::unique_ptr<Harness>> Load(const std::string& dir,
                                                 const Precision* precision = nullptr,
                                                 int threads = 2, int max_batch = 1) {
    OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<paligemma::PaliGemma> model,
                            paligemma::PaliGemma::Load(dir));
    const Precision p = precision ? *precision
                        : model->spec().weight_dtype == DType::kBF16 ? Precision::kBF16
                                                                      : Precision::kF32;
    return std::unique_ptr<Harness>(new Harness(std::move(model), p, threads, max_batch));
  }

  StatusOr<GenerationOutput> Generate(const GenerationRequest& req, Tracer* tracer = nullptr) {
    return ocular::Generate(runner, kv, req, tracer);
  }

  std::unique_ptr<paligemma::PaliGemma> model;
  ThreadPool pool;
  Backend backend;
  KvPool kv;
  Runner runner;

 private:
  Harness(std::unique_ptr<paligemma::PaliGemma> m, Precision p, int threads, int max_batch)
      : model(std::move(m)),
        pool(threads),
        backend(pool),
        kv(model->spec().kv, p == Precision::kF32 ? KvDType::kF32 : KvDType::kBF16),
        runner(*model, backend, p, {.max_batch = max_batch}) {}
};

// OCULAR_ISA names an ISA this machine cannot run (the kernel layer then falls back to the
// default, so a per-ISA test run would only repeat the default): skip.
inline bool RequestedIsaUnavailable() {
  const char* isa = std::getenv("OCULAR_ISA");
  return isa != nullptr && std::string(isa) != ActiveIsa();
}

}  // namespace ocular::testing_support

// A PaliGemma checkpoint with everything needed to run it below the public API: the model,
// a thread pool, the backend of the active ISA, a runner and a KV pool (tests only).
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/exec.h"
#include "kernels/ops.h"
#include "models/paligemma/paligemma.h"
#include "runtime/generator.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"
#include "support/prompts.h"

namespace ocular::testing_support {

struct Harness {
  // precision: nullptr = as the engine's "auto" (bf16 for a bf16 checkpoint, else f32).
  static StatusOr<std::unique_ptr<Harness>> Load(
      const std::string& dir, const Precision* precision = nullptr, int threads = 2,
      int max_batch = 1, QuantActivations quant_activations = QuantActivations::kInt8) {
    OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<paligemma::PaliGemma> model,
                            paligemma::PaliGemma::Load(dir));
    return Wrap(std::move(model), precision, threads, max_batch, quant_activations);
  }
  // The same around a model loaded by the caller (on the ISA active now).
  static std::unique_ptr<Harness> Wrap(
      std::unique_ptr<paligemma::PaliGemma> model, const Precision* precision = nullptr,
      int threads = 2, int max_batch = 1,
      QuantActivations quant_activations = QuantActivations::kInt8) {
    const Precision p = precision                                    ? *precision
                        : model->spec().weight_dtype == DType::kBF16 ? Precision::kBF16
                                                                     : Precision::kF32;
    return std::unique_ptr<Harness>(
        new Harness(std::move(model), p, threads, max_batch, quant_activations));
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
  Harness(std::unique_ptr<paligemma::PaliGemma> m, Precision p, int threads, int max_batch,
          QuantActivations quant_activations)
      : model(std::move(m)),
        pool(threads),
        backend(pool),
        kv(model->spec().kv, p == Precision::kF32 ? KvDType::kF32 : KvDType::kBF16),
        runner(*model, backend, p, {.max_batch = max_batch}, quant_activations) {}
};

// Logits at every position when the prompt is prefilled and then `generated` is fed one token
// per decode step (as decoding runs, one row at a time): rows [0, T) are the prompt positions
// (row T - 1 predicts generated[0]), row T + s the step that read generated[s] (predicting
// generated[s + 1]); T + generated.size() - 1 rows of vocab_size floats.
inline std::vector<float> TeacherForcedLogits(Harness& m, const std::vector<int32_t>& prompt,
                                              const std::vector<int32_t>& generated,
                                              const TensorView* pixels) {
  const ModelSpec& spec = m.model->spec();
  const int64_t T = static_cast<int64_t>(prompt.size()), H = spec.hidden_size;
  const int64_t V = spec.vocab_size, G = static_cast<int64_t>(generated.size());
  const int64_t n = T + G;
  std::vector<float> features, x(T * H), logits((T + G - 1) * V);
  const std::shared_ptr<Prompt> p = FixturePrompt(spec, prompt, pixels);
  const int64_t rows = p->feature_rows();
  if (pixels) {
    features.resize(rows * H);
    m.runner.EncodeImages(*p, 0, p->images.size(), features.data(), nullptr);
  }
  m.runner.Plan(T, n, 0);
  const Exec& ex = m.runner.exec();
  auto cache = m.kv.Acquire(n);
  OCULAR_CHECK(cache.ok());
  OCULAR_CHECK(m.model->Embed(ex, prompt, features.data(), rows, x.data(), nullptr).ok());
  const SeqChunk prefill{cache->cache(), 0, T, p.get()};
  m.model->Forward(ex, Batch{std::span<const SeqChunk>(&prefill, 1), T}, x.data(), nullptr);
  m.model->Logits(ex, x.data(), T, logits.data());
  for (int64_t s = 0; s + 1 < G; ++s) {
    OCULAR_CHECK(
        m.model
            ->Embed(ex, std::span<const int32_t>(&generated[s], 1), nullptr, 0, x.data(), nullptr)
            .ok());
    const SeqChunk step{cache->cache(), T + s, 1, p.get()};
    m.model->Forward(ex, Batch{std::span<const SeqChunk>(&step, 1), 1}, x.data(), nullptr);
    m.model->Logits(ex, x.data(), 1, logits.data() + (T + s) * V);
  }
  return logits;
}

// OCULAR_ISA names an ISA this machine cannot run (the kernel layer then falls back to the
// default, so a per-ISA test run would only repeat the default): skip.
inline bool RequestedIsaUnavailable() {
  const char* isa = std::getenv("OCULAR_ISA");
  return isa != nullptr && std::string(isa) != ActiveIsa();
}

}  // namespace ocular::testing_support

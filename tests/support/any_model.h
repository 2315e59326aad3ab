// A model of any registered family (models/registry.h) with what is needed to run it below the
// public API, and teacher-forced logits over it (quantization quality: tests and bench tools).
// Harness (harness.h) is the PaliGemma-typed twin the PaliGemma tests use.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/exec.h"
#include "models/registry.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"

namespace ocular::testing_support {

struct AnyModel {
  // precision: nullptr = as the engine's "auto" (bf16 for a bf16 checkpoint, else f32).
  // max_images: images per prompt the runner is planned for.
  static StatusOr<std::unique_ptr<AnyModel>> Load(const std::string& path,
                                                  const Precision* precision = nullptr,
                                                  int max_images = 3, int threads = 2) {
    OCULAR_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(path));
    std::unique_ptr<AnyModel> m(new AnyModel(threads));
    m->model = std::move(loaded.model);
    m->processor = std::move(loaded.processor);
    const bool bf16 = m->model->spec().weight_dtype == DType::kBF16;
    const Precision p = precision ? *precision : bf16 ? Precision::kBF16 : Precision::kF32;
    m->kv = std::make_unique<KvPool>(m->model->spec().kv,
                                     p == Precision::kF32 ? KvDType::kF32 : KvDType::kBF16);
    m->runner = std::make_unique<Runner>(*m->model, m->backend, p,
                                         RunnerLimits{.max_batch = 1, .max_images = max_images});
    return m;
  }

  std::unique_ptr<VlModel> model;
  std::unique_ptr<Processor> processor;
  ThreadPool pool;
  Backend backend;
  std::unique_ptr<KvPool> kv;
  std::unique_ptr<Runner> runner;

 private:
  explicit AnyModel(int threads) : pool(threads), backend(pool) {}
};

// Logits at every position when `prompt` (its ids, spans and images; models/prompt.h) is
// prefilled and then `generated` is fed one token per decode step: rows [0, T) are the prompt
// positions (row T - 1 predicts generated[0]), row T + s the step that read generated[s];
// T + generated.size() - 1 rows of vocab_size floats.
inline std::vector<float> TeacherForced(AnyModel& m, const Prompt& prompt,
                                        const std::vector<int32_t>& generated) {
  const ModelSpec& spec = m.model->spec();
  const int64_t T = prompt.size(), H = spec.hidden_size;
  const int64_t V = spec.vocab_size, G = static_cast<int64_t>(generated.size()), n = T + G;
  const int64_t images = static_cast<int64_t>(prompt.images.size());
  const int64_t rows = prompt.feature_rows();
  std::vector<float> features(rows * spec.feature_floats()), x(T * H), logits((T + G - 1) * V);
  if (images > 0) m.runner->EncodeImages(prompt, 0, prompt.images.size(), features.data(), nullptr);
  m.runner->Plan(T, n, images);
  const Exec& ex = m.runner->exec();
  auto cache = m.kv->Acquire(n, spec.kv.HasCross() ? rows : 0);
  OCULAR_CHECK(cache.ok());
  const std::unique_ptr<SequenceState> state = m.model->NewState();
  const float* f = images > 0 ? features.data() : nullptr;
  OCULAR_CHECK(m.model->Embed(ex, prompt.ids, f, rows, x.data(), nullptr).ok());
  const SeqChunk prefill{cache->cache(), 0, T, &prompt, state.get(), f};
  m.model->Forward(ex, Batch{std::span<const SeqChunk>(&prefill, 1), T}, x.data(), nullptr);
  m.model->Logits(ex, x.data(), T, logits.data());
  for (int64_t s = 0; s + 1 < G; ++s) {
    OCULAR_CHECK(
        m.model
            ->Embed(ex, std::span<const int32_t>(&generated[s], 1), nullptr, 0, x.data(), nullptr)
            .ok());
    const SeqChunk step{cache->cache(), T + s, 1, &prompt, state.get()};
    m.model->Forward(ex, Batch{std::span<const SeqChunk>(&step, 1), 1}, x.data(), nullptr);
    m.model->Logits(ex, x.data(), 1, logits.data() + (T + s) * V);
  }
  return logits;
}

}  // namespace ocular::testing_support

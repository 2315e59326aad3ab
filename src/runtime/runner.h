// Runner: runs sequences through a model on one execution context — the step API.
//
//   Runner runner(model, backend, Precision::kBF16, {.max_batch = 8});
//   runner.EncodeImages(prompt, 0, prompt.images.size(), features.data(), nullptr);
//   runner.Prefill(seq_a, features.data(), nullptr);   // first token sampled
//   runner.Prefill(seq_b, nullptr, nullptr);
//   while (...) runner.DecodeStep(batch);                    // one [B, H] pass per step
//
// Prefill runs one sequence's whole prompt (its bidirectional prefix must be complete in one
// pass); DecodeStep feeds the last token of every unfinished sequence in `batch` through one
// forward pass that reads each weight once, so B sequences cost about one sequence's weight
// traffic. Sequences may differ in prompt, images, length and sampling, and may join or leave
// between steps. Results do not depend on the batch a sequence runs in.
//
// Memory: the workspace arena and the activation buffers are planned from RunnerLimits; a
// prefill longer (or a batch wider) than planned grows them once, before any layer runs.
// DecodeStep within the planned batch makes no heap allocation.
// Thread-safety: a Runner is used by one thread at a time (the model and backend may be
// shared by several Runners).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/arena.h"
#include "kernels/exec.h"
#include "models/model.h"
#include "runtime/sequence.h"

namespace ocular {

struct RunnerLimits {
  int64_t max_batch = 1;    // sequences per decode step
  int64_t max_context = 0;  // tokens per sequence, prompt included (0: one image and a short
                            // prompt); the workspace is planned for prefills this long
  int64_t max_images = 1;   // images per EncodeImages call
};

class Runner {
 public:
  Runner(const VlModel& model, const Backend& backend, Precision precision,
         const RunnerLimits& limits, QuantActivations quant_activations = QuantActivations::kInt8);

  const Exec& exec() const { return ex_; }
  const VlModel& model() const { return model_; }

  // The features of prompt.images [begin, end), image after image (FeatureRows(begin, end)
  // rows of spec().feature_floats()). REQUIRES: begin < end <= prompt.images.size().
  void EncodeImages(const Prompt& prompt, size_t begin, size_t end, float* features,
                    Tracer* tracer);

  // Runs seq's prompt (image-token rows take `features`, the prompt's images' features, in
  // order; null for a prompt without images), fills its cache and samples its first token
  // (unless max_new_tokens == 0). With prompt_logits, also returns the logits of every prompt
  // position [T, V] (and taps them as "logits"). Errors: bad ids, image token count != feature
  // rows, prompt longer than the cache.
  Status Prefill(Sequence& seq, const float* features, Tracer* tracer,
                 std::vector<float>* prompt_logits = nullptr);

  // The same prefill in pieces, so that a scheduler can run decode steps of other sequences
  // between them (a chunked prefill): BeginPrefill embeds the prompt, PrefillLayers runs the
  // next `layers` decoder layers over all its rows, FinishPrefill (once every layer ran)
  // computes the last position's logits and samples the first token. The pieces run exactly
  // the computation of Prefill (same calls, same rows, paused between layers: each layer reads
  // only the rows' activations and its own K/V), so the results are identical, taps and
  // prompt_logits included. The task keeps its activations [rows, H]; `features` must stay
  // valid until FinishPrefill.
  // A sequence whose cache already holds the K/V of its first rows (a prefix cache's copy:
  // seq.position() > 0) prefills the rest: rows [position, T) over the cached ones. Those rows
  // hold no image token (features: null) and the prompt logits are not asked for.
  struct PrefillTask {
    Sequence* seq = nullptr;
    const float* features = nullptr;
    int64_t start = 0;   // the first row prefilled (rows before it were cached)
    int64_t rows = 0;    // rows prefilled: the prompt's length - start
    int next_layer = 0;  // layers [0, next_layer) have run
    std::vector<float> x;
  };
  Status BeginPrefill(Sequence& seq, const float* features, PrefillTask* task,
                      Tracer* tracer = nullptr);
  // Runs up to `layers` more layers (>= 1); returns the layers left.
  int PrefillLayers(PrefillTask& task, int layers, Tracer* tracer = nullptr);
  // A merged prefill: the next `layers` layers of several prompts in one pass (each layer's
  // matmuls read the weights once for every task's rows; attention stays per sequence). Each
  // task's rows get exactly what they get alone when every task has more than kMergeMinRows - 1
  // rows (MergeInvariant). REQUIRES: the tasks at one layer, none traced. Returns the layers left.
  int PrefillLayers(std::span<PrefillTask* const> tasks, int layers);
  // Whether a prefill of `rows` rows computes the same merged with others as alone: the
  // kernels' prefill matmuls (more than 8 rows: the packed GEMMs) sum each row in an order that
  // K alone fixes (src/kernels/README.md), while 1-8 rows take the decode kernels.
  static constexpr int64_t kMergeMinRows = 9;
  static bool MergeInvariant(int64_t rows) { return rows >= kMergeMinRows; }
  // REQUIRES: PrefillLayers returned 0.
  void FinishPrefill(PrefillTask& task, Tracer* tracer = nullptr,
                     std::vector<float>* prompt_logits = nullptr);
  int num_layers() const { return static_cast<int>(model_.spec().layers.size()); }

  // One decode step for every sequence in `batch` that is not done.
  void DecodeStep(std::span<Sequence* const> batch);

  // The logits row that chose the latest token of the i-th sequence that was still running in
  // the last DecodeStep (after Prefill: i = 0, the prompt's last position). Valid until the
  // next call.
  const float* last_logits(int64_t i) const { return logits_.data() + i * vocab_; }
  int32_t vocab() const { return vocab_; }
  size_t workspace_bytes() const { return arena_.capacity(); }

  // Grows the arena and buffers for passes of `rows` rows over `context` keys and encodes of
  // `images` images (no-op when they fit). Prefill and DecodeStep call it themselves.
  void Plan(int64_t rows, int64_t context, int64_t images);

 private:
  void SampleFirst(Sequence& seq, const float* x, int64_t rows, Tracer* tracer,
                   std::vector<float>* prompt_logits);
  const VlModel& model_;
  const int32_t vocab_;
  const int64_t hidden_;
  Arena arena_;
  Exec ex_;
  WorkspaceShape planned_;
  std::vector<float> x_;       // [rows, H] activations of one pass
  std::vector<float> logits_;  // [batch, V]
  std::vector<SeqChunk> chunks_;
  std::vector<SeqChunk> prefill_chunks_;  // a merged prefill's
  std::vector<Sequence*> active_;
};

}  // namespace ocular

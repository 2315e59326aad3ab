// Scheduler: continuous batching. Generations submitted from any number of threads share one
// Runner. A scheduler thread loops over steps; each step
//  1. admits every waiting request the batch has room for (running + prefilling <= max_batch),
//  2. runs prefill work within a budget: the next image encode (unless the FeatureCache has
//     the features) or the next decoder layers of the prefilling prompts, the prompt with the
//     least work left first (shortest remaining prefill: short prompts do not queue behind
//     long ones; arrival order among equals) — a
//     chunked prefill, a few layers at a time (Runner::PrefillLayers), so a long image prefill
//     spreads over several steps instead of stalling the running streams;
//  3. steps every running sequence together in one DecodeStep, whose weight traffic is that of
//     one sequence.
// Prefills at the same layer run together, one pass per layer with every prompt's rows in each
// matmul (a merged prefill: the weights are read once for all), when each prompt has rows that
// the kernels compute the same whatever else shares the pass (Runner::MergeInvariant).
// A prompt whose last layer ran samples its first token and joins the batch at the next step.
// With no sequence decoding there is nobody to stall: the prefills then run without a budget.
// Each sequence leaves the batch on its own (EOS, max tokens, cancellation) and its KV cache
// returns to the pool at once.
//
//   Scheduler sched(runner, kv, runner_mu, &cache, /*max_batch=*/8);
//   auto out = sched.Generate(request, on_token);   // from each client thread; blocks
//
// Answers do not depend on what else runs: the Runner's results do not depend on the batch a
// sequence runs in, a prefill in pieces computes exactly what a whole one does, and each
// sequence has its own sampler and cache.
//
// The prefill budget: `prefill_chunk` rows through every layer per step. A layer over r rows
// counts max(r, kPrefillMinRows) rows (below that a layer costs about one read of its weights,
// whatever r), and every step makes progress on at least one layer. An image encode takes a
// step's whole budget. At most max_batch sequences run or prefill; more wait in arrival order.
// A traced request (GenerationRequest::tracer) prefills in one step: its taps are one pass's.
// Thread-safety: Generate and stats may be called from any thread. The scheduler holds
// `runner_mu` while it uses the runner (one step at a time), so other users of the runner
// (tracing, benchmarks) take turns with it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/feature_cache.h"
#include "runtime/generator.h"
#include "runtime/prefix_cache.h"

namespace ocular {

struct ScheduledRequest {
  GenerationRequest gen;
  // One key per image of gen.prompt->images to look its features up in the cache (and its
  // prompt's K/V in the prefix cache), or empty: neither cache is used for its images.
  std::vector<FeatureKey> image_keys;
};

// Prefill rows per step (through every layer) while sequences are decoding, and the rows a
// layer counts at least (Scheduler).
inline constexpr int kDefaultPrefillChunk = 64;
inline constexpr int kPrefillMinRows = 24;

struct SchedulerStats {
  // [b]: decode steps that ran b sequences together (index 0 unused).
  std::vector<uint64_t> decode_steps_by_batch;
  int running = 0;              // sequences in the batch
  int waiting = 0;              // submitted and not yet running (queued or prefilling)
  uint64_t images_encoded = 0;  // images that went through the vision encoder
  uint64_t prefills = 0;        // prompts whose prefill began
  uint64_t prefill_chunks = 0;  // PrefillLayers calls (a whole prefill in one step: 1)
  // Prefill pieces that ran merged with other prompts' in one pass (Runner::PrefillLayers of
  // several tasks), counted per prompt.
  uint64_t merged_prefills = 0;
  uint64_t steps = 0;  // scheduler iterations that ran the model
  // Seconds the scheduler thread spent in the encoder, prefills and decode steps.
  double encode_seconds = 0, prefill_seconds = 0, decode_seconds = 0;
};

class Scheduler {
 public:
  // REQUIRES: runner, kv, runner_mu (and cache and prefix, if not null) outlive the Scheduler;
  // max_batch >= 1; prefill_chunk >= 1. prefix: the prompts' K/V kept for later prompts that
  // begin alike (a chat's next turn prefills only its new rows), or null.
  Scheduler(Runner& runner, KvPool& kv, std::mutex& runner_mu, FeatureCache* cache, int max_batch,
            int prefill_chunk = kDefaultPrefillChunk, PrefixCache* prefix = nullptr);
  ~Scheduler();  // REQUIRES: no Generate in progress
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Runs `req` in the shared batch and blocks until it ends. on_token(id) and the progress
  // callback run on the calling thread, in order, one call per generated token; on_token
  // returning false cancels the sequence (it leaves the batch before the next step, its KV
  // cache freed; the output ends with that token, as in ocular::Generate). Errors as
  // ocular::Generate's.
  StatusOr<GenerationOutput> Generate(const ScheduledRequest& req,
                                      const TokenSink& on_token = nullptr);

  SchedulerStats stats() const;

 private:
  struct Job;
  struct StepTimes;
  void Loop();
  int64_t Features(Job& job);
  bool Start(Job& job, bool* encoded, StepTimes* t);
  bool Cacheable(const Job& job) const;
  void RecordLogits(Job& job, size_t i);
  // What Generate hands back once the job is done: the tokens consumed, timings, logits.
  GenerationOutput Output(Job& job, size_t consumed, bool cancelled) const;
  bool Join(const std::shared_ptr<Job>& job);
  void RunPrefills(StepTimes* t);
  void Gather(const std::shared_ptr<Job>& lead, StepTimes* t);
  void Step();
  void Finish(Job& job, Status status, FinishReason finish);

  Runner& runner_;
  KvPool& kv_;
  std::mutex& runner_mu_;
  FeatureCache* const cache_;
  PrefixCache* const prefix_;
  const int max_batch_;
  const int prefill_chunk_;

  mutable std::mutex mu_;  // guards pending_, stop_ and the counters below
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> pending_;
  bool stop_ = false;
  std::vector<uint64_t> steps_by_batch_;
  uint64_t images_encoded_ = 0, prefills_ = 0, prefill_chunks_ = 0, steps_ = 0;
  uint64_t merged_prefills_ = 0;
  double encode_s_ = 0, prefill_s_ = 0, decode_s_ = 0;
  std::atomic<int> running_{0};
  std::atomic<int> prefilling_n_{0};

  std::deque<std::shared_ptr<Job>> prefilling_;  // scheduler thread only
  std::vector<std::shared_ptr<Job>> active_;     // scheduler thread only
  std::vector<Sequence*> batch_;                 // scheduler thread only
  std::vector<std::shared_ptr<Job>> merge_;      // a merged prefill's jobs (scheduler thread)
  std::vector<Runner::PrefillTask*> merge_tasks_;
  std::thread thread_;
};

}  // namespace ocular

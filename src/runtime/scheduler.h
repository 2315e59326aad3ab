// Scheduler: continuous batching. Generations submitted from any number of threads share one
// Runner: a scheduler thread admits a waiting request between two decode steps (encodes its
// images unless the FeatureCache has them, prefills its prompt, samples its first token), then
// steps every running sequence together in one DecodeStep, whose weight traffic is that of one
// sequence. Each sequence leaves the batch on its own (EOS, max tokens, cancellation) and its
// KV cache returns to the pool at once.
//
//   Scheduler sched(runner, kv, runner_mu, &cache, /*max_batch=*/8);
//   auto out = sched.Generate(request, on_token);   // from each client thread; blocks
//
// Answers do not depend on what else runs: the Runner's results do not depend on the batch a
// sequence runs in, and each sequence has its own sampler and cache.
//
// Scheduling: one prefill per iteration, then one decode step of the running batch, so a long
// image prefill stalls the running streams for at most one prefill (PaliGemma's bidirectional
// prefix cannot be split into chunks: docs/server.md). At most max_batch sequences run; more
// wait in arrival order.
// Thread-safety: Generate and stats may be called from any thread. The scheduler holds
// `runner_mu` while it uses the runner (one iteration at a time), so other users of the
// runner (tracing, benchmarks) take turns with it.
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

namespace ocular {

struct ScheduledRequest {
  // ids, prefix_len, pixel_values, max_new_tokens, sampling, eos_id and progress are used
  // (features and the record_* fields are not: tracing runs on the runner directly).
  GenerationRequest gen;
  // One key per image of gen.pixel_values to look its features up in the cache, or empty.
  std::vector<FeatureKey> image_keys;
};

struct SchedulerStats {
  // [b]: decode steps that ran b sequences together (index 0 unused).
  std::vector<uint64_t> decode_steps_by_batch;
  int running = 0;              // sequences in the batch
  int waiting = 0;              // submitted and not yet prefilled
  uint64_t images_encoded = 0;  // images that went through the vision encoder
  uint64_t prefills = 0;
};

class Scheduler {
 public:
  // REQUIRES: runner, kv, runner_mu (and cache, if not null) outlive the Scheduler;
  // max_batch >= 1.
  Scheduler(Runner& runner, KvPool& kv, std::mutex& runner_mu, FeatureCache* cache, int max_batch);
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
  void Loop();
  void Admit(const std::shared_ptr<Job>& job);
  void Step();
  void Finish(Job& job, Status status, FinishReason finish);

  Runner& runner_;
  KvPool& kv_;
  std::mutex& runner_mu_;
  FeatureCache* const cache_;
  const int max_batch_;

  mutable std::mutex mu_;  // guards pending_, stop_ and the counters below
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> pending_;
  bool stop_ = false;
  std::vector<uint64_t> steps_by_batch_;
  uint64_t images_encoded_ = 0, prefills_ = 0;
  std::atomic<int> running_{0};

  std::vector<std::shared_ptr<Job>> active_;  // scheduler thread only
  std::vector<Sequence*> batch_;              // scheduler thread only
  std::thread thread_;
};

}  // namespace ocular

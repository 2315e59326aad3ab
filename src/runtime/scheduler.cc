#include "runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "core/check.h"

namespace ocular {

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Stage events a job has passed, in order; the caller reports each once (ProgressCallback).
enum StageEvent : uint8_t {
  kEncodeBegin = 1,
  kEncodeEnd = 2,
  kPrefillBegin = 4,
  kPrefillEnd = 8,
};

// A request the scheduler can run: a prompt, and room for it and its new tokens.
Status CheckRequest(const GenerationRequest& g, const ModelSpec& spec) {
  if (g.prompt == nullptr) return Error(StatusCode::kInvalidArgument, "generate", "no prompt");
  const int64_t T = g.prompt->size();
  if (T == 0) return Error(StatusCode::kInvalidArgument, "generate", "empty prompt");
  if (g.max_new_tokens < 0) {
    return Error(StatusCode::kInvalidArgument, "generate", "max_new_tokens must be >= 0");
  }
  if (T + g.max_new_tokens > spec.max_positions) {
    return Error(StatusCode::kResourceExhausted, "generate", "prompt (", T, " tokens) + ",
                 g.max_new_tokens, " new tokens exceed the context length ", spec.max_positions);
  }
  return Status::Ok();
}

}  // namespace

struct Scheduler::Job {
  explicit Job(const ScheduledRequest& r) : req(r) {}
  const ScheduledRequest& req;  // the caller's; alive until the job is done (Generate waits)

  // Scheduler thread only.
  std::optional<Sequence> seq;
  std::vector<float> features;       // the prompt's images' features, for the prefill
  std::vector<float> prompt_logits;  // [T, V] when recorded
  std::vector<float> decode_logits;  // [tokens, V] when recorded
  Runner::PrefillTask task;          // the prefill in progress (seq set once started)
  bool prefix_missed = false;        // looked up in the prefix cache, not found (then encoded)

  // Shared with the calling thread, guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  uint8_t events = 0;            // StageEvent bits
  int64_t images_to_encode = 0;  // images not found in the cache
  std::vector<int32_t> tokens;   // generated so far (reserved: pushing never allocates)
  bool done = false;
  Status status;
  FinishReason finish = FinishReason::kNone;
  Clock::time_point stage_t0[4];  // when each StageEvent happened: encode/prefill begin and end
  Clock::time_point decode_t0;
  double decode_ms = 0;

  std::atomic<bool> cancel{false};

  void Event(StageEvent e, int index) {
    {
      std::lock_guard<std::mutex> lock(mu);
      events |= e;
      stage_t0[index] = Clock::now();
    }
    cv.notify_all();
  }
};

struct Scheduler::StepTimes {
  double encode_s = 0, prefill_s = 0, decode_s = 0;
  uint64_t prefills = 0, chunks = 0, merged = 0;
};

Scheduler::Scheduler(Runner& runner, KvPool& kv, std::mutex& runner_mu, FeatureCache* cache,
                     int max_batch, int prefill_chunk, PrefixCache* prefix)
    : runner_(runner),
      kv_(kv),
      runner_mu_(runner_mu),
      cache_(cache),
      prefix_(prefix),
      max_batch_(max_batch),
      prefill_chunk_(prefill_chunk),
      steps_by_batch_(static_cast<size_t>(max_batch) + 1, 0) {
  OCULAR_CHECK(max_batch >= 1, "max_batch must be >= 1");
  OCULAR_CHECK(prefill_chunk >= 1, "prefill_chunk must be >= 1");
  active_.reserve(static_cast<size_t>(max_batch));
  batch_.reserve(static_cast<size_t>(max_batch));
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerStats s;
  s.decode_steps_by_batch = steps_by_batch_;
  s.running = running_.load();
  s.waiting = static_cast<int>(pending_.size()) + prefilling_n_.load();
  s.images_encoded = images_encoded_;
  s.prefills = prefills_;
  s.prefill_chunks = prefill_chunks_;
  s.merged_prefills = merged_prefills_;
  s.steps = steps_;
  s.encode_seconds = encode_s_;
  s.prefill_seconds = prefill_s_;
  s.decode_seconds = decode_s_;
  return s;
}

void Scheduler::Finish(Job& job, Status status, FinishReason finish) {
  job.task = {};
  job.seq.reset();  // the KV cache goes back to the pool now
  job.features = {};
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.status = std::move(status);
    job.finish = finish;
    if (job.events & kPrefillEnd) job.decode_ms = MsSince(job.decode_t0);
    job.done = true;
  }
  job.cv.notify_all();
}

void Scheduler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] {
      return stop_ || !pending_.empty() || !active_.empty() || !prefilling_.empty();
    });
    if (stop_) break;
    // Requests cancelled while waiting leave the queue without running.
    for (auto it = pending_.begin(); it != pending_.end();) {
      if ((*it)->cancel) {
        Finish(**it, Status::Ok(), FinishReason::kCancelled);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    // Every waiting request the batch has room for starts its prefill now.
    while (!pending_.empty() &&
           static_cast<int>(active_.size() + prefilling_.size()) < max_batch_) {
      prefilling_.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    prefilling_n_ = static_cast<int>(prefilling_.size());
    lock.unlock();
    StepTimes t;
    {
      std::lock_guard<std::mutex> runner_lock(runner_mu_);
      RunPrefills(&t);
      if (!active_.empty()) {
        const Clock::time_point t0 = Clock::now();
        Step();
        t.decode_s = MsSince(t0) / 1000;
      }
    }
    lock.lock();
    prefilling_n_ = static_cast<int>(prefilling_.size());
    ++steps_;
    encode_s_ += t.encode_s;
    prefill_s_ += t.prefill_s;
    decode_s_ += t.decode_s;
    prefills_ += t.prefills;
    prefill_chunks_ += t.chunks;
    merged_prefills_ += t.merged;
  }
  // Shutting down: nothing may be left waiting (the Engine is destroyed with no Generate in
  // progress, so this only guards against misuse).
  for (auto* jobs : {&pending_, &prefilling_}) {
    for (auto& job : *jobs) {
      Finish(*job, Error(StatusCode::kInternal, "scheduler", "the engine is shutting down"),
             FinishReason::kCancelled);
    }
    jobs->clear();
  }
  prefilling_n_ = 0;
  for (auto& job : active_) {
    Finish(*job, Error(StatusCode::kInternal, "scheduler", "the engine is shutting down"),
           FinishReason::kCancelled);
  }
  active_.clear();
}

// Prefill work of one step: image encodes and decoder layers within the budget (none while no
// sequence is decoding), the prompt with the least work left first. REQUIRES: runner_mu_ held.
void Scheduler::RunPrefills(StepTimes* t) {
  const int layers = runner_.num_layers();
  const bool unbounded = active_.empty();
  const int64_t budget = static_cast<int64_t>(prefill_chunk_) * layers;
  int64_t spent = 0;
  // The least prefill work left first (a short text prompt is not queued behind images being
  // prefilled: the mean time to first token is least), arrival order among equals. Nothing
  // starves: at most max_batch requests prefill, and a short one joins the batch at once.
  auto work_left = [&](const std::shared_ptr<Job>& j) {
    const int64_t rows = j->req.gen.prompt->size();
    return (layers - j->task.next_layer) * std::max<int64_t>(rows, kPrefillMinRows);
  };
  std::stable_sort(prefilling_.begin(), prefilling_.end(),
                   [&](const auto& a, const auto& b) { return work_left(a) < work_left(b); });
  while (!prefilling_.empty() && (unbounded || spent < budget)) {
    std::shared_ptr<Job> job = prefilling_.front();
    if (job->cancel) {
      prefilling_.pop_front();
      Finish(*job, Status::Ok(), FinishReason::kCancelled);
      continue;
    }
    if (job->task.seq == nullptr) {
      bool encoded = false;
      // An encode takes a step's whole budget: it runs first in a step, or not in this one.
      // (A job with images is looked up in the cache only then, too.)
      if (!unbounded && spent > 0 && !job->req.gen.prompt->images.empty() &&
          job->features.empty()) {
        break;
      }
      if (!Start(*job, &encoded, t)) {
        prefilling_.pop_front();
        continue;
      }
      if (encoded) {  // the prefill begins at the next pass (this step when unbounded)
        spent = budget;
        continue;
      }
    }
    Gather(job, t);  // the prefills that run with this one, in merge_
    int64_t rows = 0;
    for (const auto& m : merge_) rows += m->task.rows;
    const int64_t per_layer = std::max<int64_t>(rows, kPrefillMinRows);
    int run = layers - job->task.next_layer;
    if (!unbounded && job->req.gen.tracer == nullptr) {
      run = std::min<int64_t>(run, (budget - spent) / per_layer);
      if (run == 0 && spent == 0) run = 1;  // every step makes progress
      if (run == 0) break;
    }
    const Clock::time_point t0 = Clock::now();
    int left = 0;
    if (merge_.size() == 1) {
      left = runner_.PrefillLayers(job->task, run, job->req.gen.tracer);
    } else {
      merge_tasks_.clear();
      for (const auto& m : merge_) merge_tasks_.push_back(&m->task);
      left = runner_.PrefillLayers(merge_tasks_, run);
      t->merged += merge_.size();
    }
    t->prefill_s += MsSince(t0) / 1000;
    ++t->chunks;
    spent += run * per_layer;
    if (left > 0) break;
    const Clock::time_point t1 = Clock::now();
    for (const auto& m : merge_) {
      prefilling_.erase(std::find(prefilling_.begin(), prefilling_.end(), m));
      Join(m);
    }
    t->prefill_s += MsSince(t1) / 1000;
  }
}

// Fills merge_ with `lead` and the prefills that can run in one pass with it: untraced, at its
// layer, each of rows the merge cannot change (Runner::MergeInvariant); a waiting prompt joins
// when it needs no encode (started here: its prefix-cache lookup, cache and embedding).
// REQUIRES: lead started; runner_mu_ held.
void Scheduler::Gather(const std::shared_ptr<Job>& lead, StepTimes* t) {
  merge_.assign(1, lead);
  auto mergeable = [&](const Job& j) {
    return j.req.gen.tracer == nullptr && !j.cancel &&
           Runner::MergeInvariant(j.task.seq != nullptr ? j.task.rows : j.req.gen.prompt->size());
  };
  if (!mergeable(*lead)) return;
  for (size_t i = 0; i < prefilling_.size();) {
    const std::shared_ptr<Job> job = prefilling_[i];
    Job& j = *job;
    const bool needs_encode = !j.req.gen.prompt->images.empty() && j.features.empty();
    if (job == lead || !mergeable(j) || (j.task.seq == nullptr && needs_encode)) {
      ++i;
      continue;
    }
    bool encoded = false;
    if (j.task.seq == nullptr && !Start(j, &encoded, t)) {  // failed: finished
      prefilling_.erase(prefilling_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (!encoded && j.task.next_layer == lead->task.next_layer && mergeable(j)) {
      merge_.push_back(job);
    }
    ++i;
  }
}

// Fills job.features from the request's, the cache or the encoder (runs of misses in one call
// each). Returns the images encoded. REQUIRES: runner_mu_ held.
int64_t Scheduler::Features(Job& job) {
  const GenerationRequest& g = job.req.gen;
  const Prompt& prompt = *g.prompt;
  const size_t n = prompt.images.size();
  const int64_t width = runner_.model().spec().feature_floats();
  if (g.features != nullptr) {
    job.features.assign(g.features->data.begin(), g.features->data.end());
    return 0;
  }
  std::vector<int64_t> offset(n + 1, 0);  // floats before image i
  for (size_t i = 0; i < n; ++i) offset[i + 1] = offset[i] + prompt.images[i].feature_rows * width;
  job.features.assign(static_cast<size_t>(offset[n]), 0.0f);
  const bool cached = cache_ != nullptr && job.req.image_keys.size() == n;
  std::vector<bool> hit(n, false);
  int64_t misses = 0;
  for (size_t i = 0; i < n; ++i) {
    FeatureCache::Features f = cached ? cache_->Get(job.req.image_keys[i]) : nullptr;
    if (f != nullptr && static_cast<int64_t>(f->size()) == offset[i + 1] - offset[i]) {
      std::copy(f->begin(), f->end(), job.features.begin() + offset[i]);
      hit[i] = true;
    } else {
      ++misses;
    }
  }
  if (misses == 0) return 0;
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.images_to_encode = misses;
  }
  job.Event(kEncodeBegin, 0);
  for (size_t i = 0; i < n;) {
    if (hit[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && !hit[j]) ++j;
    runner_.EncodeImages(prompt, i, j, job.features.data() + offset[i], g.tracer);
    for (size_t k = i; cached && k < j; ++k) {
      cache_->Put(job.req.image_keys[k],
                  std::make_shared<const std::vector<float>>(job.features.begin() + offset[k],
                                                             job.features.begin() + offset[k + 1]));
    }
    i = j;
  }
  job.Event(kEncodeEnd, 1);
  return misses;
}

// Starts a job's prefill: takes its images' features (then returns with *encoded set when the
// encoder ran, the prefill to begin at the next call), acquires its KV cache and embeds its
// prompt. Returns false when the job failed (finished). REQUIRES: runner_mu_ held.
bool Scheduler::Start(Job& job, bool* encoded, StepTimes* t) {
  const GenerationRequest& g = job.req.gen;
  const Prompt& prompt = *g.prompt;
  const bool images = !prompt.images.empty();
  // Cached K/V of the prompt's first rows hold every image token: no features are needed.
  const PrefixCache::Match reuse = Cacheable(job) && !job.prefix_missed
                                       ? prefix_->Find(prompt, job.req.image_keys)
                                       : PrefixCache::Match{};
  job.prefix_missed = reuse.tokens == 0;
  if (images && job.features.empty() && reuse.tokens == 0) {
    const Clock::time_point t0 = Clock::now();
    const int64_t misses = Features(job);
    if (misses > 0) {
      t->encode_s += MsSince(t0) / 1000;
      *encoded = true;
      std::lock_guard<std::mutex> lock(mu_);
      images_encoded_ += static_cast<uint64_t>(misses);
      return true;
    }
  }

  const Clock::time_point t0 = Clock::now();
  SequenceParams p = static_cast<const SequenceParams&>(g);
  // With room for the images' cross-attention K/V where the layout has them (mllama).
  const int64_t image_rows = kv_.layout().HasCross() ? prompt.feature_rows() : 0;
  StatusOr<KvHandle> cache = kv_.Acquire(prompt.size() + g.max_new_tokens, image_rows);
  if (!cache.ok()) {
    Finish(job, cache.status(), FinishReason::kNone);
    return false;
  }
  if (reuse.tokens > 0) {
    std::unique_ptr<SequenceState> state = prefix_->Apply(reuse, cache->cache());
    job.seq.emplace(std::move(p), std::move(*cache), runner_.vocab(), std::move(state));
    job.seq->Advance(reuse.tokens);
  } else {
    job.seq.emplace(std::move(p), std::move(*cache), runner_.vocab(), runner_.model().NewState());
  }
  job.Event(kPrefillBegin, 2);
  ++t->prefills;
  Status s =
      runner_.BeginPrefill(*job.seq, images ? job.features.data() : nullptr, &job.task, g.tracer);
  t->prefill_s += MsSince(t0) / 1000;
  if (!s.ok()) {
    Finish(job, std::move(s), FinishReason::kNone);
    return false;
  }
  return true;
}

// Whether a job's prompt may start from (and go to) the prefix cache: not traced (its taps
// are a whole prefill's), its images keyed.
bool Scheduler::Cacheable(const Job& job) const {
  const GenerationRequest& g = job.req.gen;
  return prefix_ != nullptr && g.tracer == nullptr && !g.record_prompt_logits &&
         g.features == nullptr && job.req.image_keys.size() == g.prompt->images.size();
}

// Ends a job's prefill (every layer ran): samples its first token and adds it to the batch,
// or finishes it. Returns whether it joined. REQUIRES: runner_mu_ held.
bool Scheduler::Join(const std::shared_ptr<Job>& job) {
  const GenerationRequest& g = job->req.gen;
  runner_.FinishPrefill(job->task, g.tracer,
                        g.record_prompt_logits ? &job->prompt_logits : nullptr);
  // The cache holds the prompt's K/V (no decode step ran yet): kept for a later prompt.
  if (Cacheable(*job)) {
    prefix_->Put(*g.prompt, job->req.image_keys, *job->seq->cache(), job->seq->state());
  }
  job->features = {};  // the prefill has copied them into the cache's K/V
  if (g.record_decode_logits && !job->seq->generated().empty()) RecordLogits(*job, 0);
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->events |= kPrefillEnd;
    job->stage_t0[3] = job->decode_t0 = Clock::now();
    if (!job->seq->generated().empty()) job->tokens.push_back(job->seq->last_token());
  }
  job->cv.notify_all();
  Sequence& seq = *job->seq;
  if (seq.generated().empty() || seq.done()) {
    if (seq.finish_reason() == FinishReason::kFailed) {
      Finish(*job,
             !seq.failure().ok()
                 ? seq.failure()
                 : Error(StatusCode::kInternal, "generate",
                         "the model produced NaN logits in the prefill (NaN or infinite "
                         "weights, or an invalid eps / rope_theta in config.json?)"),
             FinishReason::kFailed);
    } else {
      Finish(*job, Status::Ok(), seq.finish_reason());
    }
    return false;
  }
  active_.push_back(job);
  running_ = static_cast<int>(active_.size());
  return true;
}

// One decode step of every running sequence. REQUIRES: runner_mu_ held.
void Scheduler::Step() {
  // Takes the i-th job out of the batch (the counters first: when its caller wakes, they no
  // longer count it) and finishes it.
  auto leave = [&](size_t i, Status status, FinishReason finish) {
    std::shared_ptr<Job> job = std::move(active_[i]);
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    running_ = static_cast<int>(active_.size());
    Finish(*job, std::move(status), finish);
  };
  // A cancelled sequence leaves before the step: its cache is freed now.
  for (size_t i = 0; i < active_.size();) {
    if (active_[i]->cancel) {
      active_[i]->seq->Cancel();
      leave(i, Status::Ok(), FinishReason::kCancelled);
    } else {
      ++i;
    }
  }
  if (active_.empty()) return;
  batch_.clear();
  for (auto& job : active_) batch_.push_back(&*job->seq);
  runner_.DecodeStep(batch_);
  for (size_t i = 0; i < active_.size(); ++i) {
    Job& job = *active_[i];
    // (A sequence whose constraint allowed nothing more got no token: no row.)
    const size_t rows = job.decode_logits.size() / static_cast<size_t>(runner_.vocab());
    if (job.req.gen.record_decode_logits && job.seq->generated().size() > rows) {
      RecordLogits(job, i);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++steps_by_batch_[batch_.size()];
  }
  for (size_t i = 0; i < active_.size();) {
    Job& job = *active_[i];
    Sequence& seq = *job.seq;
    if (seq.finish_reason() == FinishReason::kFailed) {
      leave(i,
            !seq.failure().ok()
                ? seq.failure()
                : Error(StatusCode::kInternal, "generate", "the model produced NaN logits after ",
                        seq.generated().size(),
                        " generated tokens (NaN or infinite weights, or an "
                        "invalid eps / rope_theta in config.json?)"),
            FinishReason::kFailed);
      continue;
    }
    {
      // A sequence whose constraint allows nothing more ends without a token.
      std::lock_guard<std::mutex> lock(job.mu);
      if (job.tokens.size() < seq.generated().size()) job.tokens.push_back(seq.last_token());
    }
    job.cv.notify_all();
    if (seq.done()) {
      leave(i, Status::Ok(), seq.finish_reason());
    } else {
      ++i;
    }
  }
}

StatusOr<GenerationOutput> Scheduler::Generate(const ScheduledRequest& req,
                                               const TokenSink& on_token) {
  const GenerationRequest& g = req.gen;
  OCULAR_RETURN_IF_ERROR(CheckRequest(g, runner_.model().spec()));
  const int64_t T = g.prompt->size();
  auto job = std::make_shared<Job>(req);
  job->tokens.reserve(static_cast<size_t>(g.max_new_tokens) + 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(job);
  }
  cv_.notify_all();

  // Reports stages and tokens as they come, on this thread.
  const ProgressCallback* progress = g.progress != nullptr && *g.progress ? g.progress : nullptr;
  auto report = [&](Stage stage, int64_t done, int64_t total, Clock::time_point begin) {
    if (progress) (*progress)({stage, done, total, MsSince(begin)});
  };
  uint8_t reported = 0;
  size_t consumed = 0;
  bool cancelled = false;
  std::unique_lock<std::mutex> lock(job->mu);
  while (true) {
    job->cv.wait(lock, [&] {
      return job->done || job->events != reported || (!cancelled && job->tokens.size() > consumed);
    });
    const uint8_t events = job->events;
    const size_t available = job->tokens.size();
    const bool done = job->done;
    const int64_t encode_n = job->images_to_encode;
    Clock::time_point t[4];
    std::copy(job->stage_t0, job->stage_t0 + 4, t);
    lock.unlock();
    if ((events & kEncodeBegin) && !(reported & kEncodeBegin)) {
      report(Stage::kEncode, 0, encode_n, t[0]);
    }
    if ((events & kEncodeEnd) && !(reported & kEncodeEnd)) {
      report(Stage::kEncode, encode_n, encode_n, t[0]);
    }
    if ((events & kPrefillBegin) && !(reported & kPrefillBegin)) {
      report(Stage::kPrefill, 0, T, t[2]);
    }
    if ((events & kPrefillEnd) && !(reported & kPrefillEnd)) {
      report(Stage::kPrefill, T, T, t[2]);
      report(Stage::kDecode, 0, g.max_new_tokens, t[3]);
    }
    reported = events;
    while (!cancelled && consumed < available) {
      // The vector only grows within its reservation: elements before `available` are stable.
      const int32_t id = job->tokens[consumed++];
      report(Stage::kDecode, static_cast<int64_t>(consumed), g.max_new_tokens, t[3]);
      if (on_token && !on_token(id)) {
        cancelled = true;
        job->cancel = true;
        cv_.notify_all();
      }
    }
    lock.lock();
    if (done && job->events == reported && (cancelled || job->tokens.size() == consumed)) break;
  }
  // Done: the scheduler no longer touches the job.
  if (!job->status.ok()) return job->status;
  return Output(*job, consumed, cancelled);
}

GenerationOutput Scheduler::Output(Job& job, size_t consumed, bool cancelled) const {
  const GenerationRequest& g = job.req.gen;
  const int64_t T = g.prompt->size();
  GenerationOutput out;
  out.generated.assign(job.tokens.begin(),
                       job.tokens.begin() + static_cast<std::ptrdiff_t>(consumed));
  out.finish = cancelled ? FinishReason::kCancelled : job.finish;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  if (job.events & kEncodeEnd) out.image_ms = ms(job.stage_t0[0], job.stage_t0[1]);
  if (job.events & kPrefillEnd) out.prefill_ms = ms(job.stage_t0[2], job.stage_t0[3]);
  out.decode_ms = job.decode_ms;
  const int64_t V = runner_.vocab();
  if (g.record_prompt_logits) {
    out.prompt_logits = Tensor({T, V});
    out.prompt_logits.data = std::move(job.prompt_logits);
  }
  if (g.record_decode_logits) {  // the rows of the tokens handed out
    const int64_t rows =
        std::min<int64_t>(static_cast<int64_t>(consumed), job.decode_logits.size() / V);
    out.decode_logits = Tensor({rows, V});
    job.decode_logits.resize(static_cast<size_t>(rows * V));
    out.decode_logits.data = std::move(job.decode_logits);
  }
  return out;
}

// Appends the logits row that chose the job's latest token (row i of the runner's last step).
void Scheduler::RecordLogits(Job& job, size_t i) {
  const float* row = runner_.last_logits(static_cast<int64_t>(i));
  job.decode_logits.insert(job.decode_logits.end(), row, row + runner_.vocab());
}

}  // namespace ocular

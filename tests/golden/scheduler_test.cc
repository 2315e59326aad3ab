// Continuous batching (runtime/scheduler.h): requests from many threads decoded together give
// exactly the tokens each gets alone (ocular::Generate), whatever joins or leaves the batch;
// a cancelled sequence leaves at once and its KV cache returns to the pool; the feature cache
// lets a repeated image skip the vision encoder with the same answer.
#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "support/fixture.h"
#include "support/harness.h"
#include "support/prompts.h"

namespace ocular {
namespace {

using testing_support::Harness;

struct Input {
  std::vector<int32_t> ids;
  Tensor pixels;  // [n, 3, R, R] or empty
};

// The prompts and pixels of the checkpoint's golden cases (images of several kinds, three
// tasks), plus the text-only tail of the first one.
std::vector<Input> Inputs(const std::string& checkpoint, std::string* model_dir) {
  auto manifest = fixture::GoldenManifest::Load();
  EXPECT_TRUE(manifest.ok());
  const fixture::GoldenCheckpoint* ck = manifest->Find(checkpoint);
  EXPECT_NE(ck, nullptr);
  *model_dir = ck->model_dir;
  std::vector<Input> out;
  for (const fixture::GoldenCase& c : ck->cases) {
    auto taps = fixture::GoldenTaps::Open(c.path);
    EXPECT_TRUE(taps.ok());
    Input in;
    in.ids = *taps->Ids("input_ids");
    if (const TensorView* pv = taps->file().Find("pixel_values")) {
      in.pixels = Tensor(pv->shape);
      std::copy_n(pv->as<float>(), pv->numel(), in.pixels.data.data());
    }
    out.push_back(std::move(in));
  }
  return out;
}

// Request i: its own length, stop rule and sampling (greedy or seeded).
GenerationRequest MakeRequest(const Input& in, int i, const ModelSpec& spec) {
  GenerationRequest g;
  if (!in.pixels.data.empty() && i % 4 != 3) {
    g.prompt = testing_support::FixturePrompt(spec, in.ids, &in.pixels);
  } else {  // text only: the image tokens dropped
    std::vector<int32_t> ids = in.ids;
    ids.erase(std::remove(ids.begin(), ids.end(), spec.image_token_id), ids.end());
    g.prompt = testing_support::FixturePrompt(spec, std::move(ids), static_cast<Tensor*>(nullptr));
  }
  g.max_new_tokens = 4 + (i * 5) % 13;
  if (i % 2 == 0) g.eos_ids = {1};
  if (i % 3 == 1) g.sampling = {0.8f, 40, 0.9f, static_cast<uint64_t>(100 + i), -1};
  return g;
}

// Blocks the scheduler (it takes the runner mutex per iteration) until `n` requests wait, so
// that they join the batch one per step, deterministically.
void WaitUntilQueued(const Scheduler& s, int n) {
  for (int ms = 0; s.stats().waiting < n; ++ms) {
    ASSERT_LT(ms, 60000) << "requests never reached the queue";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A sequence of `prompt` on the harness's runner and KV pool (room for its images' cross K/V).
std::unique_ptr<Sequence> NewSequence(Harness& h, std::shared_ptr<const Prompt> prompt,
                                      int max_new_tokens) {
  const int64_t image_rows = h.kv.layout().HasCross() ? prompt->feature_rows() : 0;
  auto kv = h.kv.Acquire(prompt->size() + max_new_tokens, image_rows);
  OCULAR_CHECK(kv.ok());
  SequenceParams p;
  p.prompt = std::move(prompt);
  p.max_new_tokens = max_new_tokens;
  return std::make_unique<Sequence>(std::move(p), std::move(*kv), h.runner.vocab(),
                                    h.runner.model().NewState());
}

// Decode steps of `seq` alone until it is done.
void DecodeAlone(Runner& runner, Sequence& seq) {
  Sequence* batch[] = {&seq};
  while (!seq.done()) runner.DecodeStep(batch);
}

class SchedulerTest : public testing::TestWithParam<const char*> {};

// Nine requests from nine threads, held until all wait, then run through a scheduler with
// batches of 4 and the given prefill budget: each gets the tokens it gets alone.
// expect_full_batch: some decode step ran kMaxBatch sequences. Not asked of a budget of one
// row: whether a prefill split over many steps ends before the first sequences finish depends
// on how the admissions interleave with the threads' arrival.
void ExpectBatchedAnswersEqualSingleAnswers(const char* checkpoint, int prefill_chunk,
                                            bool expect_full_batch, SchedulerStats* stats) {
  std::string dir;
  const std::vector<Input> inputs = Inputs(checkpoint, &dir);
  ASSERT_GE(inputs.size(), 6u);
  auto alone = Harness::Load(dir);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  const ModelSpec& spec = (*alone)->model->spec();
  const int n = static_cast<int>(inputs.size());
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) reqs.push_back(MakeRequest(inputs[i], i, spec));
  std::vector<GenerationOutput> want;
  for (int i = 0; i < n; ++i) {
    auto out = (*alone)->Generate(reqs[i]);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    want.push_back(std::move(*out));
  }

  auto h = Harness::Load(dir, nullptr, 2, 4);
  ASSERT_TRUE(h.ok());
  std::mutex runner_mu;
  constexpr int kMaxBatch = 4;
  Scheduler sched((*h)->runner, (*h)->kv, runner_mu, nullptr, kMaxBatch, prefill_chunk);
  std::vector<StatusOr<GenerationOutput>> got(n, Status(StatusCode::kInternal, "not run"));
  std::vector<std::thread> clients;
  {
    std::unique_lock<std::mutex> hold(runner_mu);
    for (int i = 0; i < n; ++i) {
      clients.emplace_back([&, i] {
        ScheduledRequest r;
        r.gen = reqs[i];
        got[i] = sched.Generate(r);
      });
    }
    WaitUntilQueued(sched, n - 1);  // the scheduler holds the first, blocked on the mutex
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
    EXPECT_EQ(got[i]->generated, want[i].generated);
    EXPECT_EQ(got[i]->finish, want[i].finish);
  }
  const SchedulerStats s = sched.stats();
  EXPECT_EQ(s.prefills, static_cast<uint64_t>(n));
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  ASSERT_EQ(s.decode_steps_by_batch.size(), static_cast<size_t>(kMaxBatch + 1));
  if (expect_full_batch) {
    EXPECT_GT(s.decode_steps_by_batch[kMaxBatch], 0u) << "the batch never filled";
  }
  EXPECT_EQ((*h)->kv.bytes_in_use(), 0u) << "KV caches not returned";
  *stats = s;
}

TEST_P(SchedulerTest, BatchedAnswersEqualSingleAnswers) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  SchedulerStats s;
  ExpectBatchedAnswersEqualSingleAnswers(GetParam(), kDefaultPrefillChunk, true, &s);
}

// A budget of one row per step: every prefill that meets a decoding batch runs one layer per
// step, interleaved with the decode steps, and the answers stay the same.
TEST_P(SchedulerTest, ChunkedPrefillsGiveTheSameAnswers) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  SchedulerStats s;
  ExpectBatchedAnswersEqualSingleAnswers(GetParam(), 1, false, &s);
  EXPECT_GT(s.prefill_chunks, s.prefills) << "no prefill was split";
}

// Runner level: a prefill run one layer at a time, with another sequence's decode steps on
// the same runner in between, gives bit-identical logits and the same tokens as a whole one.
TEST_P(SchedulerTest, PrefillInPiecesEqualsWholePrefill) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  std::string dir;
  const std::vector<Input> inputs = Inputs(GetParam(), &dir);
  auto h = Harness::Load(dir, nullptr, 2, 2);
  ASSERT_TRUE(h.ok());
  Runner& runner = (*h)->runner;
  const ModelSpec& spec = (*h)->model->spec();
  const Input& in = inputs[0];
  ASSERT_FALSE(in.pixels.data.empty());
  const std::shared_ptr<Prompt> image_prompt =
      testing_support::FixturePrompt(spec, in.ids, &in.pixels);
  const int64_t rows = image_prompt->feature_rows();
  std::vector<float> features(static_cast<size_t>(rows * spec.hidden_size));
  runner.EncodeImages(*image_prompt, 0, image_prompt->images.size(), features.data(), nullptr);
  auto sequence = [&](const std::vector<int32_t>& ids) {
    return NewSequence(
        **h,
        ids == in.ids ? image_prompt
                      : testing_support::FixturePrompt(spec, ids, static_cast<Tensor*>(nullptr)),
        8);
  };
  auto decode = [&](Sequence& seq) { DecodeAlone(runner, seq); };

  auto whole = sequence(in.ids);
  ASSERT_TRUE(runner.Prefill(*whole, features.data(), nullptr).ok());
  const std::vector<float> want(runner.last_logits(0), runner.last_logits(0) + runner.vocab());
  decode(*whole);

  // Another sequence decodes between the pieces.
  std::vector<int32_t> text = inputs[1].ids;
  text.erase(std::remove(text.begin(), text.end(), spec.image_token_id), text.end());
  auto other = sequence(text);
  ASSERT_TRUE(runner.Prefill(*other, nullptr, nullptr).ok());
  auto pieces = sequence(in.ids);
  Runner::PrefillTask task;
  ASSERT_TRUE(runner.BeginPrefill(*pieces, features.data(), &task).ok());
  int left = runner.num_layers(), steps = 0;
  while (left > 0) {
    left = runner.PrefillLayers(task, 1);
    Sequence* batch[] = {other.get()};
    runner.DecodeStep(batch);
    ++steps;
  }
  EXPECT_EQ(steps, runner.num_layers());
  EXPECT_GE(other->generated().size(), 2u);
  runner.FinishPrefill(task);
  for (int32_t v = 0; v < runner.vocab(); ++v) {
    ASSERT_EQ(runner.last_logits(0)[v], want[v]) << "logit " << v;
  }
  decode(*pieces);
  EXPECT_EQ(pieces->generated(), whole->generated());
}

// Runner level: prefills of different prompts merged into one pass per layer (their rows in
// each matmul; Runner::PrefillLayers of several tasks) give each prompt bit-identical logits and
// the same tokens as its prefill alone — for every group of them (2 to all, an image prompt
// among them), in pieces of a few layers too.
TEST_P(SchedulerTest, MergedPrefillsEqualSinglePrefills) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  std::string dir;
  const std::vector<Input> inputs = Inputs(GetParam(), &dir);
  auto h = Harness::Load(dir, nullptr, 2, 4);
  ASSERT_TRUE(h.ok());
  Runner& runner = (*h)->runner;
  const ModelSpec& spec = (*h)->model->spec();
  // Prompts: the first case with its image, then text-only ones of several lengths (> 8 rows).
  std::vector<std::shared_ptr<const Prompt>> prompts;
  prompts.push_back(testing_support::FixturePrompt(spec, inputs[0].ids, &inputs[0].pixels));
  for (size_t i = 1; i < inputs.size() && prompts.size() < 5; ++i) {
    std::vector<int32_t> ids = inputs[i].ids;
    ids.erase(std::remove(ids.begin(), ids.end(), spec.image_token_id), ids.end());
    while (!Runner::MergeInvariant(static_cast<int64_t>(ids.size()))) ids.push_back(ids.back());
    ids.resize(ids.size() + i * 3, ids.back());  // lengths differ
    prompts.push_back(testing_support::FixturePrompt(spec, ids, static_cast<Tensor*>(nullptr)));
  }
  ASSERT_GE(prompts.size(), 3u);
  const int64_t frows = prompts[0]->feature_rows();
  std::vector<float> features(static_cast<size_t>(frows * spec.feature_floats()));
  runner.EncodeImages(*prompts[0], 0, prompts[0]->images.size(), features.data(), nullptr);
  auto sequence = [&](size_t i) { return NewSequence(**h, prompts[i], 4); };
  auto decode = [&](Sequence& seq) { DecodeAlone(runner, seq); };
  const float* no_features = nullptr;
  std::vector<std::vector<float>> want;
  std::vector<std::vector<int32_t>> want_tokens;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto seq = sequence(i);
    ASSERT_TRUE(runner.Prefill(*seq, i == 0 ? features.data() : no_features, nullptr).ok());
    want.emplace_back(runner.last_logits(0), runner.last_logits(0) + runner.vocab());
    decode(*seq);
    want_tokens.push_back(seq->generated());
  }
  for (size_t first = 0; first + 1 < prompts.size(); ++first) {
    for (int layers : {runner.num_layers(), 2}) {
      SCOPED_TRACE(testing::Message() << "prompts " << first << ".., " << layers << " layers");
      std::vector<std::unique_ptr<Sequence>> seqs;
      std::vector<Runner::PrefillTask> tasks(prompts.size() - first);
      std::vector<Runner::PrefillTask*> ptrs;
      for (size_t i = first; i < prompts.size(); ++i) {
        seqs.push_back(sequence(i));
        Runner::PrefillTask& t = tasks[i - first];
        ASSERT_TRUE(
            runner.BeginPrefill(*seqs.back(), i == 0 ? features.data() : no_features, &t).ok());
        ptrs.push_back(&t);
      }
      while (runner.PrefillLayers(ptrs, layers) > 0) {
      }
      for (size_t k = 0; k < seqs.size(); ++k) {
        runner.FinishPrefill(tasks[k]);
        for (int32_t v = 0; v < runner.vocab(); ++v) {
          ASSERT_EQ(runner.last_logits(0)[v], want[first + k][v]) << "prompt " << first + k;
        }
        decode(*seqs[k]);
        EXPECT_EQ(seqs[k]->generated(), want_tokens[first + k]);
      }
    }
  }
}

// Runner level, the prefix cache's path: a causal prompt prefilled over the K/V of its first
// rows (stored by another prompt's prefill, copied as the cache copies them) gives the
// bit-identical last-row logits and the same tokens as its whole prefill. The rows after the
// reused ones: 9+ on pg1 (the GEMM path alone and whole), 1-8 on pg2 (whose 8-token window
// bounds a cached prompt; the decode kernels' order is the same for 1-8 rows under bf16).
TEST(PrefixCacheRunner, PrefillOverCachedRowsEqualsWholePrefill) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  for (const char* ck : {"pg1", "pg2", "pg2-bf16"}) {
    SCOPED_TRACE(ck);
    std::string dir;
    const std::vector<Input> inputs = Inputs(ck, &dir);
    auto h = Harness::Load(dir);
    ASSERT_TRUE(h.ok());
    Runner& runner = (*h)->runner;
    const ModelSpec& spec = (*h)->model->spec();
    const bool windowed = std::string(ck) != "pg1";
    const size_t T = windowed ? 8 : 40, L = windowed ? 5 : 20;
    std::vector<int32_t> ids = inputs[1].ids;
    ids.erase(std::remove(ids.begin(), ids.end(), spec.image_token_id), ids.end());
    while (ids.size() < T) ids.push_back(ids[ids.size() % 7]);
    ids.resize(T);
    const auto causal = [&](std::vector<int32_t> v) {
      return testing_support::FixturePrompt(spec, std::move(v), static_cast<Tensor*>(nullptr), 0);
    };
    auto whole = NewSequence(**h, causal(ids), 6);
    ASSERT_TRUE(runner.Prefill(*whole, nullptr, nullptr).ok());
    const std::vector<float> want(runner.last_logits(0), runner.last_logits(0) + runner.vocab());
    DecodeAlone(runner, *whole);

    auto first = NewSequence(**h, causal({ids.begin(), ids.begin() + L}), 0);
    ASSERT_TRUE(runner.Prefill(*first, nullptr, nullptr).ok());
    auto rest = NewSequence(**h, causal(ids), 6);
    rest->cache()->CopyFrom(*first->cache(), static_cast<int64_t>(L));
    rest->Advance(static_cast<int64_t>(L));
    Runner::PrefillTask task;
    ASSERT_TRUE(runner.BeginPrefill(*rest, nullptr, &task).ok());
    EXPECT_EQ(task.rows, static_cast<int64_t>(T - L));
    while (runner.PrefillLayers(task, runner.num_layers()) > 0) {
    }
    runner.FinishPrefill(task);
    for (int32_t v = 0; v < runner.vocab(); ++v) {
      ASSERT_EQ(runner.last_logits(0)[v], want[v]) << "logit " << v;
    }
    DecodeAlone(runner, *rest);
    EXPECT_EQ(rest->generated(), whole->generated());
  }
}

// While a new request's image is encoded and its prompt prefilled (one layer per step), the
// running sequence keeps decoding: it gets a step for every piece, where a whole prefill
// between two steps would let it run at most the one step already under way.
TEST_P(SchedulerTest, RunningSequenceKeepsDecodingDuringAPrefill) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  std::string dir;
  const std::vector<Input> inputs = Inputs(GetParam(), &dir);
  auto h = Harness::Load(dir, nullptr, 2, 2);
  ASSERT_TRUE(h.ok());
  const ModelSpec& spec = (*h)->model->spec();
  GenerationRequest a = MakeRequest(inputs[0], 3, spec);  // text only
  GenerationRequest b = MakeRequest(inputs[0], 0, spec);  // with its image
  ASSERT_TRUE(a.prompt->images.empty());
  ASSERT_FALSE(b.prompt->images.empty());
  // a runs until b is done (it cancels itself then): a fixed length could end before b is
  // even submitted when this thread is slow to be scheduled (seen under load).
  a.max_new_tokens = 4096;
  a.eos_ids.clear();
  b.max_new_tokens = 2;
  std::atomic<bool> b_done{false};
  auto want_b = (*h)->Generate(b);
  ASSERT_TRUE(want_b.ok());
  std::mutex runner_mu;
  Scheduler sched((*h)->runner, (*h)->kv, runner_mu, nullptr, 2, /*prefill_chunk=*/1);
  std::promise<void> a_runs;
  std::thread ta([&] {
    ScheduledRequest r;
    r.gen = a;
    int n = 0;
    auto got = sched.Generate(r, [&](int32_t) {
      if (++n == 1) a_runs.set_value();
      return !b_done.load();
    });
    EXPECT_TRUE(got.ok());
  });
  a_runs.get_future().wait();
  const uint64_t before = sched.stats().decode_steps_by_batch[1];
  uint64_t alone_steps = 0;
  ScheduledRequest r;
  r.gen = b;
  bool first = true;
  auto got_b = sched.Generate(r, [&](int32_t) {
    // From b's first token on, every step runs both sequences.
    if (first) alone_steps = sched.stats().decode_steps_by_batch[1] - before;
    first = false;
    return true;
  });
  b_done.store(true);
  ta.join();
  ASSERT_TRUE(got_b.ok()) << got_b.status().ToString();
  EXPECT_EQ(got_b->generated, want_b->generated);
  // The encode and the layers but the last each share a step with a's decode.
  EXPECT_GE(alone_steps, static_cast<uint64_t>((*h)->runner.num_layers()));
}

TEST_P(SchedulerTest, CancelLeavesAtOnceOthersUnchanged) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  std::string dir;
  const std::vector<Input> inputs = Inputs(GetParam(), &dir);
  auto h = Harness::Load(dir, nullptr, 2, 2);
  ASSERT_TRUE(h.ok());
  const ModelSpec& spec = (*h)->model->spec();
  GenerationRequest a = MakeRequest(inputs[0], 0, spec), b = MakeRequest(inputs[1], 2, spec);
  a.max_new_tokens = b.max_new_tokens = 16;
  a.eos_ids.clear();
  b.eos_ids.clear();
  auto want_b = (*h)->Generate(b);
  ASSERT_TRUE(want_b.ok());
  std::mutex runner_mu;
  Scheduler sched((*h)->runner, (*h)->kv, runner_mu, nullptr, 2);
  StatusOr<GenerationOutput> got_a = Status(StatusCode::kInternal, "not run");
  StatusOr<GenerationOutput> got_b = got_a;
  std::vector<int32_t> seen;
  std::thread ta([&] {
    ScheduledRequest r;
    r.gen = a;
    got_a = sched.Generate(r, [&](int32_t id) {
      seen.push_back(id);
      if (seen.size() < 3) return true;
      return false;
    });
  });
  std::thread tb([&] {
    ScheduledRequest r;
    r.gen = b;
    got_b = sched.Generate(r);
  });
  ta.join();
  tb.join();
  ASSERT_TRUE(got_a.ok()) << got_a.status().ToString();
  EXPECT_EQ(got_a->finish, FinishReason::kCancelled);
  EXPECT_EQ(got_a->generated, seen);
  EXPECT_EQ(got_a->generated.size(), 3u);
  ASSERT_TRUE(got_b.ok());
  EXPECT_EQ(got_b->generated, want_b->generated);
  EXPECT_EQ((*h)->kv.bytes_in_use(), 0u);
}

TEST_P(SchedulerTest, RepeatedImageSkipsTheEncoder) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  std::string dir;
  const std::vector<Input> inputs = Inputs(GetParam(), &dir);
  auto h = Harness::Load(dir);
  ASSERT_TRUE(h.ok());
  const ModelSpec& spec = (*h)->model->spec();
  GenerationRequest g = MakeRequest(inputs[0], 0, spec);
  ASSERT_EQ(g.prompt->images.size(), 1u);
  auto want = (*h)->Generate(g);
  ASSERT_TRUE(want.ok());
  std::mutex runner_mu;
  FeatureCache cache(64u << 20);
  Scheduler sched((*h)->runner, (*h)->kv, runner_mu, &cache, 1);
  ScheduledRequest r;
  r.gen = g;
  const Prompt& px = *g.prompt;
  r.image_keys = {MakeFeatureKey("test", 64, 48, px.pixels.data(), px.pixels.size())};
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    auto got = sched.Generate(r);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->generated, want->generated);
    EXPECT_EQ(sched.stats().images_encoded, 1u) << "the encoder ran again";
  }
  const FeatureCacheStats c = cache.stats();
  EXPECT_EQ(c.misses, 1u);
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(c.entries, 1u);
  EXPECT_EQ(c.bytes, static_cast<size_t>(spec.image_tokens * spec.hidden_size) * sizeof(float));
  // Another size or another model is another key.
  EXPECT_NE(MakeFeatureKey("test", 64, 49, px.pixels.data(), px.pixels.size()), r.image_keys[0]);
  EXPECT_NE(MakeFeatureKey("tesu", 64, 48, px.pixels.data(), px.pixels.size()), r.image_keys[0]);
}

TEST(FeatureCache, EvictsLeastRecentlyUsedWithinItsBudget) {
  FeatureCache cache(3 * 100 * sizeof(float));
  auto features = [](float v) { return std::make_shared<const std::vector<float>>(100, v); };
  const float px[3][4] = {{1, 2, 3, 4}, {1, 2, 3, 5}, {9, 9, 9, 9}};
  FeatureKey k[4];
  for (int i = 0; i < 3; ++i) k[i] = MakeFeatureKey("m", 2, 2, px[i], 4);
  k[3] = MakeFeatureKey("m", 2, 2, px[0], 3);
  for (int i = 0; i < 3; ++i) cache.Put(k[i], features(float(i)));
  ASSERT_NE(cache.Get(k[0]), nullptr);  // k[0] is now the most recent; k[1] the least
  cache.Put(k[3], features(3));
  EXPECT_EQ(cache.Get(k[1]), nullptr);
  auto f0 = cache.Get(k[0]);
  ASSERT_NE(f0, nullptr);
  EXPECT_EQ((*f0)[0], 0.0f);
  EXPECT_NE(cache.Get(k[2]), nullptr);
  EXPECT_NE(cache.Get(k[3]), nullptr);
  const FeatureCacheStats s = cache.stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_LE(s.bytes, s.max_bytes);
  cache.Put(MakeFeatureKey("m", 1, 1, px[2], 1),
            std::make_shared<const std::vector<float>>(400, 0.f));  // over the whole budget
  EXPECT_EQ(cache.stats().entries, 3u);
}

INSTANTIATE_TEST_SUITE_P(Tiny, SchedulerTest, testing::Values("pg2", "pg2-bf16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace ocular

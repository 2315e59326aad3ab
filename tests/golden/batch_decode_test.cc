// Batched decoding equals decoding each sequence alone: B = 1..8 sequences with different
// images and prompt lengths in one forward pass per step, sequences joining and leaving at
// any step. Same tokens; f32 logits within 1e-6 relative error of the single-sequence run.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "runtime/parity.h"
#include "support/fixture.h"
#include "support/harness.h"

namespace ocular {
namespace {

using testing_support::Harness;

struct Input {
  std::vector<int32_t> ids;
  Tensor pixels;  // [n, 3, R, R] or empty
};

std::vector<Input> GoldenInputs(const std::string& checkpoint, std::string* model_dir) {
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

// One sequence in the batched run: when it joins, how many tokens it may generate, and the
// logits rows that chose its tokens.
struct Track {
  int input = 0;
  int join_step = 0;
  int max_new = 0;
  std::unique_ptr<Sequence> seq;
  std::vector<std::vector<float>> logits;
};

// Scenarios: B sequences joining together (B = 1..8), then a staggered one where sequences
// join at different steps and leave early (short max_new) while others continue.
std::vector<std::vector<Track>> Scenarios(int n_inputs) {
  std::vector<std::vector<Track>> scenarios;
  for (int B = 1; B <= 8; ++B) {
    std::vector<Track> s(B);
    for (int i = 0; i < B; ++i) s[i] = Track{i % n_inputs, 0, 6, nullptr, {}};
    scenarios.push_back(std::move(s));
  }
  std::vector<Track> s;
  const int joins[] = {0, 0, 1, 2, 2, 4, 5, 7};
  const int lengths[] = {9, 2, 7, 3, 8, 1, 5, 4};
  for (int i = 0; i < 8; ++i)
    s.push_back(Track{(i * 5) % n_inputs, joins[i], lengths[i], nullptr, {}});
  scenarios.push_back(std::move(s));
  return scenarios;
}

// Track t joins the batch: its image encoded, its prompt prefilled, the prefill's logits row
// recorded.
void Join(Harness& m, const Input& in, Track& t) {
  const ModelSpec& spec = m.model->spec();
  SequenceParams p;
  p.prompt = testing_support::FixturePrompt(spec, in.ids, &in.pixels);
  const Prompt& prompt = *p.prompt;
  p.max_new_tokens = t.max_new;
  auto kv = m.kv.Acquire(static_cast<int64_t>(in.ids.size()) + t.max_new);
  ASSERT_TRUE(kv.ok());
  t.seq = std::make_unique<Sequence>(std::move(p), std::move(*kv), spec.vocab_size);
  std::vector<float> features;
  if (!prompt.images.empty()) {
    features.resize(prompt.feature_rows() * spec.hidden_size);
    m.runner.EncodeImages(prompt, 0, prompt.images.size(), features.data(), nullptr);
  }
  ASSERT_TRUE(m.runner.Prefill(*t.seq, features.empty() ? nullptr : features.data(), nullptr).ok());
  t.logits.emplace_back(m.runner.last_logits(0), m.runner.last_logits(0) + spec.vocab_size);
}

// Runs the tracks as one batch: each joins at its step, every running sequence takes one
// decode step together, finished ones leave and return their cache; each step's logits rows
// are recorded per track.
void RunBatched(Harness& m, const std::vector<Input>& inputs, std::vector<Track>& tracks) {
  const int64_t V = m.model->spec().vocab_size;
  std::vector<Sequence*> running;
  for (int step = 0;; ++step) {
    for (Track& t : tracks) {
      if (t.join_step != step) continue;
      ASSERT_NO_FATAL_FAILURE(Join(m, inputs[t.input], t));
      running.push_back(t.seq.get());
    }
    // Leaves: finished sequences drop out of the batch and return their cache.
    std::vector<Sequence*> active;
    for (Sequence* s : running) {
      if (s->done()) {
        s->ReleaseCache();
      } else {
        active.push_back(s);
      }
    }
    running = active;
    bool pending = false;
    for (const Track& t : tracks) pending |= t.join_step > step;
    if (active.empty() && !pending) break;
    m.runner.DecodeStep(active);
    for (size_t i = 0; i < active.size(); ++i) {
      for (Track& t : tracks) {
        if (t.seq.get() == active[i])
          t.logits.emplace_back(m.runner.last_logits(i), m.runner.last_logits(i) + V);
      }
    }
  }
}

class BatchDecodeTest : public testing::TestWithParam<const char*> {};

TEST_P(BatchDecodeTest, BatchedEqualsAloneWithJoinsAndLeaves) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  std::string dir;
  const std::vector<Input> inputs = GoldenInputs(GetParam(), &dir);
  ASSERT_GE(inputs.size(), 8u);
  auto h = Harness::Load(dir, nullptr, /*threads=*/2, /*max_batch=*/8);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  Harness& m = **h;
  const ModelSpec& spec = m.model->spec();
  const int64_t V = spec.vocab_size;

  // Every input alone, as Generate runs it (no EOS stop: fixed lengths).
  auto alone = [&](const Track& t) {
    GenerationRequest req;
    req.prompt = testing_support::FixturePrompt(spec, inputs[t.input].ids, &inputs[t.input].pixels);
    req.max_new_tokens = t.max_new;
    req.record_decode_logits = true;
    auto out = m.Generate(req);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return *out;
  };

  std::vector<std::vector<Track>> scenarios = Scenarios(static_cast<int>(inputs.size()));
  for (size_t sc = 0; sc < scenarios.size(); ++sc) {
    SCOPED_TRACE("scenario " + std::to_string(sc));
    std::vector<Track>& tracks = scenarios[sc];
    ASSERT_NO_FATAL_FAILURE(RunBatched(m, inputs, tracks));
    for (size_t i = 0; i < tracks.size(); ++i) {
      SCOPED_TRACE("sequence " + std::to_string(i));
      const Track& t = tracks[i];
      const GenerationOutput ref = alone(t);
      ASSERT_EQ(t.seq->generated(), ref.generated);
      ASSERT_EQ(static_cast<int64_t>(t.logits.size()), ref.decode_logits.dim(0));
      for (size_t s = 0; s < t.logits.size(); ++s) {
        const TensorView got{t.logits[s].data(), DType::kF32, {V}};
        const TensorView want{ref.decode_logits.row(static_cast<int64_t>(s)), DType::kF32, {V}};
        EXPECT_LE(CompareTensors(got, want).rel, 1e-6) << "step " << s;
      }
    }
  }
  EXPECT_EQ(m.kv.bytes_in_use(), 0u) << "every cache returned to the pool";
}

// Image features computed once can be passed in (an embedding cache): the same answer as
// encoding the pixels again.
TEST_P(BatchDecodeTest, PrecomputedImageFeaturesGiveTheSameAnswer) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  std::string dir;
  const std::vector<Input> inputs = GoldenInputs(GetParam(), &dir);
  auto h = Harness::Load(dir);
  ASSERT_TRUE(h.ok());
  Harness& m = **h;
  for (const Input& in : inputs) {
    if (in.pixels.data.empty()) continue;
    const ModelSpec& spec = m.model->spec();
    GenerationRequest req;
    req.prompt = testing_support::FixturePrompt(spec, in.ids, &in.pixels);
    req.max_new_tokens = 8;
    auto direct = m.Generate(req);
    ASSERT_TRUE(direct.ok());
    Tensor features({req.prompt->feature_rows(), spec.hidden_size});
    m.runner.EncodeImages(*req.prompt, 0, req.prompt->images.size(), features.data.data(), nullptr);
    req.features = &features;
    auto cached = m.Generate(req);
    ASSERT_TRUE(cached.ok());
    EXPECT_EQ(cached->generated, direct->generated);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, BatchDecodeTest, testing::Values("pg1", "pg2"));

}  // namespace
}  // namespace ocular

// The decode step makes no heap allocation (nor do a repeated image encode and prefill): every
// buffer is planned, the thread pool passes work without std::function, the sampler and the
// KV caches are sized when a sequence joins. Counted by replacing the global operator new.
#include <gtest/gtest.h>

#include <vector>

#include "image/image.h"
#include "models/registry.h"
#include "support/count_allocations.h"
#include "support/fixture.h"
#include "support/harness.h"
#include "support/prompts.h"

namespace ocular {
namespace {

using testing_support::Harness;

struct Case {
  const char* checkpoint;
  float temperature;  // > 0: top-k / top-p sampling scratch too
};

class AllocationTest : public testing::TestWithParam<Case> {};

TEST_P(AllocationTest, DecodeStepEncodeAndPrefillAllocateNothing) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  if (!OCULAR_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are counted without sanitizers";
  const Case c = GetParam();
  auto taps = fixture::GoldenTaps::Open(std::string("testdata/golden/") + c.checkpoint +
                                        "/photo_detect.safetensors");
  ASSERT_TRUE(taps.ok());
  const std::vector<int32_t> ids = *taps->Ids("input_ids");
  const TensorView pv = *taps->Tap("pixel_values");
  auto h = Harness::Load(std::string("testdata/tiny/") + c.checkpoint, nullptr, 2, 4);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  Harness& m = **h;
  const ModelSpec& spec = m.model->spec();
  const std::shared_ptr<Prompt> prompt = testing_support::FixturePrompt(spec, ids, &pv);
  std::vector<float> features(prompt->feature_rows() * spec.hidden_size);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> batch;
  for (int i = 0; i < 4; ++i) {
    SequenceParams p;
    p.prompt = prompt;
    p.max_new_tokens = 20;
    p.sampling.temperature = c.temperature;
    p.sampling.top_k = c.temperature > 0 ? 40 : 0;
    p.sampling.top_p = c.temperature > 0 ? 0.9f : 1.0f;
    p.sampling.seed = i;
    auto kv = m.kv.Acquire(static_cast<int64_t>(ids.size()) + 20);
    ASSERT_TRUE(kv.ok());
    seqs.push_back(std::make_unique<Sequence>(std::move(p), std::move(*kv), spec.vocab_size));
    batch.push_back(seqs.back().get());
  }
  // Warm-up: the first prefill grows the planned workspace to this prompt length.
  m.runner.EncodeImages(*prompt, 0, prompt->images.size(), features.data(), nullptr);
  ASSERT_TRUE(m.runner.Prefill(*seqs[0], features.data(), nullptr).ok());
  m.runner.DecodeStep(std::span<Sequence* const>(batch.data(), 1));

  int64_t before = g_allocations.load();
  m.runner.EncodeImages(*prompt, 0, prompt->images.size(), features.data(), nullptr);
  for (int i = 1; i < 4; ++i) {
    ASSERT_TRUE(m.runner.Prefill(*seqs[i], features.data(), nullptr).ok());
  }
  EXPECT_EQ(g_allocations.load() - before, 0) << "allocations in encode + 3 prefills";

  before = g_allocations.load();
  for (int step = 0; step < 10; ++step) m.runner.DecodeStep(batch);
  EXPECT_EQ(g_allocations.load() - before, 0) << "allocations in 10 decode steps of 4 sequences";
  for (Sequence* s : batch) EXPECT_GE(s->generated().size(), 10u);
}

INSTANTIATE_TEST_SUITE_P(Tiny, AllocationTest,
                         testing::Values(Case{"pg1", 0.0f}, Case{"pg2", 0.0f},
                                         Case{"pg2-bf16", 0.0f}, Case{"pg2", 0.8f}),
                         [](const auto& info) {
                           std::string n = info.param.checkpoint;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n + (info.param.temperature > 0 ? "_sampled" : "_greedy");
                         });

}  // namespace
}  // namespace ocular

namespace ocular {
namespace {

// Llama 3.2 Vision: after a warm-up, an image encode and prefills with images (which compute
// and store the cross-attention K/V) allocate nothing, nor do decode steps that read them.
TEST(MllamaAllocationTest, EncodePrefillAndDecodeAllocateNothing) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  if (!OCULAR_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are counted without sanitizers";
  auto taps = fixture::GoldenTaps::Open("testdata/golden/mllama/two.safetensors");
  ASSERT_TRUE(taps.ok());
  const std::vector<int32_t> ids = *taps->Ids("input_ids");
  const TensorView pv = *taps->Tap("pixel_values");
  const int64_t n = pv.shape[0];
  auto loaded = LoadModel("testdata/tiny/mllama");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const VlModel& model = *loaded->model;
  const ModelSpec& spec = model.spec();
  const std::shared_ptr<Prompt> prompt =
      testing_support::MllamaFixturePrompt(spec, ids, pv, *taps->file().Find("aspect_ratio_ids"));
  ThreadPool pool(2);
  Backend backend(pool);
  KvPool kv(spec.kv, KvDType::kF32);
  Runner runner(model, backend, Precision::kF32, {.max_batch = 4, .max_images = n});
  std::vector<float> features(n * spec.image_tokens * spec.hidden_size);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> batch;
  for (int i = 0; i < 4; ++i) {
    SequenceParams p;
    p.prompt = prompt;
    p.max_new_tokens = 20;
    auto cache = kv.Acquire(static_cast<int64_t>(ids.size()) + 20, prompt->feature_rows());
    ASSERT_TRUE(cache.ok());
    seqs.push_back(std::make_unique<Sequence>(std::move(p), std::move(*cache), spec.vocab_size,
                                              model.NewState()));
    batch.push_back(seqs.back().get());
  }
  runner.EncodeImages(*prompt, 0, n, features.data(), nullptr);
  ASSERT_TRUE(runner.Prefill(*seqs[0], features.data(), nullptr).ok());
  runner.DecodeStep(std::span<Sequence* const>(batch.data(), 1));

  int64_t before = g_allocations.load();
  runner.EncodeImages(*prompt, 0, n, features.data(), nullptr);
  for (int i = 1; i < 4; ++i) ASSERT_TRUE(runner.Prefill(*seqs[i], features.data(), nullptr).ok());
  EXPECT_EQ(g_allocations.load() - before, 0) << "allocations in encode + 3 prefills";
  before = g_allocations.load();
  for (int step = 0; step < 10; ++step) runner.DecodeStep(batch);
  EXPECT_EQ(g_allocations.load() - before, 0) << "allocations in 10 decode steps of 4 sequences";
  for (Sequence* s : batch) EXPECT_GE(s->generated().size(), 10u);
}

// Qwen2.5-VL: after a warm-up, an encode of two images (window attention), prefills at M-RoPE
// positions and batched decode steps allocate nothing. Qwen3-VL: the same with the position
// table's interpolation and DeepStack's wider feature rows.
class QwenAllocationTest : public testing::TestWithParam<const char*> {};

TEST_P(QwenAllocationTest, EncodePrefillAndDecodeAllocateNothing) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  if (!OCULAR_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are counted without sanitizers";
  auto loaded = LoadModel(std::string("testdata/tiny/") + GetParam());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const VlModel& model = *loaded->model;
  const ModelSpec& spec = model.spec();
  Prompt images;
  for (const char* name : {"photo", "gray"}) {
    auto image = LoadImage(std::string("testdata/golden/inputs/") + name + ".png");
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    ASSERT_TRUE(loaded->processor->AddImage(*image, ImageOptions{}, 0, &images).ok());
  }
  auto made = loaded->processor->MakePrompt(std::move(images), 2, "what differs?", nullptr, {});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const auto prompt = std::make_shared<const Prompt>(std::move(*made));
  const int64_t n = static_cast<int64_t>(prompt->images.size());
  ThreadPool pool(2);
  Backend backend(pool);
  KvPool kv(spec.kv, KvDType::kF32);
  Runner runner(model, backend, Precision::kF32, {.max_batch = 4, .max_images = n});
  std::vector<float> features(prompt->feature_rows() * spec.feature_floats());
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> batch;
  for (int i = 0; i < 4; ++i) {
    SequenceParams p;
    p.prompt = prompt;
    p.max_new_tokens = 20;
    auto cache = kv.Acquire(prompt->size() + 20, 0);
    ASSERT_TRUE(cache.ok());
    seqs.push_back(std::make_unique<Sequence>(std::move(p), std::move(*cache), spec.vocab_size,
                                              model.NewState()));
    batch.push_back(seqs.back().get());
  }
  runner.EncodeImages(*prompt, 0, n, features.data(), nullptr);
  ASSERT_TRUE(runner.Prefill(*seqs[0], features.data(), nullptr).ok());
  runner.DecodeStep(std::span<Sequence* const>(batch.data(), 1));

  int64_t before = g_allocations.load();
  runner.EncodeImages(*prompt, 0, n, features.data(), nullptr);
  for (int i = 1; i < 4; ++i) ASSERT_TRUE(runner.Prefill(*seqs[i], features.data(), nullptr).ok());
  EXPECT_EQ(g_allocations.load() - before, 0) << "allocations in encode + 3 prefills";
  before = g_allocations.load();
  for (int step = 0; step < 10; ++step) runner.DecodeStep(batch);
  EXPECT_EQ(g_allocations.load() - before, 0) << "allocations in 10 decode steps of 4 sequences";
  for (Sequence* s : batch) EXPECT_GE(s->generated().size(), 10u);
}

INSTANTIATE_TEST_SUITE_P(Tiny, QwenAllocationTest, testing::Values("qwen25vl", "qwen3vl"));

}  // namespace
}  // namespace ocular

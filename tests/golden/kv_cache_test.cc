// KV-cache decoding must equal recomputing the whole sequence with the prefix-LM mask.
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "runtime/parity.h"
#include "support/harness.h"
#include "support/prompts.h"

namespace ocular {
namespace {

using testing_support::Harness;

class KvCacheTest : public testing::TestWithParam<const char*> {};

TEST_P(KvCacheTest, CachedDecodeEqualsFullRecomputation) {
  const std::string name = GetParam();
  auto h = testing_support::Harness::Load("testdata/tiny/" + name);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  Harness& m = **h;
  auto golden = SafetensorsFile::Open("testdata/golden/" + name + "/photo_detect.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  const TensorView& pv = *golden->Find("pixel_values");
  Tensor pixels(pv.shape);
  std::copy_n(pv.as<float>(), pv.numel(), pixels.data.data());
  const TensorView& ids_view = *golden->Find("input_ids");
  std::vector<int32_t> ids(ids_view.numel());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(ids_view.as<int64_t>()[i]);

  GenerationRequest req;
  req.prompt = testing_support::FixturePrompt(m.model->spec(), ids, &pixels);
  req.max_new_tokens = 12;
  req.record_decode_logits = true;
  auto out = m.Generate(req);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->generated.size(), 12u);

  // One pass over prefix + generated[0..n-2]: the prefix block bidirectional, the rest causal.
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<int32_t> all = ids;
  all.insert(all.end(), out->generated.begin(), out->generated.end() - 1);
  const ModelSpec& spec = m.model->spec();
  const int64_t H = spec.hidden_size, n = static_cast<int64_t>(all.size());
  const std::shared_ptr<Prompt> whole = testing_support::FixturePrompt(spec, all, &pixels, T);
  const int64_t feature_rows = whole->feature_rows();
  std::vector<float> features(feature_rows * H), x(n * H);
  m.runner.EncodeImages(*whole, 0, whole->images.size(), features.data(), nullptr);
  // A runner planned for the whole sequence in one pass.
  Runner full_runner(*m.model, m.backend, m.runner.exec().precision, {.max_context = n});
  full_runner.Plan(n, n, 0);
  const Exec& ex = full_runner.exec();
  ASSERT_TRUE(m.model->Embed(ex, all, features.data(), feature_rows, x.data(), nullptr).ok());
  auto cache = m.kv.Acquire(n);
  ASSERT_TRUE(cache.ok());
  const SeqChunk chunk{cache->cache(), 0, n, whole.get()};
  m.model->Forward(ex, Batch{std::span<const SeqChunk>(&chunk, 1), n}, x.data(), nullptr);
  Tensor full({n - T + 1, spec.vocab_size});
  m.model->Logits(ex, x.data() + (T - 1) * H, n - T + 1, full.data.data());
  ASSERT_EQ(full.numel(), out->decode_logits.numel());
  TapDiff d = CompareTensors(out->decode_logits.view(), full.view());
  EXPECT_LE(d.rel, 1e-6) << "max abs " << d.max_abs;
}

INSTANTIATE_TEST_SUITE_P(Tiny, KvCacheTest, testing::Values("pg1", "pg2"));

}  // namespace
}  // namespace ocular

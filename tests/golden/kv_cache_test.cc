// KV-cache decoding must equal recomputing the whole sequence with the prefix-LM mask.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "models/paligemma.h"
#include "runtime/generator.h"
#include "runtime/parity.h"

namespace ocular {
namespace {

class KvCacheTest : public testing::TestWithParam<const char*> {};

TEST_P(KvCacheTest, CachedDecodeEqualsFullRecomputation) {
  const std::string name = GetParam();
  auto model = PaliGemma::Load("testdata/tiny/" + name);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto golden = SafetensorsFile::Open("testdata/golden/" + name + "/photo_detect.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  const TensorView& pv = *golden->Find("pixel_values");
  Tensor pixels(pv.shape);
  std::copy_n(pv.as<float>(), pv.numel(), pixels.data.data());
  const TensorView& ids_view = *golden->Find("input_ids");
  std::vector<int32_t> ids(ids_view.numel());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(ids_view.as<int64_t>()[i]);

  ThreadPool pool(2);
  GenerationRequest req;
  req.ids = ids;
  req.pixel_values = &pixels;
  req.max_new_tokens = 12;
  req.record_decode_logits = true;
  auto out = Generate(pool, **model, req, nullptr);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->generated.size(), 12u);

  // One pass over prefix + generated[0..n-2]: the prefix block bidirectional, the rest causal.
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<int32_t> all = ids;
  all.insert(all.end(), out->generated.begin(), out->generated.end() - 1);
  Tensor features = (*model)->EncodeImages(pool, pixels, nullptr);
  auto x = (*model)->Embed(all, &features, nullptr);
  ASSERT_TRUE(x.ok());
  const int64_t n = static_cast<int64_t>(all.size());
  KvCache cache = (*model)->NewCache(n);
  Tensor h = (*model)->Decode(pool, std::move(*x), Span{0, n, T}, cache, nullptr);
  Tensor full = (*model)->Logits(pool, h.row(T - 1), n - T + 1);
  ASSERT_EQ(full.numel(), out->decode_logits.numel());
  TapDiff d = CompareTensors(out->decode_logits.view(), full.view());
  EXPECT_LE(d.rel, 1e-6) << "max abs " << d.max_abs;
}

INSTANTIATE_TEST_SUITE_P(Tiny, KvCacheTest, testing::Values("pg1", "pg2"));

}  // namespace
}  // namespace ocular

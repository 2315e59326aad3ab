// Attention (MHA/GQA/MQA, causal/bidirectional/window ranges, softcap, strided KV cache):
// every ISA against the scalar reference, and the reference against a naive double version.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/test_util.h"

namespace ocular {
namespace {

using namespace ::ocular::kernel_test;  // NOLINT: test helpers

struct Case {
  int64_t Tq, Tk, Hq, Hkv, d;
  float softcap;
  const char* mask;  // "causal", "full", "window", "prefix", "empty"
};

// key_begin/key_end for query i; queries are the last Tq positions of the Tk keys.
void Ranges(const Case& c, std::vector<int32_t>* begin, std::vector<int32_t>* end) {
  const std::string mask = c.mask;
  for (int64_t i = 0; i < c.Tq; ++i) {
    const int32_t p = static_cast<int32_t>(c.Tk - c.Tq + i);  // absolute position of query i
    int32_t b = 0, e = p + 1;
    if (mask == "full") e = static_cast<int32_t>(c.Tk);
    if (mask == "window") b = std::max(0, p - 3);  // window of 4 keys
    if (mask == "prefix") e = std::max<int32_t>(p + 1, static_cast<int32_t>(c.Tk / 2));
    if (mask == "empty" && i % 2 == 0) b = e = p;
    begin->push_back(b);
    end->push_back(e);
  }
}

// Naive attention in double: explicit scores, softmax, weighted sum.
std::vector<float> NaiveAttention(const Case& c, const float* q, int64_t ldq, const float* k,
                                  const float* v, int64_t ldk, int64_t ldv, float scale,
                                  const std::vector<int32_t>& begin,
                                  const std::vector<int32_t>& end, std::vector<float>* scale_out) {
  std::vector<float> out(c.Tq * c.Hq * c.d, 0.0f);
  scale_out->assign(out.size(), 0.0f);
  for (int64_t i = 0; i < c.Tq; ++i) {
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t kvh = h * c.Hkv / c.Hq;
      std::vector<double> s;
      for (int64_t t = begin[i]; t < end[i]; ++t) {
        double dot = 0;
        for (int64_t j = 0; j < c.d; ++j)
          dot += double(q[i * ldq + h * c.d + j]) * k[t * ldk + kvh * c.d + j];
        dot *= scale;
        if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
        s.push_back(dot);
      }
      if (s.empty()) continue;
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < c.d; ++j) {
        double acc = 0, mag = 0;
        for (int64_t t = begin[i]; t < end[i]; ++t) {
          const double vv = v[t * ldv + kvh * c.d + j];
          acc += s[t - begin[i]] / sum * vv;
          mag += s[t - begin[i]] / sum * std::fabs(vv);
        }
        out[(i * c.Hq + h) * c.d + j] = static_cast<float>(acc);
        (*scale_out)[(i * c.Hq + h) * c.d + j] = static_cast<float>(mag);
      }
    }
  }
  return out;
}

TEST(AttentionTest, EveryIsaMatchesReferenceAndNaiveFormula) {
  const Case cases[] = {
      {5, 5, 4, 4, 16, 0.0f, "causal"},    // MHA, prefill
      {5, 5, 4, 2, 17, 0.0f, "full"},      // GQA, bidirectional, odd head_dim
      {1, 9, 8, 1, 33, 0.0f, "causal"},    // MQA decode step
      {7, 12, 4, 2, 64, 50.0f, "window"},  // Gemma 2: sliding window + softcap
      {6, 10, 2, 1, 72, 50.0f, "prefix"},  // prefix-LM block
      {4, 4, 2, 2, 8, 0.0f, "empty"},      // empty ranges give zero rows
      {3, 40, 2, 1, 256, 0.0f, "causal"},  // PaliGemma head_dim
      {2, 3, 3, 3, 1, 20.0f, "full"},
      {37, 37, 2, 2, 72, 0.0f, "prefix"},  // SigLIP-like head_dim, blocks + a tail query
      {9, 30, 4, 1, 16, 50.0f, "window"},
      {6, 6, 2, 1, 8, 0.0f, "empty"},  // a block mixing empty and non-empty ranges
  };
  ThreadPool pool(3);
  for (const Case& c : cases) {
    const std::string what = std::string(c.mask) + " Tq=" + std::to_string(c.Tq) +
                             " Tk=" + std::to_string(c.Tk) + " Hq=" + std::to_string(c.Hq) +
                             " Hkv=" + std::to_string(c.Hkv) + " d=" + std::to_string(c.d) +
                             " softcap=" + std::to_string(c.softcap);
    SCOPED_TRACE(what);
    // Padded strides, as when k/v live in a KV cache row wider than the heads.
    const int64_t ldq = c.Hq * c.d + 1, ldk = c.Hkv * c.d + 5, ldv = c.Hkv * c.d + 2;
    const int64_t ldo = c.Hq * c.d + 3;
    std::vector<float> q = RandomFloats(1 + c.Tq * ldq, 21, -2.0f, 2.0f);
    std::vector<float> k = RandomFloats(1 + c.Tk * ldk, 22, -2.0f, 2.0f);
    std::vector<float> v = RandomFloats(1 + c.Tk * ldv, 23);
    std::vector<int32_t> begin, end;
    Ranges(c, &begin, &end);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    std::vector<float> mag;
    const std::vector<float> naive = NaiveAttention(
        c, q.data() + 1, ldq, k.data() + 1, v.data() + 1, ldk, ldv, scale, begin, end, &mag);
    // The reference, one item at a time.
    std::vector<float> want(c.Tq * ldo, 0.0f);
    const kernels::AttentionArgs args{
        q.data() + 1, c.Tq, c.Hq,  ldq,       k.data() + 1, v.data() + 1, c.Tk,        c.Hkv, ldk,
        ldv,          c.d,  scale, c.softcap, begin.data(), end.data(),   want.data(), ldo};
    std::vector<float> scratch(kernels::kAttentionQueryBlock * c.Tk);
    ref::AttentionItems(args, 0, kernels::AttentionItemCount(c.Tq, c.Hq), scratch.data());
    for (int64_t i = 0; i < c.Tq; ++i) {
      ExpectClose(want.data() + i * ldo, naive.data() + i * c.Hq * c.d, mag.data() + i * c.Hq * c.d,
                  c.Hq * c.d, 2e-6, 1e-30, "ref vs naive");
    }
    ForEachIsa([&](const std::string&) {
      std::vector<float> out(1 + c.Tq * ldo, -9.0f);
      ops::Attention(pool, q.data() + 1, c.Tq, c.Hq, ldq, k.data() + 1, v.data() + 1, c.Tk, c.Hkv,
                     ldk, ldv, c.d, scale, c.softcap, begin.data(), end.data(), out.data() + 1,
                     ldo);
      EXPECT_EQ(out[0], -9.0f);
      for (int64_t i = 0; i < c.Tq; ++i) {
        ExpectClose(out.data() + 1 + i * ldo, want.data() + i * ldo, mag.data() + i * c.Hq * c.d,
                    c.Hq * c.d, 1e-6, 1e-30, "row " + std::to_string(i));
        for (int64_t p = c.Hq * c.d; p < ldo && i + 1 < c.Tq; ++p) {
          ASSERT_EQ(out[1 + i * ldo + p], -9.0f) << "wrote into the row padding";
        }
      }
    });
  }
}

}  // namespace
}  // namespace ocular

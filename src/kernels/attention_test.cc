// Attention (MHA/GQA/MQA, causal/bidirectional/window ranges, softcap, strided KV cache):
// every ISA against the scalar reference, and the reference against a naive double version.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/kernel_table.h"
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
    const kernels::AttentionArgs args{q.data() + 1, c.Tq,       c.Hq,        ldq,   k.data() + 1,
                                      v.data() + 1, false,      0,           c.Tk,  c.Hkv,
                                      ldk,          ldv,        c.d,         scale, c.softcap,
                                      begin.data(), end.data(), want.data(), ldo,   false};
    std::vector<float> scratch(kernels::AttentionScratchFloats(c.Tk, c.d));
    ref::AttentionItems(args, 0, kernels::AttentionItemCount(c.Tq, c.Hq, c.Hkv), scratch.data());
    for (int64_t i = 0; i < c.Tq; ++i) {
      ExpectClose(want.data() + i * ldo, naive.data() + i * c.Hq * c.d, mag.data() + i * c.Hq * c.d,
                  c.Hq * c.d, 2e-6, 1e-30, "ref vs naive");
    }
    ForEachIsa([&](const std::string&) {
      std::vector<float> out(1 + c.Tq * ldo, -9.0f);
      TestExec t(3);
      const ops::KvRows kv{k.data() + 1, v.data() + 1, false, 0, c.Tk, ldk, ldv};
      ops::Attention(t.ex, q.data() + 1, c.Tq, c.Hq, ldq, kv, c.Hkv, c.d, scale, c.softcap,
                     begin.data(), end.data(), out.data() + 1, ldo);
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

// Decode with grouped-query attention: one item takes a query × all heads of a KV head
// (kernel_table.h AttentionItemAt). The outputs equal those of each head alone, bit for bit,
// on every ISA, in f32 and bf16, from f32 and bf16 KV rows.
TEST(AttentionTest, GroupedHeadsEqualOneHeadAtATime) {
  const int64_t Hq = 8, Hkv = 2, d = 40, Tk = 300, kvdim = Hkv * d;
  std::vector<float> k = RandomFloats(Tk * kvdim, 41, -2.0f, 2.0f);
  std::vector<float> v = RandomFloats(Tk * kvdim, 42);
  {
    TestExec r(1, Precision::kBF16);
    ops::CastToActivation(r.ex, k.data(), Tk * kvdim);
    ops::CastToActivation(r.ex, v.data(), Tk * kvdim);
  }
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) k16[i] = F32ToBF16(k[i]), v16[i] = F32ToBF16(v[i]);
  for (int64_t Tq : {1, 3}) {
    ASSERT_TRUE(kernels::AttentionGroupsHeads(Tq, Hq, Hkv));
    std::vector<float> q = RandomFloats(Tq * Hq * d, 43, -2.0f, 2.0f);
    std::vector<int32_t> begin(Tq, 0), end(Tq);
    for (int64_t i = 0; i < Tq; ++i) end[i] = static_cast<int32_t>(Tk - Tq + i + 1);
    for (Precision precision : {Precision::kF32, Precision::kBF16}) {
      for (bool kv_bf16 : {false, true}) {
        ForEachIsa([&](const std::string& isa) {
          SCOPED_TRACE(isa + " Tq=" + std::to_string(Tq) + " bf16 KV " + std::to_string(kv_bf16));
          TestExec t(2, precision);
          const void* kp = kv_bf16 ? static_cast<const void*>(k16.data()) : k.data();
          const void* vp = kv_bf16 ? static_cast<const void*>(v16.data()) : v.data();
          std::vector<float> grouped(Tq * Hq * d), alone(Tq * Hq * d);
          ops::Attention(t.ex, q.data(), Tq, Hq, Hq * d, {kp, vp, kv_bf16, 0, Tk, kvdim, kvdim},
                         Hkv, d, 0.15f, 0.0f, begin.data(), end.data(), grouped.data(), Hq * d);
          const size_t element = kv_bf16 ? 2 : 4;
          for (int64_t h = 0; h < Hq; ++h) {  // one head, its KV head's columns
            const size_t offset = static_cast<size_t>(h / (Hq / Hkv) * d) * element;
            const ops::KvRows kv{static_cast<const char*>(kp) + offset,
                                 static_cast<const char*>(vp) + offset,
                                 kv_bf16,
                                 0,
                                 Tk,
                                 kvdim,
                                 kvdim};
            ops::Attention(t.ex, q.data() + h * d, Tq, 1, Hq * d, kv, 1, d, 0.15f, 0.0f,
                           begin.data(), end.data(), alone.data() + h * d, Hq * d);
          }
          for (size_t i = 0; i < grouped.size(); ++i) ASSERT_EQ(grouped[i], alone[i]) << i;
        });
      }
    }
  }
}

// A KV cache stored as bf16 and/or as a sliding-window ring gives exactly the result of the
// same values in a plain f32 layout (the kernel walks logical keys in the same order).
TEST(AttentionTest, RingAndBf16StorageEqualTheLinearF32Layout) {
  const int64_t Hq = 4, Hkv = 2, d = 24, kvdim = Hkv * d, ring = 5;
  for (int64_t Tk : {3, 5, 6, 9, 13}) {
    SCOPED_TRACE("Tk=" + std::to_string(Tk));
    const int64_t Tq = 3;  // decode-like queries at the last positions, window = ring
    std::vector<float> q = RandomFloats(Tq * Hq * d, 31, -2.0f, 2.0f);
    std::vector<float> k = RandomFloats(Tk * kvdim, 32, -2.0f, 2.0f);
    std::vector<float> v = RandomFloats(Tk * kvdim, 33);
    {  // bf16-representable values, so bf16 storage is lossless
      TestExec r(1, Precision::kBF16);
      ops::CastToActivation(r.ex, k.data(), Tk * kvdim);
      ops::CastToActivation(r.ex, v.data(), Tk * kvdim);
    }
    std::vector<int32_t> begin, end;
    for (int64_t i = 0; i < Tq; ++i) {
      const int32_t p = static_cast<int32_t>(Tk - Tq + i);
      end.push_back(p + 1);
      begin.push_back(
          std::max<int32_t>(std::max<int32_t>(0, p + 1 - ring), static_cast<int32_t>(Tk - ring)));
    }
    // Ring layouts: logical key t at row t % ring (only the last `ring` keys kept).
    std::vector<float> k_ring(ring * kvdim), v_ring(ring * kvdim);
    std::vector<uint16_t> k_ring16(ring * kvdim), v_ring16(ring * kvdim), k16(Tk * kvdim),
        v16(Tk * kvdim);
    for (int64_t t = 0; t < Tk; ++t) {
      for (int64_t j = 0; j < kvdim; ++j) {
        k16[t * kvdim + j] = F32ToBF16(k[t * kvdim + j]);
        v16[t * kvdim + j] = F32ToBF16(v[t * kvdim + j]);
        if (t < Tk - ring) continue;
        k_ring[t % ring * kvdim + j] = k[t * kvdim + j];
        v_ring[t % ring * kvdim + j] = v[t * kvdim + j];
        k_ring16[t % ring * kvdim + j] = k16[t * kvdim + j];
        v_ring16[t % ring * kvdim + j] = v16[t * kvdim + j];
      }
    }
    const ops::KvRows layouts[] = {
        {k_ring.data(), v_ring.data(), false, ring, Tk, kvdim, kvdim},
        {k16.data(), v16.data(), true, 0, Tk, kvdim, kvdim},
        {k_ring16.data(), v_ring16.data(), true, ring, Tk, kvdim, kvdim},
    };
    for (Precision precision : {Precision::kF32, Precision::kBF16}) {
      ForEachIsa([&](const std::string&) {
        TestExec t(2, precision);
        std::vector<float> want(Tq * Hq * d);
        const ops::KvRows linear{k.data(), v.data(), false, 0, Tk, kvdim, kvdim};
        ops::Attention(t.ex, q.data(), Tq, Hq, Hq * d, linear, Hkv, d, 0.2f, 30.0f, begin.data(),
                       end.data(), want.data(), Hq * d);
        for (const ops::KvRows& kv : layouts) {
          std::vector<float> got(Tq * Hq * d);
          ops::Attention(t.ex, q.data(), Tq, Hq, Hq * d, kv, Hkv, d, 0.2f, 30.0f, begin.data(),
                         end.data(), got.data(), Hq * d);
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(got[i], want[i]) << "ring " << kv.ring << " bf16 " << kv.bf16 << " at " << i;
          }
        }
      });
    }
  }
}

// Precision::kBF16 follows torch's bf16 eager attention: every output is bf16, and every ISA
// agrees with the scalar twin to within one bf16 rounding of the inputs to softmax/p·v.
TEST(AttentionTest, Bf16OrderOnEveryIsaMatchesScalarTwin) {
  const Case cases[] = {{5, 5, 4, 2, 17, 0.0f, "full"},
                        {1, 40, 8, 1, 256, 50.0f, "causal"},
                        {7, 12, 4, 2, 64, 50.0f, "window"},
                        {37, 37, 2, 2, 72, 0.0f, "prefix"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.mask) + " d=" + std::to_string(c.d));
    const int64_t ldq = c.Hq * c.d, ldk = c.Hkv * c.d, ldo = c.Hq * c.d;
    std::vector<float> q = RandomFloats(c.Tq * ldq, 41, -2.0f, 2.0f);
    std::vector<float> k = RandomFloats(c.Tk * ldk, 42, -2.0f, 2.0f);
    std::vector<float> v = RandomFloats(c.Tk * ldk, 43);
    std::vector<int32_t> begin, end;
    Ranges(c, &begin, &end);
    const ops::KvRows kv{k.data(), v.data(), false, 0, c.Tk, ldk, ldk};
    std::vector<float> want(c.Tq * ldo), mag(c.Tq * ldo, 0.0f);
    {
      ASSERT_TRUE(SetIsa("scalar").ok());
      TestExec t(1, Precision::kBF16);
      ops::Attention(t.ex, q.data(), c.Tq, c.Hq, ldq, kv, c.Hkv, c.d, 0.125f, c.softcap,
                     begin.data(), end.data(), want.data(), ldo);
      ASSERT_TRUE(SetIsa(SupportedIsas().back()).ok());
    }
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(want[i], BF16ToF32(F32ToBF16(want[i]))) << "scalar output not bf16 at " << i;
    }
    for (int64_t i = 0; i < c.Tq * c.Hq; ++i) {  // |v| <= 1: outputs are bounded by 1
      for (int64_t j = 0; j < c.d; ++j) mag[i * c.d + j] = 1.0f;
    }
    ForEachIsa([&](const std::string&) {
      TestExec t(3, Precision::kBF16);
      std::vector<float> got(c.Tq * ldo);
      ops::Attention(t.ex, q.data(), c.Tq, c.Hq, ldq, kv, c.Hkv, c.d, 0.125f, c.softcap,
                     begin.data(), end.data(), got.data(), ldo);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], BF16ToF32(F32ToBF16(got[i]))) << "output not bf16 at " << i;
      }
      ExpectClose(got.data(), want.data(), mag.data(), c.Tq * ldo, 2e-2, 0.0, "bf16 attention");
    });
  }
}

// With bf16-valued inputs and 16+ queries, kBF16 takes the bf16 dot-product kernels where the
// CPU has them (f32 or bf16 K/V storage): still within one bf16 rounding of the scalar twin.
TEST(AttentionTest, Bf16DotProductPathMatchesScalarTwin) {
  const Case cases[] = {{40, 40, 4, 2, 72, 0.0f, "prefix"},
                        {33, 70, 2, 1, 64, 50.0f, "causal"},
                        {16, 16, 2, 2, 2, 0.0f, "full"},
                        {20, 31, 2, 2, 8, 0.0f, "window"}};
  auto bf16_values = [](std::vector<float> v) {
    for (float& x : v) x = BF16ToF32(F32ToBF16(x));
    return v;
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.mask) + " d=" + std::to_string(c.d));
    const int64_t ldq = c.Hq * c.d, ldk = c.Hkv * c.d, ldo = c.Hq * c.d;
    const std::vector<float> q = bf16_values(RandomFloats(c.Tq * ldq, 51, -2.0f, 2.0f));
    const std::vector<float> k = bf16_values(RandomFloats(c.Tk * ldk, 52, -2.0f, 2.0f));
    const std::vector<float> v = bf16_values(RandomFloats(c.Tk * ldk, 53));
    std::vector<uint16_t> kb, vb;
    for (float x : k) kb.push_back(F32ToBF16(x));
    for (float x : v) vb.push_back(F32ToBF16(x));
    std::vector<int32_t> begin, end;
    Ranges(c, &begin, &end);
    const ops::KvRows f32_kv{k.data(), v.data(), false, 0, c.Tk, ldk, ldk};
    const ops::KvRows bf16_kv{kb.data(), vb.data(), true, 0, c.Tk, ldk, ldk};
    std::vector<float> want(c.Tq * ldo), mag(c.Tq * ldo, 1.0f);  // |v| <= 1
    {
      ASSERT_TRUE(SetIsa("scalar").ok());
      TestExec t(1, Precision::kBF16);
      ops::Attention(t.ex, q.data(), c.Tq, c.Hq, ldq, f32_kv, c.Hkv, c.d, 0.125f, c.softcap,
                     begin.data(), end.data(), want.data(), ldo);
      ASSERT_TRUE(SetIsa(SupportedIsas().back()).ok());
    }
    ForEachIsa([&](const std::string&) {
      for (const ops::KvRows& kv : {f32_kv, bf16_kv}) {
        TestExec t(2, Precision::kBF16);
        std::vector<float> got(c.Tq * ldo);
        ops::Attention(t.ex, q.data(), c.Tq, c.Hq, ldq, kv, c.Hkv, c.d, 0.125f, c.softcap,
                       begin.data(), end.data(), got.data(), ldo);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], BF16ToF32(F32ToBF16(got[i]))) << "output not bf16 at " << i;
        }
        ExpectClose(got.data(), want.data(), mag.data(), c.Tq * ldo, 2e-2, 0.0,
                    kv.bf16 ? "bf16 KV" : "f32 KV");
      }
    });
  }
}

// The dot-product kernel itself (called directly, so the test cannot pass by falling back), on
// every ISA that has it (avx512: vdpbf16ps products; amx: AMX tiles): it equals the plain
// kernel of the same ISA within one bf16 rounding step.
TEST(AttentionTest, Bf16DotProductKernelEqualsPlainKernel) {
  const std::string saved = ActiveIsa();
  int tested = 0;
  for (const std::string& isa : SupportedIsas()) {
    ASSERT_TRUE(SetIsa(isa).ok());
    TestExec t(1, Precision::kBF16);
    const kernels::KernelTable& table = t.backend.table();
    if (table.attention_dot_items == nullptr) continue;
    ++tested;
    // d = 40: 20 pairs, a 16-pair step and a 4-pair tail; 37 queries: a last tile of 5 rows;
    // 45 keys: 3 groups of 16 (the last one partly zero) and d = 40 columns of V: 3 groups.
    const int64_t Tq = 37, Tk = 45, Hq = 4, Hkv = 2, d = 40, ld = Hkv * d;
    std::vector<float> q = RandomFloats(Tq * Hq * d, 61, -2.0f, 2.0f);
    std::vector<uint16_t> kb, vb;
    for (float x : RandomFloats(Tk * ld, 62, -2.0f, 2.0f)) kb.push_back(F32ToBF16(x));
    for (float x : RandomFloats(Tk * ld, 63)) vb.push_back(F32ToBF16(x));
    for (float& x : q) x = BF16ToF32(F32ToBF16(x));
    // K rows and V columns of each KV head, packed as ops::Attention packs them.
    const int64_t keys = kernels::AttentionDotKeys(Tk), key_words = keys * d / 2;
    const int64_t value_pairs = keys / 2, value_words = (d + 15) / 16 * 16 * value_pairs;
    std::vector<uint32_t> packed_k(Hkv * key_words), packed_v(Hkv * value_words);
    for (int64_t h = 0; h < Hkv; ++h) {
      cpu::PackBf16Rows(kb.data() + h * d, Tk, d, ld, packed_k.data() + h * key_words);
      cpu::PackBf16Columns(vb.data() + h * d, Tk, d, ld, value_pairs,
                           packed_v.data() + h * value_words);
    }
    std::vector<int32_t> begin(Tq), end(Tq);
    for (int64_t i = 0; i < Tq; ++i) {  // causal, with one empty range
      begin[i] = i == 5 ? 3 : 0;
      end[i] = i == 5 ? 3 : static_cast<int32_t>(Tk - Tq + i + 1);
    }
    std::vector<float> plain(Tq * Hq * d), dot(Tq * Hq * d, -9.0f), mag(Tq * Hq * d, 1.0f);
    const kernels::AttentionArgs args{
        q.data(), Tq, Hq,   Hq * d, kb.data(),    vb.data(),  true,         0,      Tk,  Hkv, ld,
        ld,       d,  0.3f, 0.0f,   begin.data(), end.data(), plain.data(), Hq * d, true};
    std::vector<float> scratch(kernels::AttentionScratchFloats(Tk, d));
    table.attention_items(args, 0, kernels::AttentionItemCount(Tq, Hq, Hkv), scratch.data());
    kernels::AttentionArgs dot_args = args;
    dot_args.out = dot.data();
    std::vector<float> dot_scratch(kernels::AttentionDotScratchFloats(Tk, d));
    const kernels::AttentionDotArgs packed{packed_k.data(), key_words,   packed_v.data(),
                                           value_words,     value_pairs, table.gemm_bf16_t};
    table.attention_dot_items(dot_args, packed, 0, kernels::AttentionDotItemCount(Tq, Hq),
                              dot_scratch.data());
    ExpectClose(dot.data(), plain.data(), mag.data(), Tq * Hq * d, 2e-2, 0.0,
                (isa + " dot vs plain").c_str());
    for (int64_t j = 0; j < Hq * d; ++j) EXPECT_EQ(dot[5 * Hq * d + j], 0.0f) << isa;  // empty
  }
  ASSERT_TRUE(SetIsa(saved).ok());
  if (tested == 0) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
}

}  // namespace
}  // namespace ocular

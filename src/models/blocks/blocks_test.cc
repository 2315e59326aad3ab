// The block kit against direct double-precision formulas (the math of the HF modules, written
// out loop by loop), on every ISA, at odd sizes; and the kit's plans against what a run takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/test_util.h"
#include "models/blocks/attention.h"
#include "models/blocks/decoder_layer.h"
#include "models/blocks/encoder_layer.h"
#include "models/blocks/mask.h"
#include "models/blocks/mlp.h"
#include "models/blocks/norm.h"
#include "models/blocks/rope.h"
#include "models/blocks/scratch.h"
#include "models/kv_cache.h"

namespace ocular::blocks {
namespace {

using kernel_test::ForEachIsa;
using kernel_test::RandomFloats;
using kernel_test::RandomWeights;
using kernel_test::TestExec;
using kernel_test::Weights;
using Vec = std::vector<double>;

// y[rows, n] = x[rows, k] · w[n, k]ᵀ (+ b)
Vec Linear(const Vec& x, int64_t rows, int64_t k, const Weights& w, const Weights* b) {
  const int64_t n = w.view.shape[0];
  Vec y(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double s = b ? b->f32[j] : 0.0;
      for (int64_t i = 0; i < k; ++i) s += x[r * k + i] * w.f32[j * k + i];
      y[r * n + j] = s;
    }
  }
  return y;
}

// Gemma RMSNorm (1 + w) over rows of `dim`.
Vec GemmaRms(const Vec& x, int64_t dim, const Weights& w, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / dim; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < dim; ++i) ms += x[r * dim + i] * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ms / dim + eps);
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * inv * (1 + w.f32[i]);
  }
  return y;
}

// rotate_half RoPE at position p with base theta over rows [heads, d].
void Rope(Vec& x, int64_t rows, int64_t heads, int64_t d, const std::vector<int64_t>& pos,
          double theta) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      double* v = &x[(r * heads + h) * d];
      for (int64_t k = 0; k < d / 2; ++k) {
        const double a = pos[r] / std::pow(theta, 2.0 * k / d);
        const double x1 = v[k], x2 = v[k + d / 2];
        v[k] = x1 * std::cos(a) - x2 * std::sin(a);
        v[k + d / 2] = x2 * std::cos(a) + x1 * std::sin(a);
      }
    }
  }
}

KvLayout Layout(int64_t kv_dim) {
  KvLayout l;
  l.kv_dim = kv_dim;
  l.window = {0};
  return l;
}

Vec ToVec(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

void ExpectNear(const std::vector<float>& got, const Vec& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * scale) << what << " element " << i;
  }
}

// The allowed keys of query i, one by one: causal within the window, or the same span.
bool Allowed(int64_t i, int64_t j, int window, const std::vector<Span>& spans) {
  for (const Span& s : spans) {
    if (s.begin <= i && i < s.end && s.begin <= j && j < s.end) return true;
  }
  return j <= i && (window <= 0 || j > i - window);
}

TEST(MaskTest, CausalKeyRangesAreTheAllowedKeys) {
  const std::vector<std::vector<Span>> cases = {{}, {{0, 5}}, {{2, 4}, {6, 11}}, {{3, 4}}};
  for (const std::vector<Span>& spans : cases) {
    for (int window : {0, 1, 3}) {
      for (int64_t start : {0, 2}) {
        const int64_t count = 12 - start;
        std::vector<int32_t> begin(count), end(count);
        CausalKeyRanges(start, count, window, spans, begin.data(), end.data());
        for (int64_t t = 0; t < count; ++t) {
          const int64_t i = start + t;
          for (int64_t j = 0; j < 14; ++j) {  // one range: exactly the allowed keys
            EXPECT_EQ(begin[t] <= j && j < end[t], Allowed(i, j, window, spans))
                << "i " << i << " j " << j << " window " << window;
          }
        }
      }
    }
  }
}

// A Gemma-3-like attention: GQA 3:1, odd hidden size, q/k norm, biases, softcap, RoPE.
struct AttentionCase {
  static constexpr int64_t H = 21, hq = 3, hkv = 1, d = 6, T = 7;
  AttentionSpec spec;
  Weights q = RandomWeights(DType::kF32, {hq * d, H}, 1),
          k = RandomWeights(DType::kF32, {hkv * d, H}, 2);
  Weights v = RandomWeights(DType::kF32, {hkv * d, H}, 3),
          o = RandomWeights(DType::kF32, {H, hq*d}, 4);
  Weights qb = RandomWeights(DType::kF32, {hq * d}, 5),
          kb = RandomWeights(DType::kF32, {hkv * d}, 6);
  Weights vb = RandomWeights(DType::kF32, {hkv * d}, 7), ob = RandomWeights(DType::kF32, {H}, 8);
  Weights qn = RandomWeights(DType::kF32, {d}, 9), kn = RandomWeights(DType::kF32, {d}, 10);
  Matrix qm = q.matrix(), km = k.matrix(), vm = v.matrix(), om = o.matrix();
  AttentionWeights w{&qm,      &km,      &vm,      &om,      &qb.view,
                     &kb.view, &vb.view, &ob.view, &qn.view, &kn.view};

  AttentionCase() {
    spec.hidden = H;
    spec.heads = hq;
    spec.kv_heads = hkv;
    spec.head_dim = d;
    spec.scale = 0.3f;
    spec.softcap = 2.5f;
    spec.rope.theta = 100.0f;
    spec.qk_norm = {NormKind::kGemmaRms, {}, {}, 1e-6f};
    spec.window = 3;
    spec.bidirectional = Bidirectional::kPrefix;
    spec.prompt_reads_fresh = true;
  }

  // The whole attention in double for one sequence of T rows at positions 0..T-1 + offset.
  Vec Reference(const Vec& x, int64_t prefix, int64_t offset) const {
    Vec Q = GemmaRms(Linear(x, T, H, q, &qb), d, qn, 1e-6);
    Vec K = GemmaRms(Linear(x, T, H, k, &kb), d, kn, 1e-6);
    const Vec V = Linear(x, T, H, v, &vb);
    std::vector<int64_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[t] = t + offset;
    Rope(Q, T, hq, d, pos, spec.rope.theta);
    Rope(K, T, hkv, d, pos, spec.rope.theta);
    const std::vector<Span> spans =
        prefix > 0 ? std::vector<Span>{{0, prefix}} : std::vector<Span>{};
    Vec ctx(T * hq * d, 0.0);
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t g = h / (hq / hkv);
        std::vector<double> p(T, 0.0);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          if (!Allowed(i, j, spec.window, spans)) continue;
          double s = 0;
          for (int64_t e = 0; e < d; ++e) s += Q[(i * hq + h) * d + e] * K[(j * hkv + g) * d + e];
          s *= spec.scale;
          s = spec.softcap * std::tanh(s / spec.softcap);
          p[j] = s;
          mx = std::max(mx, s);
        }
        for (int64_t j = 0; j < T; ++j) {
          const bool on = Allowed(i, j, spec.window, spans);
          p[j] = on ? std::exp(p[j] - mx) : 0.0;
          sum += p[j];
        }
        for (int64_t j = 0; j < T; ++j) {
          for (int64_t e = 0; e < d; ++e) {
            ctx[(i * hq + h) * d + e] += p[j] / sum * V[(j * hkv + g) * d + e];
          }
        }
      }
    }
    return Linear(ctx, T, hq * d, o, &ob);
  }
};

TEST(AttentionTest, SelfAttentionIsTheFormulaOnEveryIsa) {
  AttentionCase c;
  const std::vector<float> x = RandomFloats(c.T * c.H, 11);
  const Vec want = c.Reference(ToVec(x), /*prefix=*/4, /*offset=*/0);
  const KvLayout layout = Layout(c.hkv * c.d);
  ForEachIsa([&](const std::string&) {
    TestExec t(2);
    std::vector<std::byte> memory(layout.Bytes(c.T, KvDType::kF32));
    KvCache cache(layout, c.T, KvDType::kF32, memory.data());
    const Prompt prompt = TextPrompt(std::vector<int32_t>(c.T, 0), /*prefix_len=*/4);
    const SeqChunk seq{&cache, 0, c.T, &prompt};
    std::vector<int64_t> pos(c.T);
    for (int64_t i = 0; i < c.T; ++i) pos[i] = i;
    std::vector<float> out(c.T * c.H);
    SelfAttention(t.ex, c.spec, c.w, 0, Batch{{&seq, 1}, c.T}, {pos.data(), c.T, 1}, x.data(),
                  out.data(), {});
    ExpectNear(out, want, 2e-5, "self-attention");
    EXPECT_LE(t.arena.high_water(), SelfAttentionBytes(c.spec, c.T, c.T, 2));
  });
}

TEST(AttentionTest, DecodeStepsReadTheCacheAsThePromptDid) {
  // The prompt in one pass, then its last rows one by one from the cache: the same rows.
  AttentionCase c;
  c.spec.bidirectional = Bidirectional::kNone;
  const std::vector<float> x = RandomFloats(c.T * c.H, 12);
  const Vec want = c.Reference(ToVec(x), 0, 0);
  const KvLayout layout = Layout(c.hkv * c.d);
  TestExec t(1);
  std::vector<std::byte> memory(layout.Bytes(c.T, KvDType::kF32));
  KvCache cache(layout, c.T, KvDType::kF32, memory.data());
  const int64_t first = 4;
  std::vector<int64_t> pos(c.T);
  for (int64_t i = 0; i < c.T; ++i) pos[i] = i;
  std::vector<float> out(c.T * c.H);
  const SeqChunk prompt{&cache, 0, first};
  SelfAttention(t.ex, c.spec, c.w, 0, Batch{{&prompt, 1}, first}, {pos.data(), first, 1}, x.data(),
                out.data(), {});
  for (int64_t s = first; s < c.T; ++s) {
    const SeqChunk step{&cache, s, 1};
    SelfAttention(t.ex, c.spec, c.w, 0, Batch{{&step, 1}, 1}, {&pos[s], 1, 1}, x.data() + s * c.H,
                  out.data() + s * c.H, {});
  }
  ExpectNear(out, want, 2e-5, "prompt then decode");
}

TEST(AttentionTest, EncoderAttentionHonoursKeyOrderAndRanges) {
  // Keys taken in reverse order, each query seeing the first 3 of them: the last 3 rows.
  AttentionCase c;
  c.spec.rope = {};
  c.spec.softcap = 0;
  c.w.q_norm = c.w.k_norm = nullptr;
  const int64_t T = c.T;
  const std::vector<float> x = RandomFloats(T * c.H, 13);
  std::vector<int32_t> order(T), begin(T, 0), end(T, 3);
  for (int64_t i = 0; i < T; ++i) order[i] = static_cast<int32_t>(T - 1 - i);
  const Vec Q = Linear(ToVec(x), T, c.H, c.q, &c.qb), K = Linear(ToVec(x), T, c.H, c.k, &c.kb);
  const Vec V = Linear(ToVec(x), T, c.H, c.v, &c.vb);
  Vec ctx(T * c.hq * c.d, 0.0);
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t h = 0; h < c.hq; ++h) {
      std::vector<double> p;
      double mx = -1e300, sum = 0;
      for (int64_t j = T - 3; j < T; ++j) {
        double s = 0;
        for (int64_t e = 0; e < c.d; ++e) s += Q[(i * c.hq + h) * c.d + e] * K[j * c.d + e];
        p.push_back(s * c.spec.scale);
        mx = std::max(mx, p.back());
      }
      for (double& v : p) sum += (v = std::exp(v - mx));
      for (int64_t j = T - 3; j < T; ++j) {
        for (int64_t e = 0; e < c.d; ++e) {
          ctx[(i * c.hq + h) * c.d + e] += p[j - (T - 3)] / sum * V[j * c.d + e];
        }
      }
    }
  }
  const Vec want = Linear(ctx, T, c.hq * c.d, c.o, &c.ob);
  ForEachIsa([&](const std::string&) {
    TestExec t(2);
    std::vector<float> out(T * c.H);
    EncoderAttention(t.ex, c.spec, c.w, x.data(), T, {begin.data(), end.data(), order.data()},
                     out.data());
    ExpectNear(out, want, 2e-5, "encoder attention");
    EXPECT_LE(t.arena.high_water(), EncoderAttentionBytes(c.spec, T, true, 2));
  });
}

TEST(MlpTest, GatedAndTwoLayerAreTheFormulas) {
  const int64_t H = 13, I = 19, rows = 5;
  const Weights w1 = RandomWeights(DType::kF32, {I, H}, 21),
                up = RandomWeights(DType::kF32, {I, H}, 22);
  const Weights w2 = RandomWeights(DType::kF32, {H, I}, 23),
                b1 = RandomWeights(DType::kF32, {I}, 24);
  const Weights b2 = RandomWeights(DType::kF32, {H}, 25);
  const Matrix m1 = w1.matrix(), mu = up.matrix(), m2 = w2.matrix();
  const std::vector<float> x = RandomFloats(rows * H, 26, -2, 2);
  auto act = [](MlpAct a, double v) {
    switch (a) {
      case MlpAct::kGeluTanh:
        return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      case MlpAct::kGeluErf:
        return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      case MlpAct::kSilu:
        return v / (1 + std::exp(-v));
      case MlpAct::kQuickGelu:
        return v / (1 + std::exp(-1.702 * v));
    }
    return 0.0;
  };
  for (MlpAct a : {MlpAct::kGeluTanh, MlpAct::kGeluErf, MlpAct::kSilu, MlpAct::kQuickGelu}) {
    for (bool gated : {true, false}) {
      SCOPED_TRACE(testing::Message() << "act " << static_cast<int>(a) << " gated " << gated);
      Vec h = Linear(ToVec(x), rows, H, w1, gated ? nullptr : &b1);
      const Vec u = Linear(ToVec(x), rows, H, up, nullptr);
      for (size_t i = 0; i < h.size(); ++i) h[i] = act(a, h[i]) * (gated ? u[i] : 1.0);
      const Vec want = Linear(h, rows, I, w2, gated ? nullptr : &b2);
      const MlpSpec spec{H, I, a, gated};
      const MlpWeights mw = gated ? MlpWeights{&m1, nullptr, &mu, &m2, nullptr}
                                  : MlpWeights{&m1, &b1.view, nullptr, &m2, &b2.view};
      ForEachIsa([&](const std::string&) {
        TestExec t(2);
        std::vector<float> out(rows * H);
        Mlp(t.ex, spec, mw, x.data(), rows, out.data());
        ExpectNear(out, want, 1e-5, "mlp");
        EXPECT_LE(t.arena.high_water(), MlpBytes(spec, rows, 2));
      });
    }
  }
}

TEST(NormTest, TheThreeNormsAreTheFormulas) {
  const int64_t rows = 3, dim = 11;
  const Weights w = RandomWeights(DType::kF32, {dim}, 31),
                b = RandomWeights(DType::kF32, {dim}, 32);
  const std::vector<float> x = RandomFloats(rows * dim, 33, -3, 3);
  for (NormKind kind : {NormKind::kGemmaRms, NormKind::kLlamaRms, NormKind::kLayer}) {
    Vec want(rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, ms = 0, var = 0;
      for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i] / double(dim);
      for (int64_t i = 0; i < dim; ++i) ms += double(x[r * dim + i]) * x[r * dim + i] / dim;
      for (int64_t i = 0; i < dim; ++i) var += std::pow(x[r * dim + i] - mean, 2) / dim;
      for (int64_t i = 0; i < dim; ++i) {
        const double v = x[r * dim + i];
        want[r * dim + i] = kind == NormKind::kGemmaRms ? v / std::sqrt(ms + 1e-6) * (1 + w.f32[i])
                            : kind == NormKind::kLlamaRms
                                ? v / std::sqrt(ms + 1e-6) * w.f32[i]
                                : (v - mean) / std::sqrt(var + 1e-6) * w.f32[i] + b.f32[i];
      }
    }
    for (Precision p : {Precision::kF32, Precision::kBF16}) {
      ForEachIsa([&](const std::string&) {
        TestExec t(1, p);
        std::vector<float> out(rows * dim);
        ApplyNorm(t.ex, {kind, &w.view, &b.view, 1e-6f}, x.data(), rows, dim, out.data());
        ExpectNear(out, want, p == Precision::kF32 ? 1e-6 : 2e-2, "norm");
        EXPECT_LE(t.arena.high_water(), NormBytes(kind, dim));
      });
    }
  }
}

TEST(RopeTest, InvFreqIsHfsDefaultWithoutScaling) {
  const std::vector<float> inv = RopeInvFreq(10, 500000.0f, {});
  ASSERT_EQ(inv.size(), 5u);
  for (int k = 0; k < 5; ++k) EXPECT_FLOAT_EQ(inv[k], 1.0f / std::pow(500000.0f, 2.0f * k / 10));
}

// Multi-axis RoPE (M-RoPE's mrope_section, the ViT's 2-D rotary): frequency k turns by its
// axis's position, as apply_multimodal_rotary_pos_emb / apply_rotary_pos_emb_vision compute it.
TEST(RopeTest, MultiAxisRopeIsTheFormulaOnEveryIsa) {
  const int64_t rows = 7, heads = 3, d = 24, half = d / 2;
  const int sections[] = {2, 4, 6};
  const AxesRope mrope = MultimodalRope(d, 1000.0f, sections);
  const AxesRope vision = VisionRope2d(d, 10000.0f);
  ASSERT_EQ(mrope.axis_of.size(), static_cast<size_t>(half));
  EXPECT_EQ(mrope.axis_of[1], 0);
  EXPECT_EQ(mrope.axis_of[2], 1);
  EXPECT_EQ(mrope.axis_of[11], 2);
  EXPECT_EQ(vision.axis_of[half / 2 - 1], 0);
  EXPECT_EQ(vision.axis_of[half / 2], 1);
  EXPECT_FLOAT_EQ(vision.inv_freq[half / 2], 1.0f);  // each axis starts at theta^0
  for (const AxesRope* r : {&mrope, &vision}) {
    std::vector<int64_t> pos(static_cast<size_t>(r->axes * rows));
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int64_t>((i * 7) % 11);
    const std::vector<float> x = RandomFloats(rows * heads * d, 21);
    Vec want = ToVec(x);
    for (int64_t t = 0; t < rows; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        double* v = &want[(t * heads + h) * d];
        for (int64_t k = 0; k < half; ++k) {
          const double a = static_cast<double>(pos[r->axis_of[k] * rows + t]) * r->inv_freq[k];
          const double x1 = v[k], x2 = v[k + half];
          v[k] = x1 * std::cos(a) - x2 * std::sin(a);
          v[k + half] = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
    }
    ForEachIsa([&](const std::string&) {
      TestExec t(1);
      std::vector<float> got = x;
      ApplyRope(t.ex, r->spec(), Positions{pos.data(), rows, r->axes}, got.data(), rows, heads, d,
                heads * d);
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
    });
  }
}

TEST(ScratchTest, CountingAndTakingAgree) {
  Arena arena(4096);
  size_t taken = 0;
  {
    Scratch s(arena);
    s.Floats(3);
    s.Take<int64_t>(5);
    taken = arena.mark();
    EXPECT_EQ(s.bytes(), taken);
  }
  EXPECT_EQ(arena.mark(), 0u);  // returned on destruction
  Scratch count;
  EXPECT_EQ(count.Floats(3), nullptr);
  count.Take<int64_t>(5);
  EXPECT_EQ(count.bytes(), taken);
}

TEST(DecoderLayerTest, PlanCoversTheRun) {
  // A sandwich layer over a two-sequence batch: the run stays inside its plan.
  AttentionCase c;
  DecoderLayerSpec s;
  s.attn = c.spec;
  s.sandwich = true;
  s.mlp = {c.H, 9, MlpAct::kGeluTanh, true};
  const Weights gate = RandomWeights(DType::kF32, {9, c.H}, 41),
                up = RandomWeights(DType::kF32, {9, c.H}, 42);
  const Weights down = RandomWeights(DType::kF32, {c.H, 9}, 43),
                n = RandomWeights(DType::kF32, {c.H}, 44);
  const Matrix g = gate.matrix(), u = up.matrix(), dn = down.matrix();
  DecoderLayerWeights w{c.w, {&g, nullptr, &u, &dn, nullptr}, &n.view, &n.view, &n.view, &n.view};
  const KvLayout layout = Layout(c.hkv * c.d);
  ForEachIsa([&](const std::string&) {
    TestExec t(2);
    std::vector<std::byte> m1(layout.Bytes(c.T, KvDType::kF32)),
        m2(layout.Bytes(c.T, KvDType::kF32));
    KvCache a(layout, c.T, KvDType::kF32, m1.data()), b(layout, c.T, KvDType::kF32, m2.data());
    const Prompt pa = TextPrompt(std::vector<int32_t>(4, 0), 2);
    const SeqChunk seqs[] = {{&a, 0, 4, &pa}, {&b, 0, 3}};
    std::vector<float> x = RandomFloats(7 * c.H, 45);
    DecoderLayer(t.ex, s, w, 0, Batch{seqs, 7}, x.data(), {});
    EXPECT_LE(t.arena.high_water(), DecoderLayerBytes(s, 7, c.T, 2));
    for (float v : x) ASSERT_TRUE(std::isfinite(v));
  });
}

}  // namespace
}  // namespace ocular::blocks

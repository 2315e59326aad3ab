// What quantization costs, measured: each tiny golden checkpoint converted by QuantizeModel
// (`ocular quantize`) to q8_0 / q4_0 / q4_k_m, against the unquantized model (which matches
// transformers to 1e-5), both with f32 activations, teacher-forced on the golden cases'
// prompts and reference tokens. Per position: top-1 agreement and KL(ref || quant) of the
// next-token distributions, over every prompt and decode position. Prints the table that
// docs/quantization.md reports.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "ocular/quantize.h"
#include "support/fixture.h"
#include "support/harness.h"

namespace ocular {
namespace {

using testing_support::Harness;

struct Agreement {
  int positions = 0, top1 = 0;
  double kl_sum = 0, kl_max = 0;
};

// KL(p || q) of softmax(a) and softmax(b), in double.
double KlDivergence(const float* a, const float* b, int64_t n) {
  const double ma = *std::max_element(a, a + n), mb = *std::max_element(b, b + n);
  double za = 0, zb = 0;
  for (int64_t i = 0; i < n; ++i) {
    za += std::exp(a[i] - ma);
    zb += std::exp(b[i] - mb);
  }
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double lp = a[i] - ma - std::log(za), lq = b[i] - mb - std::log(zb);
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(kl, 0.0);
}

void Accumulate(const std::vector<float>& ref, const std::vector<float>& q, int64_t V, Agreement* a) {
  for (size_t r = 0; r * V < ref.size(); ++r) {
    const float* x = ref.data() + r * V;
    const float* y = q.data() + r * V;
    a->top1 += (std::max_element(x, x + V) - x) == (std::max_element(y, y + V) - y);
    const double kl = KlDivergence(x, y, V);
    a->kl_sum += kl;
    a->kl_max = std::max(a->kl_max, kl);
    ++a->positions;
  }
}

struct Target {
  const char* type;
  double min_top1, max_mean_kl;
};
// Targets of the quantization issue where it sets them (q8_0: top-1 >= 99 %, mean KL <= 1e-3;
// q4_k_m: top-1 >= 95 %); q4_0 is reported, with a looser floor.
constexpr Target kTargets[] = {{"f16", 0.99, 1e-3}, {"bf16", 0.99, 1e-3}, {"q8_0", 0.99, 1e-3}, {"q4_k_m", 0.95, 1e-2}, {"q4_0", 0.85, 5e-2}};

TEST(QuantQuality, TopOneAndKlAgainstTheUnquantizedModel) {
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  auto manifest = fixture::GoldenManifest::Load();
  ASSERT_TRUE(manifest.ok());
  const Precision f32 = Precision::kF32;
  std::printf("%-9s %-7s %9s %7s %11s %11s %9s\n", "model", "type", "positions", "top-1",
              "mean KL", "max KL", "fallbacks");
  for (const char* name : {"pg1", "pg2", "pg2-bf16"}) {
    const fixture::GoldenCheckpoint* ck = manifest->Find(name);
    ASSERT_NE(ck, nullptr);
    auto ref = Harness::Load(ck->model_dir, &f32);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (const Target& target : kTargets) {
      SCOPED_TRACE(std::string(name) + " " + target.type);
      QuantizeOptions o;
      o.input = ck->model_dir;
      o.output = (std::filesystem::temp_directory_path() /
                  (std::string("ocular_quality_") + name + "_" + target.type + "_" +
                   std::to_string(::getpid()) + ".gguf")).string();
      o.type = target.type;
      o.threads = 1;
      auto report = QuantizeModel(o);
      ASSERT_TRUE(report.ok()) << report.status().ToString();
      auto q = Harness::Load(o.output, &f32);
      std::filesystem::remove(o.output);
      ASSERT_TRUE(q.ok()) << q.status().ToString();
      Agreement a;
      for (const fixture::GoldenCase& c : ck->cases) {
        auto taps = fixture::GoldenTaps::Open(c.path);
        ASSERT_TRUE(taps.ok());
        const std::vector<int32_t> prompt = *taps->Ids("input_ids");
        const std::vector<int32_t> gen = *taps->Ids("generated_ids");
        const TensorView* pv = taps->file().Find("pixel_values");
        Accumulate(testing_support::TeacherForcedLogits(**ref, prompt, gen, pv),
                   testing_support::TeacherForcedLogits(**q, prompt, gen, pv),
                   (*ref)->model->spec().vocab_size, &a);
      }
      const double top1 = static_cast<double>(a.top1) / a.positions, mean_kl = a.kl_sum / a.positions;
      std::printf("%-9s %-7s %9d %6.1f%% %11.2e %11.2e %9d\n", name, target.type, a.positions,
                  100 * top1, mean_kl, a.kl_max, report->fallbacks);
      EXPECT_GE(a.positions, 100);
      EXPECT_GE(top1, target.min_top1);
      EXPECT_LE(mean_kl, target.max_mean_kl);
    }
  }
}

}  // namespace
}  // namespace ocular

// PaliGemma 1/2 against transformers, tap by tap (fixtures: tools/reference/make_goldens.py).
// Inputs are locked: input_ids and pixel_values come from the golden file, so this test checks
// the model alone; the tokenizer and image pipeline have their own reference tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/generator.h"
#include "runtime/parity.h"
#include "runtime/recorder.h"
#include "support/cases.h"
#include "support/fixture.h"
#include "support/golden.h"
#include "support/harness.h"
#include "support/prompts.h"

namespace ocular {
namespace {

struct Checkpoint {
  const char* name;
  double tolerance;  // relative error per tap (docs/testing.md)
  // Run from a GGUF file that `ocular quantize` writes in the checkpoint's own float type:
  // the GGUF reader, name table and embedded config/tokenizer must change nothing.
  bool via_gguf = false;
};

// f32 models must match to 1e-5. The bf16 model runs in bf16 in HF; ocular rounds its
// activations at the same points (kernels/bf16_emulation.h) and matches it bit for bit on
// these shapes. 1e-3 leaves room for an accumulation-order difference flipping a bf16
// rounding (one bf16 ulp is 2^-8 ≈ 4e-3 relative) — still 10× under the 1e-2.
constexpr Checkpoint kCheckpoints[] = {{"pg1", 1e-5},       {"pg2", 1e-5},
                                       {"pg2-bf16", 1e-3},  {"pg1", 1e-5, true},
                                       {"pg2", 1e-5, true}, {"pg2-bf16", 1e-3, true}};

using testing_support::FloatGguf;
using testing_support::Ids;
using testing_support::ToTensor;

class GoldenTest : public testing::TestWithParam<Checkpoint> {};

TEST_P(GoldenTest, EveryTapLogitsAndGreedyDecodeMatchTransformers) {
  const Checkpoint ck = GetParam();
  auto manifest = fixture::GoldenManifest::Load();
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  const fixture::GoldenCheckpoint* golden_ck = manifest->Find(ck.name);
  ASSERT_NE(golden_ck, nullptr) << "no golden fixtures for " << ck.name;
  ASSERT_GE(golden_ck->cases.size(), 9u);
  if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
  const std::string model =
      ck.via_gguf ? FloatGguf(golden_ck->model_dir, ck.name, std::string(ck.name) == "pg2-bf16")
                  : golden_ck->model_dir;
  auto h = testing_support::Harness::Load(model);
  if (ck.via_gguf) std::filesystem::remove(model);  // mapped: the data stays until unmapped
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  for (const fixture::GoldenCase& c : golden_ck->cases) {
    SCOPED_TRACE(c.path);
    auto taps = fixture::GoldenTaps::Open(c.path);
    ASSERT_TRUE(taps.ok()) << taps.status().ToString();
    const SafetensorsFile* golden = &taps->file();
    const TensorView* ids = golden->Find("input_ids");
    const TensorView* gen = golden->Find("generated_ids");
    ASSERT_TRUE(ids && gen);
    const TensorView* pv = golden->Find("pixel_values");
    Tensor pixels;
    if (pv) pixels = ToTensor(*pv);

    GenerationRequest req;
    req.prompt = testing_support::FixturePrompt((*h)->model->spec(), Ids(*ids), &pixels);
    req.max_new_tokens = static_cast<int>(gen->numel());
    req.record_prompt_logits = true;
    req.record_decode_logits = true;
    RecordingTracer tracer;
    auto out = (*h)->Generate(req, &tracer);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    tracer.Add("decode_logits", out->decode_logits);

    // Every float tap the reference recorded, in forward order: report the first divergence.
    const int compared = testing_support::ExpectEveryTapWithin(*taps, tracer, ck.tolerance);
    EXPECT_GE(compared, 10);
    std::vector<int32_t> want = Ids(*gen);
    EXPECT_EQ(out->generated, want) << "greedy continuation differs";
  }
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, GoldenTest, testing::ValuesIn(kCheckpoints),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           if (info.param.via_gguf) n += "_gguf";
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace ocular

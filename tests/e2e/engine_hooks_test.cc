// The public API the CLI builds its user experience on: the progress callback (stage order,
// one report per generated token, no allocation in the decode loop), stop strings (cut before
// the stop, never streamed even when it spans pieces) and BuildPrompt (the prompt Generate
// runs, for `ocular tokenize --prompt`).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ocular/engine.h"
#include "support/count_allocations.h"

namespace ocular {
namespace {

constexpr char kModel[] = "models/shapes-paligemma";
constexpr char kImage[] = "models/shapes-paligemma/sample.png";

std::unique_ptr<Engine> LoadShapes() {
  auto engine = Engine::Load(kModel, {});
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(*engine) : nullptr;
}

TEST(EngineHooks, ProgressReportsEveryStageInOrderAndEachToken) {
  auto engine = LoadShapes();
  ASSERT_NE(engine, nullptr);
  std::vector<Progress> seen;
  seen.reserve(256);
  GenerateOptions o;
  o.max_tokens = 8;
  o.stop_at_eos = false;
  o.on_progress = [&](const Progress& p) { seen.push_back(p); };
  auto r = engine->Generate({kImage, kImage}, "caption en", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int64_t T = static_cast<int64_t>(r->prompt_ids.size());
  std::vector<std::tuple<Stage, int64_t, int64_t>> want = {
      {Stage::kImages, 0, 2},  {Stage::kImages, 1, 2}, {Stage::kImages, 2, 2},
      {Stage::kEncode, 0, 2},  {Stage::kEncode, 2, 2}, {Stage::kPrefill, 0, T},
      {Stage::kPrefill, T, T}, {Stage::kDecode, 0, 8}};
  for (int64_t k = 1; k <= 8; ++k) want.emplace_back(Stage::kDecode, k, 8);
  ASSERT_EQ(seen.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(seen[i].stage, std::get<0>(want[i]));
    EXPECT_EQ(seen[i].done, std::get<1>(want[i]));
    EXPECT_EQ(seen[i].total, std::get<2>(want[i]));
    EXPECT_GE(seen[i].elapsed_ms, 0.0);
  }
  EXPECT_STREQ(StageName(Stage::kPrefill), "prefill");
}

TEST(EngineHooks, TextOnlyPromptSkipsTheImageStages) {
  auto engine = LoadShapes();
  ASSERT_NE(engine, nullptr);
  std::vector<Stage> stages;
  stages.reserve(64);
  GenerateOptions o;
  o.max_tokens = 2;
  o.on_progress = [&](const Progress& p) { stages.push_back(p.stage); };
  ASSERT_TRUE(engine->Generate({}, "caption en", o).ok());
  ASSERT_FALSE(stages.empty());
  EXPECT_EQ(stages.front(), Stage::kPrefill);
  for (Stage s : stages) EXPECT_TRUE(s == Stage::kPrefill || s == Stage::kDecode);
}

// The decode loop stays allocation-free with a progress listener: between two per-token
// reports there is one decode step, which allocates nothing (no text callback, no tracer).
TEST(EngineHooks, DecodeLoopWithProgressAllocatesNothing) {
  if (!OCULAR_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are counted without sanitizers";
  auto engine = LoadShapes();
  ASSERT_NE(engine, nullptr);
  std::vector<int64_t> at_token;
  at_token.reserve(64);
  GenerateOptions o;
  o.max_tokens = 12;
  o.stop_at_eos = false;
  o.on_progress = [&](const Progress& p) {
    if (p.stage == Stage::kDecode && p.done > 0) at_token.push_back(g_allocations.load());
  };
  ASSERT_TRUE(engine->Generate({kImage}, "caption en", o).ok());
  ASSERT_EQ(at_token.size(), 12u);
  EXPECT_EQ(at_token.back() - at_token.front(), 0) << "allocations in 11 decode steps";
}

TEST(EngineHooks, StopStringsCutTheAnswerAndAreNeverStreamed) {
  auto engine = LoadShapes();
  ASSERT_NE(engine, nullptr);
  GenerateOptions o;
  o.max_tokens = 32;
  auto full = engine->Generate({kImage}, "caption en", o);
  ASSERT_TRUE(full.ok());
  // the model's greedy answer (= transformers', testdata/tasks/shapes_reference.json)
  ASSERT_EQ(full->text, "a red square, a blue star and an orange triangle");
  struct Case {
    std::vector<std::string> stop;
    std::string text, reason;
  };
  const Case cases[] = {
      {{" and"}, "a red square, a blue star", "stop"},
      {{"d s"}, "a re", "stop"},               // spans the pieces " red" and " square"
      {{"star and an", " red"}, "a", "stop"},  // the earliest stop wins
      {{"a red square, a blue star and an orange triangle!"}, full->text, "eos"},  // held back
      {{"zebra", ""}, full->text, "eos"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.stop[0]);
    o.stop = c.stop;
    std::string streamed;
    auto r = engine->Generate({kImage}, "caption en", o, [&](const std::string& piece) {
      streamed += piece;
      return true;
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->text, c.text);
    EXPECT_EQ(streamed, c.text);
    EXPECT_EQ(r->finish_reason, c.reason);
    // Without a text callback the result is the same.
    auto quiet = engine->Generate({kImage}, "caption en", o);
    ASSERT_TRUE(quiet.ok());
    EXPECT_EQ(quiet->text, c.text);
    EXPECT_EQ(quiet->finish_reason, c.reason);
  }
}

TEST(EngineHooks, BuildPromptIsThePromptGenerateRuns) {
  auto engine = LoadShapes();
  ASSERT_NE(engine, nullptr);
  for (bool separate : {false, true}) {
    GenerateOptions o;
    o.max_tokens = 1;
    o.separate_newline = separate;
    auto p = engine->BuildPrompt(1, "answer en what color is the star?", o);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    auto r = engine->Generate({kImage}, "answer en what color is the star?", o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(p->ids, r->prompt_ids);
    EXPECT_EQ(p->prefix_len, static_cast<int64_t>(p->ids.size()));
  }
  EXPECT_FALSE(engine->BuildPrompt(-1, "x", {}).ok());
  EXPECT_FALSE(engine->BuildPrompt(0, "\xff", {}).ok());
}

}  // namespace
}  // namespace ocular

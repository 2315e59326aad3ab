// The Engine's continuous batching and image-feature cache as users meet them: Generate called
// from many threads answers what each request answers alone, Stats() counts the batched steps,
// and an image seen before skips the vision encoder (same answer, no encode stage).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "ocular/engine.h"

namespace ocular {
namespace {

constexpr char kModel[] = "models/shapes-paligemma";
constexpr char kImage[] = "models/shapes-paligemma/sample.png";

struct Case {
  bool image;
  const char* prompt;
  float temperature;
};

TEST(EngineBatching, ConcurrentRequestsAnswerAsAlone) {
  EngineOptions eo;
  eo.max_batch = 4;
  auto engine = Engine::Load(kModel, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const Case cases[] = {{true, "caption en", 0},
                        {true, "detect star", 0},
                        {false, "caption en", 0},
                        {true, "answer en what is red?", 0.7f},
                        {true, "detect square ; triangle", 0},
                        {false, "detect star", 0.9f}};
  auto run = [&](const Case& c, int i) {
    GenerateOptions o;
    o.max_tokens = 24;
    o.temperature = c.temperature;
    o.seed = 7 + i;
    std::vector<ImageInput> images;
    if (c.image) images.emplace_back(kImage);
    return (*engine)->Generate(images, c.prompt, o);
  };
  const int n = static_cast<int>(std::size(cases));
  std::vector<std::string> alone;
  for (int i = 0; i < n; ++i) {
    auto r = run(cases[i], i);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    alone.push_back(r->raw_text);
  }
  std::vector<std::string> together(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto r = run(cases[i], i);
      together[i] = r.ok() ? r->raw_text : "error: " + r.status().ToString();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(together[i], alone[i]) << cases[i].prompt;
  const EngineStats s = (*engine)->Stats();
  ASSERT_EQ(s.decode_steps_by_batch.size(), 5u);
  EXPECT_EQ(s.prefills, static_cast<uint64_t>(2 * n));
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_bytes_in_use, 0u);
}

TEST(EngineBatching, RepeatedImageSkipsTheVisionEncoder) {
  EngineOptions eo;
  eo.image_cache_bytes = 16u << 20;
  auto engine = Engine::Load(kModel, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  std::string first;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    bool encoded = false;
    GenerateOptions o;
    o.max_tokens = 24;
    o.on_progress = [&](const Progress& p) { encoded |= p.stage == Stage::kEncode; };
    auto r = (*engine)->Generate({kImage}, round == 0 ? "detect star" : "caption en", o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(encoded, round == 0);
  }
  EngineStats s = (*engine)->Stats();
  EXPECT_EQ(s.images_encoded, 1u);
  EXPECT_EQ(s.image_cache_misses, 1u);
  EXPECT_EQ(s.image_cache_hits, 1u);
  EXPECT_EQ(s.image_cache_entries, 1u);
  EXPECT_GT(s.image_cache_bytes, 0u);
  // A cached answer is the uncached answer.
  auto uncached = Engine::Load(kModel, {});
  ASSERT_TRUE(uncached.ok());
  GenerateOptions o;
  o.max_tokens = 24;
  auto a = (*engine)->Generate({kImage}, "detect star", o);
  auto b = (*uncached)->Generate({kImage}, "detect star", o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->raw_text, b->raw_text);
  EXPECT_EQ((*engine)->Stats().image_cache_hits, 2u);
}

// A JSON Schema whose pattern makes the grammar's states sets of thousands of positions
// (overlapping bounded repetitions, as json_schema_fuzz found) fails its own request with a
// clear error once one token needs more than the matcher's work budget, while a request
// batched with it answers as it does alone.
TEST(EngineBatching, TooComplexSchemaFailsOnlyItsOwnRequest) {
  std::string pattern = "^(?:";
  for (int i = 1; i <= 12; ++i) {
    pattern += (i > 1 ? "|.{" : ".{") + std::to_string(i) + "," + std::to_string(i + 12) + "}";
  }
  pattern += "){12}$";
  EngineOptions eo;
  eo.max_batch = 2;
  auto engine = Engine::Load(kModel, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  GenerateOptions plain;
  plain.max_tokens = 40;
  auto alone = (*engine)->Generate({kImage}, "caption en", plain);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  GenerateOptions hard = plain;
  hard.json_schema = R"({"type": "string", "pattern": ")" + pattern + R"("})";
  StatusOr<GenerateResult> failed = Status::Ok(), batched = Status::Ok();
  std::thread t([&] { failed = (*engine)->Generate({kImage}, "caption en", hard); });
  batched = (*engine)->Generate({kImage}, "caption en", plain);
  t.join();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(failed.status().message().find("[grammar] the schema or pattern is too complex"),
            std::string::npos)
      << failed.status().ToString();
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  EXPECT_EQ(batched->raw_text, alone->raw_text);
  EXPECT_EQ((*engine)->Stats().running, 0);
}

}  // namespace
}  // namespace ocular

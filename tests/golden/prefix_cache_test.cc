// The prompt K/V cache (EngineOptions::prefix_cache_bytes, runtime/prefix_cache.h) on the tiny
// checkpoints of the causal families: a chat's next turn prefills only its new rows over the
// last turn's cached K/V and gets the answer the cache-off engine gives; two different images
// behind the same image placeholder ids never share K/V.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "ocular/chat.h"
#include "ocular/engine.h"
#include "support/harness.h"
#include "support/pattern_image.h"

namespace ocular {
namespace {

ImageInput Image(int seed) {
  return ImageInput::FromBytes(testing_support::PatternBmp(60, 40, seed),
                               "seed" + std::to_string(seed) + ".bmp");
}

// The conversation up to the user's `turns`-th turn: the first turn shows the image, the
// assistant's answers are fixed text.
std::vector<ChatMessage> Chat(int turns, const std::string& marker) {
  const char* questions[] = {"What is in the image?", "What colour is it?", "Is it large?",
                             "Describe it once more."};
  const char* answers[] = {"A small square.", "Mostly green.", "No, it is tiny."};
  std::vector<ChatMessage> m;
  for (int t = 0; t < turns; ++t) {
    m.push_back(UserTurn(questions[t], t == 0 ? 1 : 0, marker));
    if (t + 1 < turns) m.push_back(ChatMessage::Text("assistant", answers[t]));
  }
  return m;
}

// The tiny Gemma 3 checkpoint with a sliding window of `window` tokens instead of 3 (the cache
// serves prompts within the window only), in a folder of its own.
std::string Gemma3WithWindow(int window) {
  namespace fs = std::filesystem;
  const fs::path from = "testdata/tiny/gemma3";
  const fs::path to =
      fs::temp_directory_path() /
      ("ocular_prefix_cache_gemma3_" + std::to_string(getpid()) + "_" + std::to_string(window));
  fs::create_directories(to);
  for (const auto& f : fs::directory_iterator(from)) {
    fs::copy_file(f.path(), to / f.path().filename(), fs::copy_options::overwrite_existing);
  }
  std::ifstream in(from / "config.json");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "\"sliding_window\": 3,";
  const size_t at = config.find(key);
  if (at == std::string::npos) return "";
  config.replace(at, key.size(), "\"sliding_window\": " + std::to_string(window) + ",");
  std::ofstream(to / "config.json") << config;
  return to.string();
}

// A checkpoint folder for a test parameter: "gemma3-window512" is made here.
std::string ModelDir(const std::string& param) {
  return param == "gemma3-window512" ? Gemma3WithWindow(512) : "testdata/tiny/" + param;
}

GenerateOptions Greedy() {
  GenerateOptions o;
  o.max_tokens = 6;
  o.stop_at_eos = false;
  return o;
}

class PrefixCacheTest : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (testing_support::RequestedIsaUnavailable()) GTEST_SKIP() << "ISA not available";
    dir_ = ModelDir(GetParam());
    ASSERT_FALSE(dir_.empty());
    auto off = Engine::Load(dir_, {});
    ASSERT_TRUE(off.ok()) << off.status().ToString();
    off_ = std::move(*off);
    EngineOptions o;
    o.prefix_cache_bytes = size_t{64} << 20;
    auto on = Engine::Load(dir_, o);
    ASSERT_TRUE(on.ok()) << on.status().ToString();
    on_ = std::move(*on);
    marker_ = on_->Info().image_marker;
  }
  void TearDown() override {
    off_.reset();
    on_.reset();
    if (std::string(GetParam()) == "gemma3-window512" && !dir_.empty()) {
      std::filesystem::remove_all(dir_);  // the copy ModelDir made
    }
  }
  GenerateResult Run(Engine& e, const ImageInput& image, int turns) {
    auto r = e.GenerateChat({image}, Chat(turns, marker_), Greedy());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : GenerateResult{};
  }
  std::string dir_;
  std::unique_ptr<Engine> off_, on_;
  std::string marker_;
};

// Turns 2-4 start from the previous turn's cached K/V (the image is not even encoded again) and
// give the cache-off answer.
TEST_P(PrefixCacheTest, FourTurnChatWithAnImageGivesTheCacheOffAnswers) {
  const ImageInput image = Image(1);
  for (int turns = 1; turns <= 4; ++turns) {
    SCOPED_TRACE(turns);
    const GenerateResult want = Run(*off_, image, turns);
    const GenerateResult got = Run(*on_, image, turns);
    ASSERT_EQ(got.prompt_ids, want.prompt_ids);
    EXPECT_EQ(got.output_ids, want.output_ids);
  }
  const EngineStats s = on_->Stats();
  EXPECT_EQ(s.prefix_cache_hits, 3u);
  EXPECT_EQ(s.prefix_cache_misses, 1u);
  EXPECT_GT(s.prefix_cache_tokens_reused, 0u);
  EXPECT_EQ(s.images_encoded, 1u) << "a reused turn needs no image features";
  EXPECT_EQ(s.prefix_cache_entries, 4u);
  EXPECT_GT(s.prefix_cache_bytes, 0u);
  EXPECT_EQ(s.prefix_cache_max_bytes, size_t{64} << 20);
}

// The same conversation with another image of the same size: the same ids, placeholders
// included, yet the second image's turns never reuse the first one's K/V.
TEST_P(PrefixCacheTest, TwoImagesBehindTheSamePlaceholdersNeverShareKv) {
  const ImageInput a = Image(1), b = Image(2);
  const GenerateResult want_a = Run(*off_, a, 2);
  const GenerateResult want_b = Run(*off_, b, 2);
  ASSERT_EQ(want_a.prompt_ids, want_b.prompt_ids) << "HINT: the images must give the same ids";
  Run(*on_, a, 1);  // cached: turn 1 with image a
  const GenerateResult got_a = Run(*on_, a, 2);
  EXPECT_EQ(got_a.output_ids, want_a.output_ids);
  const EngineStats before = on_->Stats();
  EXPECT_EQ(before.prefix_cache_hits, 1u) << "the same image's next turn reuses its K/V";
  const GenerateResult got_b1 = Run(*on_, b, 1);
  const GenerateResult got_b = Run(*on_, b, 2);
  EXPECT_EQ(got_b.output_ids, want_b.output_ids);
  EXPECT_EQ(got_b1.output_ids, Run(*off_, b, 1).output_ids);
  const EngineStats after = on_->Stats();
  // b's first turn found nothing (a's entries hold another image); its second turn reused b's.
  EXPECT_EQ(after.prefix_cache_hits, before.prefix_cache_hits + 1);
  EXPECT_EQ(after.images_encoded, before.images_encoded + 1);
}

INSTANTIATE_TEST_SUITE_P(CausalFamilies, PrefixCacheTest,
                         testing::Values("gemma3-window512", "mllama", "qwen2vl", "qwen25vl",
                                         "qwen3vl"),
                         [](const testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// Two requests (request(engine, i), i = 0, 1) on `dir` with the cache on give the cache-off
// answers, and nothing is cached or reused.
void ExpectNeverCached(const std::string& dir,
                       const std::function<StatusOr<GenerateResult>(Engine&, int)>& request) {
  EngineOptions o;
  o.prefix_cache_bytes = size_t{64} << 20;
  auto on = Engine::Load(dir, o);
  auto off = Engine::Load(dir, {});
  ASSERT_TRUE(on.ok() && off.ok());
  for (int i = 0; i < 2; ++i) {
    auto got = request(**on, i);
    auto want = request(**off, i);
    ASSERT_TRUE(got.ok() && want.ok());
    EXPECT_EQ(got->output_ids, want->output_ids);
  }
  const EngineStats s = (*on)->Stats();
  EXPECT_EQ(s.prefix_cache_hits, 0u);
  EXPECT_EQ(s.prefix_cache_entries, 0u);
}

// A prompt longer than a sliding window (the tiny Gemma 3's is 3 tokens) is neither cached nor
// served from the cache: every turn prefills whole, with the same answers.
TEST(PrefixCache, PromptsLongerThanTheSlidingWindowPrefillWhole) {
  ExpectNeverCached("testdata/tiny/gemma3", [](Engine& e, int i) {
    return e.GenerateChat({Image(1)}, Chat(i + 1, e.Info().image_marker), Greedy());
  });
}

// PaliGemma's prompt is one bidirectional block: nothing is cached, every answer as before.
TEST(PrefixCache, PaliGemmaNeverReuses) {
  ExpectNeverCached("testdata/tiny/pg2",
                    [](Engine& e, int) { return e.Generate({Image(1)}, "caption en", Greedy()); });
}

}  // namespace
}  // namespace ocular

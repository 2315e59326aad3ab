// The terminal display of `ocular run`: what is drawn, when it is erased, and the plain lines
// and summary for a non-terminal. The Reporter writes into a temporary file here.
#include "progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace ocular::cli {
namespace {

class ReporterTest : public testing::Test {
 protected:
  void SetUp() override {
    out_ = std::tmpfile();
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override { std::fclose(out_); }

  ReportOptions Options(bool live) const {
    ReportOptions o;
    o.progress = true;
    o.stats = true;
    o.live = live;
    o.out = out_;
    o.show_after_ms = 0;  // draw at once (the real threshold is ~1 s)
    return o;
  }

  std::string Written() const {
    std::fflush(out_);
    std::string s;
    std::rewind(out_);
    for (int c; (c = std::fgetc(out_)) != EOF;) s.push_back(static_cast<char>(c));
    return s;
  }

  // A whole request as Engine::Generate reports it: 1 image, 68 prompt tokens, 3 tokens.
  static void Request(const ProgressCallback& cb) {
    cb({Stage::kImages, 0, 1, 0});
    cb({Stage::kImages, 1, 1, 2});
    cb({Stage::kEncode, 0, 1, 0});
    cb({Stage::kEncode, 1, 1, 5});
    cb({Stage::kPrefill, 0, 68, 0});
    cb({Stage::kPrefill, 68, 68, 9});
    for (int k = 0; k <= 3; ++k) cb({Stage::kDecode, k, 64, 1.0 * k});
  }

  static GenerateResult Result() {
    GenerateResult r;
    r.finish_reason = "eos";
    r.timings = {.image_ms = 12,
                 .prefill_ms = 100,
                 .decode_ms = 30,
                 .prefill_tokens = 68,
                 .decode_tokens = 3};
    return r;
  }

  std::FILE* out_ = nullptr;
};

TEST_F(ReporterTest, LiveLineRedrawsInPlaceAndIsErasedBeforeTheStreamedAnswer) {
  ReportOptions o = Options(/*live=*/true);
  o.text_on_tty = true;
  {
    Reporter rep(o);
    rep.BeginLoad();
    rep.EndLoad();
    ProgressCallback cb = rep.Callback();
    ASSERT_TRUE(cb);
    Request(cb);
    rep.Finish(Result());
  }
  const std::string s = Written();
  EXPECT_NE(s.find("\r\033[Kimages [....................] 0/1 images"), std::string::npos)
      << s;  // the bar before any image is decoded
  EXPECT_NE(s.find("\r\033[Kprefill: 68 tokens"), std::string::npos) << s;
  EXPECT_EQ(s.find("decode ["), std::string::npos) << "the answer is the decode progress: " << s;
  // Erased before the answer streams; the summary follows on a line of its own.
  const size_t stats = s.find("stats: ");
  ASSERT_NE(stats, std::string::npos) << s;
  EXPECT_EQ(s.rfind("\r\033[K", stats), stats - 4) << s;
}

TEST_F(ReporterTest, LiveDecodeBarWhenTheAnswerDoesNotStreamToTheTerminal) {
  {
    Reporter rep(Options(/*live=*/true));  // text_on_tty false: --json, or stdout redirected
    ProgressCallback cb = rep.Callback();
    Request(cb);
    rep.Clear();
  }
  const std::string s = Written();
  EXPECT_NE(s.find("\r\033[Kdecode [....................] 0/64 tokens"), std::string::npos) << s;
  EXPECT_EQ(s.substr(s.size() - 4), "\r\033[K") << "the line is erased at the end";
}

TEST_F(ReporterTest, NothingIsDrawnBeforeTheThreshold) {
  ReportOptions o = Options(/*live=*/true);
  o.show_after_ms = 60'000;
  o.stats = false;
  {
    Reporter rep(o);
    rep.BeginLoad();
    rep.EndLoad();
    Request(rep.Callback());
    rep.Finish(Result());
  }
  EXPECT_EQ(Written(), "");
}

TEST_F(ReporterTest, PlainLinesPerFinishedStageOffATerminal) {
  {
    Reporter rep(Options(/*live=*/false));
    rep.BeginLoad();
    rep.EndLoad();
    Request(rep.Callback());
    rep.Finish(Result());
  }
  const std::string s = Written();
  EXPECT_EQ(s.find('\r'), std::string::npos) << s;
  EXPECT_NE(s.find("ocular: loaded the model in "), std::string::npos) << s;
  EXPECT_NE(s.find("ocular: images 1/1 in 2 ms\nocular: encode 1/1 in 5 ms\n"
                   "ocular: prefill 68/68 in 9 ms\nstats: "),
            std::string::npos)
      << s;
}

TEST_F(ReporterTest, OffMeansNoCallbackAndNoOutput) {
  ReportOptions o = Options(/*live=*/true);
  o.progress = false;
  o.stats = false;
  {
    Reporter rep(o);
    EXPECT_FALSE(rep.Callback());
    rep.BeginLoad();
    rep.EndLoad();
    rep.Finish(Result());
  }
  EXPECT_EQ(Written(), "");
}

TEST(SummaryLine, NamesTokensSpeedsImageTimeMemoryAndFinish) {
  GenerateResult r;
  r.finish_reason = "length";
  r.timings = {.image_ms = 12.4,
               .prefill_ms = 100,
               .decode_ms = 500,
               .prefill_tokens = 68,
               .decode_tokens = 10};
  EXPECT_EQ(SummaryLine(r, size_t{300} << 20),
            "stats: prompt 68 tok | prefill 680.0 tok/s | decode 10 tok, 20.0 tok/s | image 12 ms "
            "| peak RSS 300 MiB | length");
}

}  // namespace
}  // namespace ocular::cli

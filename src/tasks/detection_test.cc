#include "tasks/detection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ocular {
namespace {

TEST(ParseDetections, OneObjectDecodesPerLocOver1023TimesSize) {
  // (y0, x0, y1, x1) = (0, 1023, 511, 256) on a 200 (w) x 100 (h) image.
  auto d = ParseDetections("<loc0000><loc1023><loc0511><loc0256> circle", 200, 100);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].label, "circle");
  EXPECT_FLOAT_EQ(d[0].y0, 0.0f);
  EXPECT_FLOAT_EQ(d[0].y1, 511.0f / 1023.0f * 100.0f);
  // x0 > x1 in the text: the corners come back ordered.
  EXPECT_FLOAT_EQ(d[0].x0, 256.0f / 1023.0f * 200.0f);
  EXPECT_FLOAT_EQ(d[0].x1, 200.0f);
}

TEST(ParseDetections, SeveralObjectsAndMultiWordLabels) {
  auto d = ParseDetections(
      "<loc0010><loc0020><loc0030><loc0040> red square ; <loc0100><loc0200><loc0300><loc0400> "
      "blue triangle",
      1023, 1023);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].label, "red square");
  EXPECT_EQ(d[1].label, "blue triangle");
  EXPECT_FLOAT_EQ(d[0].x0, 20.0f);
  EXPECT_FLOAT_EQ(d[0].y0, 10.0f);
  EXPECT_FLOAT_EQ(d[1].x1, 400.0f);
  EXPECT_FLOAT_EQ(d[1].y1, 300.0f);
}

TEST(ParseDetections, SkipsSegmentationTokens) {
  std::string text = "<loc0001><loc0002><loc0003><loc0004>";
  for (int i = 0; i < 16; ++i)
    text += "<seg" + std::string(i < 10 ? "00" : "0") + std::to_string(i) + ">";
  text += " cat";
  auto d = ParseDetections(text, 1023, 1023);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].label, "cat");
  EXPECT_FLOAT_EQ(d[0].x1, 4.0f);
}

TEST(ParseDetections, MalformedInputsAreSkippedNotFatal) {
  EXPECT_TRUE(ParseDetections("", 10, 10).empty());
  EXPECT_TRUE(ParseDetections("no boxes here", 10, 10).empty());
  EXPECT_TRUE(ParseDetections("<loc0001><loc0002><loc0003> short", 10, 10).empty());
  EXPECT_TRUE(ParseDetections("<loc0001><loc0002><loc0003><loc", 10, 10).empty());
  EXPECT_TRUE(ParseDetections("<loc1024><loc0002><loc0003><loc0004> out of range", 10, 10).empty());
  EXPECT_TRUE(ParseDetections("<loc12><loc0002><loc0003><loc0004> x", 10, 10).empty());
  // Garbage before, between and after; missing label; trailing " ;".
  auto d = ParseDetections(
      "junk <loc0001> <loc0001><loc0002><loc0003><loc0004> ; !!<loc0005><loc0006><loc0007>"
      "<loc0008> star ; <loc0009>",
      1023, 1023);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].label, "");
  EXPECT_FLOAT_EQ(d[0].y0, 1.0f);
  EXPECT_EQ(d[1].label, "star");
  EXPECT_FLOAT_EQ(d[1].x1, 8.0f);
  auto t = ParseDetections("<loc0001><loc0002><loc0003><loc0004> a ;", 1023, 1023);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].label, "a");
  // Five locs in a row: the first four make the box; the fifth starts nothing.
  auto f = ParseDetections("<loc0001><loc0002><loc0003><loc0004><loc0005> b", 1023, 1023);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].label, "");
  // Non-positive sizes give normalised coordinates instead of crashing.
  auto n = ParseDetections("<loc0000><loc0000><loc1023><loc1023> z", 0, -5);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_FLOAT_EQ(n[0].x1, 1.0f);
}

TEST(ParseDetections, RoundTripsFormat) {
  std::vector<Detection> in = {{10, 20, 110, 90, "circle"}, {0, 0, 300, 200, "blue star"}};
  auto out = ParseDetections(FormatDetections(in, 300, 200), 300, 200);
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].label, in[i].label);
    EXPECT_NEAR(out[i].x0, in[i].x0, 300.0f / 2046 + 1e-3f);
    EXPECT_NEAR(out[i].y1, in[i].y1, 200.0f / 2046 + 1e-3f);
  }
}

// Suffixes written by the reference generator (tools/demo_model/make_fixtures.py)
// decode back to the generator's boxes within half a loc step.
TEST(ParseDetections, MatchesShapesWorldGroundTruth) {
  std::ifstream f("testdata/tasks/detections.jsonl");
  ASSERT_TRUE(f.good()) << "missing testdata/tasks/detections.jsonl";
  std::string line;
  int objects = 0;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    const int w = j["width"], h = j["height"];
    auto d = ParseDetections(j["suffix"].get<std::string>(), w, h);
    ASSERT_EQ(d.size(), j["boxes"].size()) << j["suffix"];
    for (size_t i = 0; i < d.size(); ++i) {
      const auto& b = j["boxes"][i];
      EXPECT_NEAR(d[i].x0, b[0].get<float>(), w / 2046.0f + 1e-3f);
      EXPECT_NEAR(d[i].y0, b[1].get<float>(), h / 2046.0f + 1e-3f);
      EXPECT_NEAR(d[i].x1, b[2].get<float>(), w / 2046.0f + 1e-3f);
      EXPECT_NEAR(d[i].y1, b[3].get<float>(), h / 2046.0f + 1e-3f);
      EXPECT_EQ(d[i].label, b[4].get<std::string>());
      ++objects;
    }
  }
  EXPECT_GT(objects, 20);
}

}  // namespace
}  // namespace ocular

#include "tasks/detection.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tasks/box_testing.h"

namespace ocular {
namespace {

// Detections on a 1023 x 1023 image, where <locN> is N pixels.
std::vector<Detection> OnLocGrid(const std::string& text) {
  return ParseDetections(text, 1023, 1023);
}

TEST(ParseDetections, OneObjectDecodesPerLocOver1023TimesSize) {
  // (y0, x0, y1, x1) = (0, 1023, 511, 256) on a 200 (w) x 100 (h) image.
  auto d = ParseDetections("<loc0000><loc1023><loc0511><loc0256> circle", 200, 100);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].label, "circle");
  // x0 > x1 in the text: the corners come back ordered.
  ExpectBox(d[0], 256.0f / 1023.0f * 200.0f, 0.0f, 200.0f, 511.0f / 1023.0f * 100.0f);
}

TEST(ParseDetections, SeveralObjectsAndMultiWordLabels) {
  auto d = OnLocGrid(
      "<loc0010><loc0020><loc0030><loc0040> red square ; <loc0100><loc0200><loc0300><loc0400> "
      "blue triangle");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].label, "red square");
  EXPECT_EQ(d[1].label, "blue triangle");
  ExpectBox(d[0], 20.0f, 10.0f, 40.0f, 30.0f);
  ExpectBox(d[1], 200.0f, 100.0f, 400.0f, 300.0f);
}

TEST(ParseDetections, SkipsSegmentationTokens) {
  std::string text = "<loc0001><loc0002><loc0003><loc0004>";
  for (int i = 0; i < 16; ++i)
    text += "<seg" + std::string(i < 10 ? "00" : "0") + std::to_string(i) + ">";
  text += " cat";
  auto d = OnLocGrid(text);
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
  auto d = OnLocGrid(
      "junk <loc0001> <loc0001><loc0002><loc0003><loc0004> ; !!<loc0005><loc0006><loc0007>"
      "<loc0008> star ; <loc0009>");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].label, "");
  ExpectBox(d[0], 2.0f, 1.0f, 4.0f, 3.0f);
  EXPECT_EQ(d[1].label, "star");
  ExpectBox(d[1], 6.0f, 5.0f, 8.0f, 7.0f);
  auto t = OnLocGrid("<loc0001><loc0002><loc0003><loc0004> a ;");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].label, "a");
  // Five locs in a row: the first four make the box; the fifth starts nothing.
  auto f = OnLocGrid("<loc0001><loc0002><loc0003><loc0004><loc0005> b");
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

// `segment` answers: 16 <seg> codes after the box are kept (in order) with the raw locs.
TEST(ParseDetections, KeepsSegCodesAndRawLocs) {
  std::string seg;
  for (int k = 0; k < 16; ++k)
    seg += "<seg" +
           std::string(k * 7 < 10    ? "00"
                       : k * 7 < 100 ? "0"
                                     : "") +
           std::to_string(k * 7) + ">";
  auto d = ParseDetections("<loc0900><loc0100><loc0200><loc0400> " + seg + " cat ; " +
                               "<loc0001><loc0002><loc0003><loc0004> dog ; " +
                               "<loc0001><loc0002><loc0003><loc0004><seg001><seg002> short",
                           100, 100);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].label, "cat");
  ASSERT_EQ(d[0].seg.size(), 16u);
  EXPECT_EQ(d[0].seg[0], 0);
  EXPECT_EQ(d[0].seg[15], 105);
  EXPECT_EQ(d[0].loc, (std::array<int, 4>{900, 100, 200, 400}));  // as emitted, not reordered
  EXPECT_FLOAT_EQ(d[0].y0, 200.0f / 1023.0f * 100.0f);            // the box is ordered
  EXPECT_TRUE(d[1].seg.empty());
  EXPECT_EQ(d[1].label, "dog");
  // Fewer than 16 codes are not a mask: no codes, and the parse stops at the '<'.
  EXPECT_TRUE(d[2].seg.empty());
  EXPECT_TRUE(HasSegCodes(d));
  EXPECT_FALSE(HasSegCodes({d[1], d[2]}));
}

InstanceMask Mask(int image_w, int image_h, int x0, int y0, int w, int h,
                  std::vector<uint8_t> bits) {
  return {image_w, image_h, x0, y0, w, h, std::move(bits)};
}

TEST(CocoRle, ColumnMajorRunsStartingWithZeros) {
  // 4×3 image; a 2×2 box at (1, 1) with bits [[1, 0], [1, 1]].
  const InstanceMask m = Mask(4, 3, 1, 1, 2, 2, {1, 0, 1, 1});
  // Columns: x=0 000 | x=1 011 | x=2 001 | x=3 000 → 0-run 4, 1-run 2, 0-run 2, 1-run 1, 0-run 3.
  EXPECT_EQ(MaskToCocoRle(m), (std::vector<int64_t>{4, 2, 2, 1, 3}));
  EXPECT_EQ(m.area(), 3);
  auto back = MaskFromCocoRle(MaskToCocoRle(m), 4, 3);
  ASSERT_TRUE(back.ok());
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 4; ++x) EXPECT_EQ(back->at(x, y), m.at(x, y)) << x << "," << y;
  }
  // A mask starting at pixel (0, 0): the first run is an empty 0-run.
  EXPECT_EQ(MaskToCocoRle(Mask(2, 1, 0, 0, 1, 1, {1})), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(MaskFromCocoRle({1, 2}, 2, 2).status().code(), StatusCode::kDataLoss);  // sum 3 ≠ 4
  EXPECT_EQ(MaskFromCocoRle({5, -1}, 2, 2).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(MaskFromCocoRle({4}, 0, 2).status().code(), StatusCode::kDataLoss);
}

TEST(DetectionsJson, AddsSegCodesAndRleMasks) {
  Detection d{1, 1, 3, 3, "cat"};
  d.seg = std::vector<int>(16, 5);
  d.mask = Mask(4, 3, 1, 1, 2, 2, {1, 0, 1, 1});
  Detection plain{0, 0, 1, 1, "box"};
  const auto j = nlohmann::json::parse(DetectionsJson({d, plain}));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["seg"].size(), 16u);
  EXPECT_EQ(j[0]["mask"]["size"], nlohmann::json::array({3, 4}));  // [height, width]
  EXPECT_EQ(j[0]["mask"]["counts"], nlohmann::json::array({4, 2, 2, 1, 3}));
  EXPECT_EQ(j[0]["label"], "cat");
  EXPECT_FALSE(j[1].contains("seg"));
  EXPECT_FALSE(j[1].contains("mask"));
}

}  // namespace
}  // namespace ocular

#include "tasks/eval_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

namespace ocular {
namespace {

TEST(AnswerMatches, TrimsOnlyOuterWhitespace) {
  EXPECT_TRUE(AnswerMatches(" green\n", "green"));
  EXPECT_FALSE(AnswerMatches("Green", "green"));
  EXPECT_FALSE(AnswerMatches("a  red circle", "a red circle"));
  EXPECT_TRUE(AnswerMatches("", ""));
}

TEST(BoxIoU, KnownOverlaps) {
  const Detection a{0, 0, 10, 10, ""}, b{5, 0, 15, 10, ""}, c{20, 20, 30, 30, ""};
  EXPECT_FLOAT_EQ(BoxIoU(a, a), 1.0f);
  EXPECT_FLOAT_EQ(BoxIoU(a, b), 50.0f / 150.0f);
  EXPECT_FLOAT_EQ(BoxIoU(a, c), 0.0f);
  EXPECT_FLOAT_EQ(BoxIoU(a, {3, 3, 3, 8, ""}), 0.0f);  // empty box
}

TEST(MatchDetections, GreedyByIoUWithinSameLabel) {
  const std::vector<Detection> gt = {{0, 0, 10, 10, "a"}, {12, 0, 22, 10, "a"}};
  // p0 overlaps gt0 a little and gt1 a lot; p1 overlaps gt0 well; p2 has another label.
  const std::vector<Detection> pred = {
      {11, 0, 21, 10, "a"}, {1, 0, 11, 10, "a"}, {0, 0, 10, 10, "b"}};
  auto m = MatchDetections(pred, gt);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].pred, 0);
  EXPECT_EQ(m[0].gt, 1);
  EXPECT_EQ(m[1].pred, 1);
  EXPECT_EQ(m[1].gt, 0);
  DetectionMetrics d;
  d.Add(pred, gt);
  EXPECT_EQ(d.matched(), 2);
  // Class "a": 2 TP, 0 FP, 0 FN → AP 1; class "b" has no ground truth → not counted.
  EXPECT_DOUBLE_EQ(d.MapAt50(), 1.0);
  d.Add({}, {{0, 0, 1, 1, "c"}});  // a missed class → AP 0
  EXPECT_DOUBLE_EQ(d.MapAt50(), 0.5);
}

// The same cases scored by tools/demo_model/metrics.py give the same figures.
TEST(DetectionMetrics, AgreesWithPythonReferenceMetrics) {
  std::ifstream f("testdata/tasks/metrics_cases.json");
  ASSERT_TRUE(f.good()) << "missing testdata/tasks/metrics_cases.json";
  const auto j = nlohmann::json::parse(f);
  DetectionMetrics det;
  AccuracyMetric text;
  for (const auto& c : j["cases"]) {
    const std::string pred = c["prediction"];
    if (c["kind"] == "detect") {
      std::vector<Detection> gts;
      for (const auto& b : c["boxes"]) {
        gts.push_back({b[0].get<float>(), b[1].get<float>(), b[2].get<float>(), b[3].get<float>(),
                       b[4].get<std::string>()});
      }
      det.Add(ParseDetections(pred, c["width"], c["height"]), gts);
    } else {
      text.Add(pred, c["expected"].get<std::string>());
    }
  }
  const auto& s = j["summary"];
  EXPECT_EQ(det.num_predictions(), s["num_pred"].get<int>());
  EXPECT_EQ(det.num_ground_truth(), s["num_gt"].get<int>());
  EXPECT_EQ(det.matched(), s["matched"].get<int>());
  EXPECT_NEAR(det.MeanIoU(), s["mean_iou"].get<double>(), 1e-5);
  EXPECT_NEAR(det.MapAt50(), s["map50"].get<double>(), 1e-9);
  EXPECT_NEAR(text.Accuracy(), s["text_accuracy"].get<double>(), 1e-12);
  EXPECT_LT(det.MeanIoU(), 0.99);  // the fixture really contains imperfect boxes
}

InstanceMask Rect(int image_w, int image_h, int x0, int y0, int w, int h) {
  return {image_w, image_h, x0, y0, w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h, 1)};
}

TEST(MaskIoU, CountsPixelsNotBoxes) {
  const InstanceMask a = Rect(20, 20, 0, 0, 10, 10), b = Rect(20, 20, 5, 0, 10, 10);
  EXPECT_FLOAT_EQ(MaskIoU(a, a), 1.0f);
  EXPECT_FLOAT_EQ(MaskIoU(a, b), 50.0f / 150.0f);
  InstanceMask holed = a;
  std::fill(holed.bits.begin(), holed.bits.begin() + 50, 0);  // rows 0..4 cleared
  EXPECT_FLOAT_EQ(MaskIoU(a, holed), 0.5f);
  EXPECT_FLOAT_EQ(MaskIoU(a, Rect(20, 20, 15, 15, 2, 2)), 0.0f);
  InstanceMask empty = a;
  empty.bits.assign(100, 0);
  EXPECT_FLOAT_EQ(MaskIoU(empty, empty), 0.0f);
  InstanceMask broken = a;
  broken.bits.resize(3);  // inconsistent: never read past it
  EXPECT_FLOAT_EQ(MaskIoU(a, broken), 0.0f);
}

TEST(SegmentationMetrics, MatchesByMaskIoUWithinLabels) {
  auto det = [](std::string label, std::optional<InstanceMask> m) {
    Detection d;
    d.label = std::move(label);
    d.mask = std::move(m);
    return d;
  };
  const std::vector<Detection> gt = {det("a", Rect(20, 20, 0, 0, 10, 10)),
                                     det("b", Rect(20, 20, 10, 10, 10, 10))};
  const std::vector<Detection> pred = {det("a", Rect(20, 20, 5, 0, 10, 10)),   // IoU 1/3
                                       det("b", std::nullopt),                 // no mask
                                       det("a", Rect(20, 20, 0, 0, 10, 10))};  // IoU 1
  SegmentationMetrics m;
  m.Add(pred, gt);
  EXPECT_EQ(m.matched(), 1);  // pred 2 takes gt 0; pred 0 has nothing left; b has no mask
  EXPECT_DOUBLE_EQ(m.MeanIoU(), 1.0);
  EXPECT_DOUBLE_EQ(m.MIoU(), 0.5);  // gt b unmatched counts 0
  EXPECT_EQ(m.num_predictions(), 3);
  EXPECT_EQ(m.num_ground_truth(), 2);
}

}  // namespace
}  // namespace ocular

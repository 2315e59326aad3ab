#include "tasks/eval_set.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ocular {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// Predictions scored by tools/demo_model/metrics.score_examples (the transformers
// evaluator's scorer) give the same figures here.
TEST(EvalSet, ScoresLikeThePythonEvaluator) {
  auto set = LoadEvalSet("testdata/tasks/heldout_small.jsonl");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->size(), 60u);
  std::ifstream f("testdata/tasks/heldout_small_scored.json");
  const auto j = nlohmann::json::parse(f);
  const auto preds = j["predictions"].get<std::vector<std::string>>();
  auto s = ScoreEvalSet(*set, preds);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const auto& want = j["summary"];
  EXPECT_EQ(s->num_examples, want["num_examples"].get<int>());
  EXPECT_EQ(s->caption_n, want["caption_n"].get<int>());
  EXPECT_EQ(s->vqa_n, want["vqa_n"].get<int>());
  EXPECT_DOUBLE_EQ(s->caption_exact, want["caption_exact"].get<double>());
  EXPECT_DOUBLE_EQ(s->vqa_accuracy, want["vqa_accuracy"].get<double>());
  EXPECT_NEAR(s->detection_mean_iou, want["detection_mean_iou"].get<double>(), 1e-5);
  EXPECT_NEAR(s->detection_map50, want["detection_map50"].get<double>(), 1e-9);
  EXPECT_EQ(s->detection_matched, want["detection_matched"].get<int>());
  EXPECT_EQ(s->detection_predictions, want["detection_predictions"].get<int>());
  EXPECT_EQ(s->detection_ground_truth, want["detection_ground_truth"].get<int>());
  // The summary JSON round-trips with the same keys.
  auto back = nlohmann::json::parse(EvalSummaryJson(*s));
  EXPECT_DOUBLE_EQ(back["caption_exact"].get<double>(), s->caption_exact);
}

TEST(EvalSet, PerfectPredictionsScorePerfectly) {
  auto set = LoadEvalSet("testdata/tasks/heldout_small.jsonl");
  ASSERT_TRUE(set.ok());
  std::vector<std::string> preds;
  for (const auto& ex : *set) preds.push_back(ex.expected);
  auto s = ScoreEvalSet(*set, preds);
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->caption_exact, 1.0);
  EXPECT_DOUBLE_EQ(s->vqa_accuracy, 1.0);
  EXPECT_DOUBLE_EQ(s->detection_map50, 1.0);
  EXPECT_GT(s->detection_mean_iou, 0.97);  // loc quantisation only
}

TEST(EvalSet, MalformedFilesAreErrors) {
  EXPECT_EQ(LoadEvalSet("/nonexistent.jsonl").status().code(), StatusCode::kNotFound);
  const std::string good =
      R"({"id":0,"image":"a.png","width":10,"height":10,"kind":"caption","prefix":"caption en","suffix":"x"})";
  EXPECT_TRUE(LoadEvalSet(WriteTemp("ok.jsonl", good + "\n")).ok());
  struct Case {
    const char* text;
    const char* needle;
  } cases[] = {
      {"{not json", ":1: not valid JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"id":0,"image":"a","width":0,"height":10,"kind":"caption","prefix":"p","suffix":"s"})",
       "not positive"},
      {R"({"id":0,"image":"a","width":5,"height":10,"kind":"ocr","prefix":"p","suffix":"s"})",
       "unknown kind"},
      {R"({"id":0,"image":"a","width":5,"height":10,"kind":"detect","prefix":"p","suffix":"s"})",
       "boxes"},
      {R"({"id":0,"image":"a","width":5,"height":10,"kind":"detect","prefix":"p","suffix":"s","boxes":[[1,2,0,4,"a"]]})",
       "x1 < x0"},
      {R"({"id":0,"image":"a","width":5,"height":10,"kind":"detect","prefix":"p","suffix":"s","boxes":[[1,2,"3",4,"a"]]})",
       "finite"},
      {R"({"image":"a","width":5,"height":10,"kind":"count","prefix":"p","suffix":"s"})", "'id'"},
      {"", "no examples"},
  };
  for (const Case& c : cases) {
    auto r = LoadEvalSet(WriteTemp("bad.jsonl", c.text));
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().ToString();
  }
  auto set = LoadEvalSet(WriteTemp("ok2.jsonl", good));
  ASSERT_TRUE(set.ok());
  EXPECT_FALSE(ScoreEvalSet(*set, {}).ok());
}

TEST(DetectionsJson, ListsBoxesAndSurvivesBadUtf8) {
  auto j = nlohmann::json::parse(
      DetectionsJson({{1, 2, 3, 4, "circle"}, {0, 0, 1, 1, std::string("bad\xff")}}));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["label"], "circle");
  EXPECT_DOUBLE_EQ(j[0]["x1"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j[0]["y1"].get<double>(), 4.0);
  EXPECT_EQ(DetectionsJson({}), "[]");
}

// A "segment" example whose ground truth is the reference's own masks (testdata/seg): the
// reference answer scores mask IoU 1 on both objects.
TEST(EvalSet, ScoresSegmentExamplesByMaskIoU) {
  std::ifstream f("testdata/seg/cases.json");
  const auto c = nlohmann::json::parse(f)["variants"]["small"];
  nlohmann::json ex = {{"id", 7},
                       {"image", "x.png"},
                       {"width", c["image"][0]},
                       {"height", c["image"][1]},
                       {"kind", "segment"},
                       {"prefix", "segment cat ; big dog"},
                       {"suffix", c["answer"]}};
  nlohmann::json boxes = nlohmann::json::array(), masks = nlohmann::json::array();
  for (const auto& o : c["objects"]) {
    if (!o.contains("mask")) continue;
    const auto& b = o["pixel_box"];
    boxes.push_back({b[0], b[1], b[2], b[3], o["label"]});
    masks.push_back(o["mask"]);
  }
  ex["boxes"] = boxes;
  ex["masks"] = masks;
  auto set = LoadEvalSet(WriteTemp("seg.jsonl", ex.dump() + "\n"));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ((*set)[0].boxes.size(), 2u);
  ASSERT_TRUE((*set)[0].boxes[0].mask.has_value());
  auto decoder = MaskDecoder::Load("testdata/seg/vae-small.npz");
  ASSERT_TRUE(decoder.ok());
  const std::vector<std::string> preds = {c["answer"].get<std::string>()};
  auto s = ScoreEvalSet(*set, preds, decoder->get());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->mask_matched, 2);
  EXPECT_EQ(s->mask_predictions, 4);  // + the box-only and the inverted object
  EXPECT_EQ(s->mask_ground_truth, 2);
  EXPECT_DOUBLE_EQ(s->mask_mean_iou, 1.0);
  EXPECT_DOUBLE_EQ(s->mask_miou, 1.0);
  EXPECT_NE(EvalSummaryJson(*s).find("\"mask_miou\""), std::string::npos);
  // The same answer with the other variant's codes decodes other masks: IoU below 1.
  const auto other =
      nlohmann::json::parse(std::ifstream("testdata/seg/cases.json"))["variants"]["full"];
  auto s2 = ScoreEvalSet(*set, {other["answer"].get<std::string>()}, decoder->get());
  ASSERT_TRUE(s2.ok());
  EXPECT_LT(s2->mask_miou, 1.0);
  // Without a mask model a segment set cannot be scored.
  EXPECT_EQ(ScoreEvalSet(*set, preds).status().code(), StatusCode::kInvalidArgument);
  // Malformed masks are errors with the line number.
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"masks", nlohmann::json::array()},
           {"masks", nlohmann::json::array({masks[0], {{"size", {1, 1}}, {"counts", {1}}}})},
           {"masks", nlohmann::json::array(
                         {masks[0], {{"size", masks[1]["size"]}, {"counts", {1, 2, 3}}}})}}) {
    nlohmann::json bad = ex;
    bad[key] = value;
    auto r = LoadEvalSet(WriteTemp("badseg.jsonl", bad.dump() + "\n"));
    ASSERT_FALSE(r.ok()) << value.dump().substr(0, 80);
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(":1: "), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace ocular

#include "tasks/qwen_boxes.h"

#include <gtest/gtest.h>

#include <string>

namespace ocular {
namespace {

// Qwen2.5-VL: pixels of the resized frame. A 1000x500 image resized to 812x392 (smart_resize
// to multiples of 28): x scales by 1000/812, y by 500/392.
TEST(ParseQwenBoxes, FencedListInResizedPixelsMapsToTheOriginal) {
  const std::string answer =
      "```json\n[\n  {\"bbox_2d\": [406, 196, 812, 392], \"label\": \"cat\"},\n"
      "  {\"bbox_2d\": [0, 0, 203, 98], \"label\": \"dog\"}\n]\n```";
  auto d = ParseQwenBoxes(answer, 812, 392, 1000, 500);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].label, "cat");
  EXPECT_FLOAT_EQ(d[0].x0, 500.0f);
  EXPECT_FLOAT_EQ(d[0].y0, 250.0f);
  EXPECT_FLOAT_EQ(d[0].x1, 1000.0f);
  EXPECT_FLOAT_EQ(d[0].y1, 500.0f);
  EXPECT_EQ(d[1].label, "dog");
  EXPECT_FLOAT_EQ(d[1].x1, 250.0f);
  EXPECT_FLOAT_EQ(d[1].y1, 125.0f);
  EXPECT_EQ(d[0].loc[0], -1);  // not from <loc> tokens
}

// Qwen3-VL: a 0-1000 grid over the image, whatever its size.
TEST(ParseQwenBoxes, Grid1000ScalesByTheOriginalSize) {
  auto d = ParseQwenBoxes(R"([{"bbox_2d": [250, 400, 750, 1000], "label": "person"}])", 1000, 1000,
                          1920, 1080);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FLOAT_EQ(d[0].x0, 480.0f);
  EXPECT_FLOAT_EQ(d[0].y0, 432.0f);
  EXPECT_FLOAT_EQ(d[0].x1, 1440.0f);
  EXPECT_FLOAT_EQ(d[0].y1, 1080.0f);
}

TEST(ParseQwenBoxes, SingleObjectsWrappedListsAndSwappedCorners) {
  auto one =
      ParseQwenBoxes(R"(Here: {"bbox_2d": [10, 20, 0, 5], "label": "x"})", 100, 100, 100, 100);
  // Not JSON as a whole (text around it): the complete object is still read, corners ordered.
  ASSERT_EQ(one.size(), 1u);
  EXPECT_FLOAT_EQ(one[0].x0, 0.0f);
  EXPECT_FLOAT_EQ(one[0].x1, 10.0f);
  EXPECT_FLOAT_EQ(one[0].y0, 5.0f);
  EXPECT_FLOAT_EQ(one[0].y1, 20.0f);
  auto wrapped = ParseQwenBoxes(R"({"objects": [{"bbox_2d": [1, 2, 3, 4]}]})", 10, 10, 10, 10);
  ASSERT_EQ(wrapped.size(), 1u);
  EXPECT_EQ(wrapped[0].label, "");
  // Outside the frame: clamped to the image.
  auto out =
      ParseQwenBoxes(R"([{"bbox_2d": [-5, -5, 2000, 2000], "label": "all"}])", 1000, 1000, 64, 48);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FLOAT_EQ(out[0].x0, 0.0f);
  EXPECT_FLOAT_EQ(out[0].x1, 64.0f);
  EXPECT_FLOAT_EQ(out[0].y1, 48.0f);
}

// An answer cut short by max_tokens keeps its complete objects; malformed ones give nothing.
TEST(ParseQwenBoxes, PartialAndMalformedAnswersNeverFail) {
  auto cut = ParseQwenBoxes(
      "```json\n[{\"bbox_2d\": [0, 0, 500, 500], \"label\": \"a {b}\"}, {\"bbox_2d\": [1, 2,", 1000,
      1000, 100, 100);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].label, "a {b}");
  EXPECT_FLOAT_EQ(cut[0].x1, 50.0f);
  const char* bad[] = {
      "",
      "no boxes here",
      "```json\n```",
      "[]",
      "[1, 2, 3]",
      R"([{"bbox_2d": [1, 2, 3]}])",                 // three numbers
      R"([{"bbox_2d": ["1", 2, 3, 4]}])",            // a string
      R"([{"bbox_2d": [1, 2, 3, 4, 5]}])",           // five
      R"([{"bbox": [1, 2, 3, 4]}])",                 // another key
      R"([{"bbox_2d": [1e999, 2, 3, 4]}])",          // not finite
      "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{",  // unbalanced
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]",
      "\"unterminated string {\"bbox_2d\": [1, 2, 3, 4]}",
  };
  for (const char* text : bad) {
    EXPECT_TRUE(ParseQwenBoxes(text, 1000, 1000, 100, 100).empty()) << text;
  }
  EXPECT_TRUE(ParseQwenBoxes(R"([{"bbox_2d": [1, 2, 3, 4]}])", 0, 1000, 100, 100).empty());
  EXPECT_TRUE(ParseQwenBoxes(R"([{"bbox_2d": [1, 2, 3, 4]}])", 1000, 1000, 0, 100).empty());
}

}  // namespace
}  // namespace ocular

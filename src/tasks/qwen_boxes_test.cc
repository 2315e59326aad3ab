#include "tasks/qwen_boxes.h"

#include <gtest/gtest.h>

#include <string>

#include "tasks/box_testing.h"

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
  ExpectBox(d[0], 500.0f, 250.0f, 1000.0f, 500.0f);
  EXPECT_EQ(d[1].label, "dog");
  ExpectBox(d[1], 0.0f, 0.0f, 250.0f, 125.0f);
  EXPECT_EQ(d[0].loc[0], -1);  // not from <loc> tokens
}

// Qwen3-VL: a 0-1000 grid over the image, whatever its size.
TEST(ParseQwenBoxes, Grid1000ScalesByTheOriginalSize) {
  auto d = ParseQwenBoxes(R"([{"bbox_2d": [250, 400, 750, 1000], "label": "person"}])", 1000, 1000,
                          1920, 1080);
  ASSERT_EQ(d.size(), 1u);
  ExpectBox(d[0], 480.0f, 432.0f, 1440.0f, 1080.0f);
}

TEST(ParseQwenBoxes, SingleObjectsWrappedListsAndSwappedCorners) {
  auto one =
      ParseQwenBoxes(R"(Here: {"bbox_2d": [10, 20, 0, 5], "label": "x"})", 100, 100, 100, 100);
  // Not JSON as a whole (text around it): the complete object is still read, corners ordered.
  ASSERT_EQ(one.size(), 1u);
  ExpectBox(one[0], 0.0f, 5.0f, 10.0f, 20.0f);
  auto wrapped = ParseQwenBoxes(R"({"objects": [{"bbox_2d": [1, 2, 3, 4]}]})", 10, 10, 10, 10);
  ASSERT_EQ(wrapped.size(), 1u);
  EXPECT_EQ(wrapped[0].label, "");
  // Outside the frame: clamped to the image.
  auto out =
      ParseQwenBoxes(R"([{"bbox_2d": [-5, -5, 2000, 2000], "label": "all"}])", 1000, 1000, 64, 48);
  ASSERT_EQ(out.size(), 1u);
  ExpectBox(out[0], 0.0f, 0.0f, 64.0f, 48.0f);
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

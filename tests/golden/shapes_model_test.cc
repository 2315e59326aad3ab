// The shipped demo model (models/shapes-paligemma) through the public Engine API: for
// every case in testdata/tasks/shapes_reference.json (written by
// tools/demo_model/make_reference_answers.py from transformers, f32 eager, greedy)
// ocular must generate exactly the reference token ids and text, and decode the same masks
// from `segment` answers (the reference: the mask VQ-VAE in torch, big_vision's placement).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ocular/detection.h"
#include "ocular/engine.h"
#include "ocular/tasks.h"

namespace ocular {
namespace {

TEST(ShapesModel, GreedyAnswersEqualTransformers) {
  std::ifstream in("testdata/tasks/shapes_reference.json");
  ASSERT_TRUE(in.good()) << "missing testdata/tasks/shapes_reference.json";
  const nlohmann::json ref = nlohmann::json::parse(in);
  auto engine = Engine::Load(ref.at("model").get<std::string>(), {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  GenerateOptions o;
  o.max_tokens = ref.at("max_new_tokens").get<int>();
  ASSERT_GE(ref.at("cases").size(), 10u);
  int segment_cases = 0;
  for (const auto& c : ref.at("cases")) {
    const std::string prompt = c.at("prompt").get<std::string>();
    SCOPED_TRACE(c.at("image").get<std::string>() + " : " + prompt);
    auto r = (*engine)->Generate({c.at("image").get<std::string>()}, prompt, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->output_ids, c.at("output_ids").get<std::vector<int32_t>>());
    EXPECT_EQ(r->text, c.at("text").get<std::string>());
    if (!c.contains("masks")) continue;
    ++segment_cases;
    const auto& size = r->image_sizes.at(0);
    std::vector<Detection> boxes = ParseDetections(r->text, size.width, size.height);
    auto warning =
        AttachMasks(&boxes, "", ref.at("model").get<std::string>(), size.width, size.height);
    ASSERT_TRUE(warning.ok()) << warning.status().ToString();
    EXPECT_EQ(*warning, "");
    ASSERT_EQ(boxes.size(), c.at("masks").size());
    for (size_t i = 0; i < boxes.size(); ++i) {
      SCOPED_TRACE("object " + std::to_string(i));
      ASSERT_TRUE(boxes[i].mask.has_value());
      EXPECT_EQ(MaskToCocoRle(*boxes[i].mask), c.at("masks")[i].get<std::vector<int64_t>>());
    }
  }
  EXPECT_GE(segment_cases, 4);
}

}  // namespace
}  // namespace ocular

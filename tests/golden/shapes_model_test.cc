// The shipped demo model (models/shapes-paligemma) through the public Engine API: for
// every case in testdata/tasks/shapes_reference.json (written by
// tools/demo_model/make_reference_answers.py from transformers, f32 eager, greedy)
// ocular must generate exactly the reference token ids and text.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ocular/engine.h"

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
  for (const auto& c : ref.at("cases")) {
    const std::string prompt = c.at("prompt").get<std::string>();
    SCOPED_TRACE(c.at("image").get<std::string>() + " : " + prompt);
    auto r = (*engine)->Generate({c.at("image").get<std::string>()}, prompt, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->output_ids, c.at("output_ids").get<std::vector<int32_t>>());
    EXPECT_EQ(r->text, c.at("text").get<std::string>());
  }
}

}  // namespace
}  // namespace ocular

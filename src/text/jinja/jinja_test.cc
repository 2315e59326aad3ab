// The Jinja renderer against Python jinja2 in transformers' environment, case by case
// (testdata/chat/jinja_cases.json, tools/reference/make_jinja_fixtures.py), and what it refuses.
// The full differential sweep over llama.cpp's templates is tools/reference/jinja_sweep.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "text/jinja/template.h"

namespace ocular::jinja {
namespace {

// The file at `path`, or "" when it cannot be read (the checks on it then fail).
std::string ReadText(const std::string& path) {
  StatusOr<std::string> bytes = ReadFileToString(path);
  return bytes.ok() ? std::move(*bytes) : std::string();
}

StatusOr<std::string> RenderText(std::string_view source, const nlohmann::ordered_json& context,
                                 std::time_t now = 0) {
  auto t = Template::Parse(source, "t.jinja");
  if (!t.ok()) return t.status();
  return t->Render(context, now);
}

TEST(Jinja, EqualsJinja2OnTheFixtures) {
  const auto fixtures = nlohmann::ordered_json::parse(ReadText("testdata/chat/jinja_cases.json"));
  const std::time_t now = fixtures["now"].get<int64_t>();
  ASSERT_GT(fixtures["cases"].size(), 50u);
  for (const auto& c : fixtures["cases"]) {
    const std::string name = c["name"].get<std::string>();
    const std::string source = c.contains("template_file")
                                   ? ReadText(c["template_file"].get<std::string>())
                                   : c["template"].get<std::string>();
    ASSERT_FALSE(source.empty()) << name;
    StatusOr<std::string> r = RenderText(source, c["context"], now);
    if (c["ok"].get<bool>()) {
      ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
      EXPECT_EQ(*r, c["text"].get<std::string>()) << name;
    } else {
      // jinja2 raised: ocular fails too, and not because it lacks a construct.
      ASSERT_FALSE(r.ok()) << name << " rendered " << *r << "; jinja2: " << c["error"];
      EXPECT_NE(r.status().code(), StatusCode::kUnimplemented)
          << name << ": " << r.status().ToString();
    }
  }
}

TEST(Jinja, ErrorsNameTheLineAndKind) {
  const nlohmann::ordered_json ctx = {{"x", "a"}};
  auto r = RenderText("line one\n{% if x %}\n{{ x|wordwrap(3) }}{% endif %}", ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("t.jinja:3: unsupported construct: filter 'wordwrap'"),
            std::string::npos)
      << r.status().message();
  r = RenderText("\n{% include 'other.jinja' %}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find(":2: unsupported construct: {% include %}"),
            std::string::npos)
      << r.status().message();
  r = RenderText("{% for a in x recursive %}{% endfor %}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  r = RenderText("{{ {1: 'a'} }}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  r = RenderText("{{ 'É'|lower }}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  r = RenderText("{% if x %}\n{% for %}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(":2: syntax error"), std::string::npos)
      << r.status().message();
  r = RenderText("{{ raise_exception('roles must alternate') }}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("roles must alternate"), std::string::npos);
  EXPECT_EQ(RenderText("{{ x }}", nlohmann::ordered_json::array()).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Jinja, LimitsStopHostileTemplates) {
  const nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  auto r = RenderText("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  r = RenderText("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  r = RenderText("{{ 'ab' * 100000000 }}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  std::string deep(500, '(');
  r = RenderText("{{ " + deep + "1" + std::string(500, ')') + " }}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  r = RenderText("{{ 9223372036854775807 + 1 }}", ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
}

TEST(Jinja, StrftimeNowFormatsTheGivenTime) {
  // 2024-07-26 12:00 UTC is the 26th in every zone within 12 hours of UTC.
  auto r =
      RenderText("{{ strftime_now('%d %b %Y') }}", nlohmann::ordered_json::object(), 1721995200);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "26 Jul 2024");
}

}  // namespace
}  // namespace ocular::jinja

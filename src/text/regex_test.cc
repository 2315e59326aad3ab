#include "text/regex.h"

#include <gtest/gtest.h>

namespace ocular::text {
namespace {

using Spans = std::vector<std::pair<size_t, size_t>>;

TEST(RegexTest, WhiteSpaceMatchesNel) {
  // tokenizers 0.22.1: Split(Regex(r"\s"), "isolated").pre_tokenize_str("a\x85b a\xa0b")
  // isolates U+0085 and U+00A0 (character offsets 1 and 5).
  auto re = Regex::Compile(R"(\s)");
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(re->FindAll("a\xC2\x85"
                        "b a\xC2\xA0"
                        "b"),
            (Spans{{1, 3}, {4, 5}, {6, 8}}));
}

TEST(RegexTest, UnicodePropertiesAndEmptyMatches) {
  auto re = Regex::Compile(R"(\p{L}+|\p{N}{1,3})");
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(re->FindAll("h\xC3\xA9llo 12345"), (Spans{{0, 6}, {7, 10}, {10, 12}}));
  auto empty = Regex::Compile("x*");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->FindAll("\xC3\xA9xx\xC3\xA9"), (Spans{{2, 4}}));
}

TEST(RegexTest, BadPatternIsAnError) {
  auto re = Regex::Compile("(\\p{L}");
  ASSERT_FALSE(re.ok());
  EXPECT_TRUE(re.status().message().starts_with("[tokenizer] bad regex")) << re.status().message();
}

}  // namespace
}  // namespace ocular::text

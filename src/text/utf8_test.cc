#include "text/utf8.h"

#include <gtest/gtest.h>

namespace ocular::text {
namespace {

TEST(Utf8Test, Validation) {
  EXPECT_EQ(FindInvalidUtf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\x80"), 2u);
  EXPECT_EQ(FindInvalidUtf8("\xC0\x80"), 0u);           // overlong NUL
  EXPECT_EQ(FindInvalidUtf8("\xED\xA0\x80"), 0u);       // surrogate
  EXPECT_EQ(FindInvalidUtf8("x\xF4\x90\x80\x80"), 1u);  // > U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("\xE2\x82"), 0u);           // truncated
}

TEST(Utf8Test, LossyReplacesMaximalSubparts) {
  // Unicode 15 §3.9 example (Table 3-8): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  EXPECT_EQ(Utf8Lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD"
            "d");
  EXPECT_EQ(Utf8Lossy("\xE2\x82"), "\xEF\xBF\xBD");
  EXPECT_EQ(Utf8Lossy("ok"), "ok");
}

TEST(Utf8Test, WhiteSpace) {
  for (char32_t c : {U' ', U'\t', U'\n', U'\u0085', U'\u00A0', U'\u2000', U'\u3000'}) {
    EXPECT_TRUE(IsWhiteSpace(c)) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U'a', U'\u200B', U'\uFEFF', U'_'}) EXPECT_FALSE(IsWhiteSpace(c));
}

}  // namespace
}  // namespace ocular::text

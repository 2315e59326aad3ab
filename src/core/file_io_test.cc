#include "core/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace ocular {
namespace {

namespace fs = std::filesystem;

class ReadFileBoundedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ocular_file_io_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  fs::path dir_;
};

TEST_F(ReadFileBoundedTest, ReadsRegularFile) {
  const std::string path = Write("a.json", "{\"x\": 1}");
  auto text = ReadFileBounded(path, 100, "config");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "{\"x\": 1}");
  auto exact = ReadFileBounded(path, 8, "config");
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->size(), 8u);
}

TEST_F(ReadFileBoundedTest, EmptyFile) {
  auto text = ReadFileBounded(Write("empty", ""), 100, "config");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "");
}

TEST_F(ReadFileBoundedTest, RefusesOversizedFileNamingTheLimit) {
  const std::string path = Write("big.json", std::string(101, 'x'));
  auto text = ReadFileBounded(path, 100, "config");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(text.status().message().find("[config] " + path), std::string::npos);
  EXPECT_NE(text.status().message().find("limit of 100 bytes"), std::string::npos);
}

TEST_F(ReadFileBoundedTest, MissingFileIsNotFound) {
  auto text = ReadFileBounded((dir_ / "nope.json").string(), 100, "tokenizer");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kNotFound);
  EXPECT_NE(text.status().message().find("[tokenizer]"), std::string::npos);
}

TEST_F(ReadFileBoundedTest, RefusesDirectory) {
  auto text = ReadFileBounded(dir_.string(), 100, "config");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kIoError);
  EXPECT_NE(text.status().message().find("a directory"), std::string::npos);
}

TEST_F(ReadFileBoundedTest, RefusesFifoWithoutBlocking) {
  const std::string path = (dir_ / "config.json").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto text = ReadFileBounded(path, 100, "config");  // no writer: a blocking open would hang
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kIoError);
  EXPECT_NE(text.status().message().find("a FIFO"), std::string::npos);
  EXPECT_NE(text.status().message().find(path), std::string::npos);
  EXPECT_LT(s, 2.0);
}

TEST_F(ReadFileBoundedTest, RefusesSymlinkToDevZero) {
  const fs::path link = dir_ / "tokenizer.json";
  fs::create_symlink("/dev/zero", link);
  auto text = ReadFileBounded(link.string(), kMaxTokenizerFileBytes, "tokenizer");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kIoError);
  EXPECT_NE(text.status().message().find("character device"), std::string::npos);
}

TEST_F(ReadFileBoundedTest, FollowsSymlinkToRegularFile) {
  const std::string target = Write("real.json", "[]");
  const fs::path link = dir_ / "link.json";
  fs::create_symlink(target, link);
  auto text = ReadFileBounded(link.string(), 100, "config");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "[]");
}

TEST(TextPositionTest, LinesAndColumnsAreOneBased) {
  EXPECT_EQ(TextPosition("abc", 0), "line 1, column 1");
  EXPECT_EQ(TextPosition("abc", 2), "line 1, column 3");
  EXPECT_EQ(TextPosition("ab\ncd\nef", 3), "line 2, column 1");
  EXPECT_EQ(TextPosition("ab\ncd\nef", 7), "line 3, column 2");
  EXPECT_EQ(TextPosition("ab", 99), "line 1, column 3");  // clamped to the end
}

TEST(ParseJsonTest, ErrorsCarryLineAndColumn) {
  auto j = ParseJson("{\n  \"a\": 1,\n  \"b\": tru\n}", "cfg.json", "config");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kDataLoss);
  const std::string& m = j.status().message();
  EXPECT_EQ(m.rfind("[config] cfg.json: invalid JSON at line 3, column ", 0), 0u) << m;
  EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
}

// A string that never closes: nlohmann quotes the whole token read; the message keeps only
// its end (config_json_fuzz found a 1,200-byte message from an 864-byte config.json).
TEST(ParseJsonTest, LongTokensAreCutInMessages) {
  for (const std::string& text :
       {"{\"" + std::string(5000, 'x') + "\xff\"}", "{\"" + std::string(5000, 'z'),
        // config_json_fuzz: the unclosed string itself holds "'; expected " far from its end.
        "{\"a'; expected " + std::string(3000, 'f') + "\xff\"}"}) {
    auto j = ParseJson(text, "cfg.json", "config");
    ASSERT_FALSE(j.ok());
    const std::string& m = j.status().message();
    EXPECT_LT(m.size(), 300u) << m;
    EXPECT_NE(m.find("last read: '..."), std::string::npos) << m;
  }
}

TEST(ParseJsonTest, TruncatedAndEmpty) {
  EXPECT_EQ(ParseJson("", "x", "config").status().code(), StatusCode::kDataLoss);
  auto j = ParseJson("{\"a\": [1, 2", "x", "config");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("line 1"), std::string::npos);
}

TEST(ParseJsonTest, RefusesDeepNesting) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto j = ParseJson(deep, "x.json", "config");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(j.status().message().find("nested deeper than 64"), std::string::npos);
  EXPECT_TRUE(ParseJson("[[[\"[[[[\"]]]", "x.json", "config", 3).ok());  // brackets in strings
}

TEST(ShortJsonTest, CutsLongValues) {
  EXPECT_EQ(ShortJson(nlohmann::json(12)), "12");
  EXPECT_EQ(ShortJson(nlohmann::json(1e300)), "1e+300");
  const std::string cut = ShortJson(nlohmann::json(std::vector<int>(100, 7)), 20);
  EXPECT_EQ(cut.size(), 20u);
  EXPECT_TRUE(cut.ends_with("...")) << cut;
}

TEST(ParseJsonTest, ParsesValid) {
  auto j = ParseJson(R"({"a": [1, 2]})", "x", "config");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["a"][1], 2);
}

}  // namespace
}  // namespace ocular

// Golden tests: ids, decodes and streaming decodes identical to the reference on every
// string of testdata/text/<vocab>/cases.jsonl.xz (made by tools/reference/make_text_fixtures.py
// from HF tokenizers and sentencepiece).
#include <gtest/gtest.h>
#include <lzma.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/tokenizer.h"
#include "text/utf8.h"

namespace ocular {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Decompresses an .xz fixture with liblzma.
std::string ReadXz(const std::string& path) {
  const std::string packed = ReadFile(path);
  lzma_stream strm = LZMA_STREAM_INIT;
  EXPECT_EQ(lzma_stream_decoder(&strm, UINT64_MAX, 0), LZMA_OK);
  std::string out;
  char buf[1 << 16];
  strm.next_in = reinterpret_cast<const uint8_t*>(packed.data());
  strm.avail_in = packed.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    strm.next_out = reinterpret_cast<uint8_t*>(buf);
    strm.avail_out = sizeof(buf);
    ret = lzma_code(&strm, LZMA_FINISH);
    out.append(buf, sizeof(buf) - strm.avail_out);
  }
  lzma_end(&strm);
  EXPECT_EQ(ret, LZMA_STREAM_END) << path;
  return out;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids, sp_ids, ids_special;
  std::string decode, decode_skip, sp_decode;
  bool has_sp = false;
};

std::vector<Case> ReadCases(const std::string& vocab) {
  std::vector<Case> cases;
  std::istringstream lines(ReadXz("testdata/text/" + vocab + "/cases.jsonl.xz"));
  std::string line;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    Case c;
    c.text = j["text"].get<std::string>();
    c.ids = j["ids"].get<std::vector<int32_t>>();
    c.decode = j["decode"].get<std::string>();
    c.decode_skip = j["decode_skip"].get<std::string>();
    if (j.contains("ids_special")) c.ids_special = j["ids_special"].get<std::vector<int32_t>>();
    if (j.contains("sp_ids")) {
      c.has_sp = true;
      c.sp_ids = j["sp_ids"].get<std::vector<int32_t>>();
      c.sp_decode = j["sp_decode"].get<std::string>();
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string Quote(const std::string& s) { return nlohmann::json(s).dump(); }

// Streams `ids` one at a time; checks each chunk is valid UTF-8 and returns the concatenation.
std::string Stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                   bool* chunks_valid) {
  StreamingDecoder stream(tok, skip);
  std::string all;
  *chunks_valid = true;
  for (int32_t id : ids) {
    const std::string chunk = stream.Put(id);
    *chunks_valid &= text::FindInvalidUtf8(chunk) == std::string_view::npos;
    all += chunk;
  }
  const std::string rest = stream.Finish();
  *chunks_valid &= text::FindInvalidUtf8(rest) == std::string_view::npos;
  return all + rest;
}

// Compares one tokenizer with the reference columns; reports the first few mismatches.
void CheckVocab(const Tokenizer& tok, const std::vector<Case>& cases, bool sp_columns) {
  ASSERT_GE(cases.size(), 2000u);
  int failures = 0, checked = 0;
  for (const Case& c : cases) {
    if (sp_columns && !c.has_sp) continue;
    ++checked;
    const auto& want_ids = sp_columns ? c.sp_ids : c.ids;
    const auto& want_decode = sp_columns ? c.sp_decode : c.decode;
    auto ids = tok.Encode(c.text);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    std::vector<std::string> problems;
    if (*ids != want_ids) problems.push_back("ids differ");
    if (tok.Decode(want_ids, false) != want_decode) {
      problems.push_back("decode " + Quote(tok.Decode(want_ids, false)) +
                         " != " + Quote(want_decode));
    }
    if (!sp_columns && tok.Decode(want_ids, true) != c.decode_skip) {
      problems.push_back("decode_skip " + Quote(tok.Decode(want_ids, true)));
    }
    for (bool skip : {false, true}) {
      bool valid = false;
      const std::string streamed = Stream(tok, want_ids, skip, &valid);
      if (!valid) problems.push_back("streamed chunk is not valid UTF-8");
      if (streamed != tok.Decode(want_ids, skip)) {
        problems.push_back("stream " + Quote(streamed) + " != decode");
      }
    }
    if (!problems.empty() && ++failures <= 5) {
      std::string got;
      for (int32_t id : *ids) got += std::to_string(id) + " ";
      std::string want;
      for (int32_t id : want_ids) want += std::to_string(id) + " ";
      ADD_FAILURE() << "text " << Quote(c.text) << ": " << problems[0] << "\n  got  " << got
                    << "\n  want " << want;
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << checked << " strings differ";
  EXPECT_GT(checked, 0);
}

TEST(GoldenTest, TinyPaliGemmaJson) {
  auto tok = Tokenizer::Load("testdata/tiny/tokenizer");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  CheckVocab(**tok, ReadCases("tiny"), /*sp_columns=*/false);
}

TEST(GoldenTest, TinyPaliGemmaSentencePiece) {
  auto tok = Tokenizer::FromSentencePiece(ReadFile("testdata/tiny/tokenizer/tokenizer.model"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  CheckVocab(**tok, ReadCases("tiny"), /*sp_columns=*/true);
}

TEST(GoldenTest, AddedTokenFlags) {
  auto tok = Tokenizer::FromHfJson(ReadXz("testdata/text/flags/tokenizer.json.xz"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  CheckVocab(**tok, ReadCases("flags"), false);
}

// Unicode normalizers (a Qwen2-VL tokenizer.json starts with NFC): the tiny vocabulary with
// each form in front of its Replace, on the corpus plus canonical / compatibility equivalents.
// A decomposed "cafe\u0301" added token (normalized) matches by its normalized spelling.
class UnicodeNormalizerGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(UnicodeNormalizerGolden, MatchesTokenizers) {
  const std::string dir = std::string("testdata/text/") + GetParam();
  auto tok = Tokenizer::FromHfJson(ReadXz(dir + "/tokenizer.json.xz"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  CheckVocab(**tok, ReadCases(GetParam()), false);
}

INSTANTIATE_TEST_SUITE_P(Forms, UnicodeNormalizerGolden,
                         ::testing::Values("nfc", "nfd", "nfkc", "nfkd"));

// tokenizer.json post-processors: Encode as tokenizers' encode(add_special_tokens=False) and
// AddSpecialTokens(Encode) as encode(add_special_tokens=True) (post_gemma_class: as
// transformers' GemmaTokenizerFast, which rebuilds it from tokenizer_config.json's flags).
class PostProcessorGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(PostProcessorGolden, AddSpecialTokensMatchesTheReference) {
  const std::string dir = std::string("testdata/text/") + GetParam();
  const std::string config_path = dir + "/tokenizer_config.json";
  const std::string config = std::ifstream(config_path) ? ReadFile(config_path) : "";
  auto tok = Tokenizer::FromHfJson(ReadXz(dir + "/tokenizer.json.xz"), config);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<Case> cases = ReadCases(GetParam());
  ASSERT_GE(cases.size(), 300u);
  int failures = 0, added = 0;
  for (const Case& c : cases) {
    auto ids = (*tok)->Encode(c.text);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    const std::vector<int32_t> special = (*tok)->AddSpecialTokens(*ids);
    added += special.size() != ids->size();
    if ((*ids != c.ids || special != c.ids_special) && ++failures <= 5) {
      ADD_FAILURE() << "text " << Quote(c.text) << ": ids or ids_special differ";
    }
  }
  EXPECT_EQ(failures, 0);
  // Every processor here but ByteLevel adds tokens to every text.
  EXPECT_EQ(added,
            std::string(GetParam()) == "post_bytelevel" ? 0 : static_cast<int>(cases.size()));
}

INSTANTIATE_TEST_SUITE_P(Processors, PostProcessorGolden,
                         ::testing::Values("post_template", "post_bert", "post_roberta",
                                           "post_bytelevel", "post_sequence", "post_sequence_pair",
                                           "post_sequence_three", "post_gemma_class"));

TEST(GoldenTest, Gemma3Json) {
  auto tok = Tokenizer::FromHfJson(ReadXz("testdata/text/gemma3/tokenizer.json.xz"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->vocab_size(), 262144);
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->eos_id(), 1);
  EXPECT_EQ((*tok)->pad_id(), 0);
  CheckVocab(**tok, ReadCases("gemma3"), false);
}

TEST(GoldenTest, Gemma3SentencePiece) {
  auto tok = Tokenizer::FromSentencePiece(ReadXz("testdata/text/gemma3/tokenizer.model.xz"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  CheckVocab(**tok, ReadCases("gemma3"), true);
}

TEST(GoldenTest, Llama3Json) {
  auto tok = Tokenizer::FromHfJson(ReadXz("testdata/text/llama3/tokenizer.json.xz"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->bos_id(), (*tok)->TokenToId("<|begin_of_text|>"));
  EXPECT_EQ((*tok)->bos_id(), 128000);
  EXPECT_TRUE((*tok)->IsSpecial(128000));
  CheckVocab(**tok, ReadCases("llama3"), false);
}

}  // namespace
}  // namespace ocular

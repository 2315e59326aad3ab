// API contracts and malformed-input handling of Tokenizer (golden parity is golden_test.cc).
#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ocular {
namespace {

constexpr const char* kTinyDir = "testdata/tiny/tokenizer";

std::unique_ptr<Tokenizer> LoadTiny() {
  auto tok = Tokenizer::Load(kTinyDir);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(TokenizerTest, TinySpecialIdsAndPieces) {
  auto tok = LoadTiny();
  ASSERT_TRUE(tok);
  // Facts asserted by tools/reference/make_tokenizer.py: pad 0, eos 1, bos 2, <image> last.
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->bos_id(), 2);
  const int32_t image = tok->TokenToId("<image>");
  EXPECT_EQ(image, tok->vocab_size() - 1);
  EXPECT_TRUE(tok->IsSpecial(image));
  EXPECT_FALSE(tok->IsSpecial(tok->TokenToId("<loc0000>")));
  EXPECT_EQ(tok->TokenToId("no such piece"), -1);
  EXPECT_EQ(tok->IdToPiece(-1), "");
  EXPECT_EQ(tok->IdToPiece(tok->vocab_size()), "");
  EXPECT_EQ(tok->IdToPiece(image), "<image>");
  // Specials are atomic; ids round-trip through pieces.
  auto ids = tok->Encode("<image><bos>caption en\n");
  ASSERT_TRUE(ids.ok());
  ASSERT_GE(ids->size(), 3u);
  EXPECT_EQ((*ids)[0], image);
  EXPECT_EQ((*ids)[1], tok->bos_id());
  const auto pieces = tok->Pieces(*ids);
  ASSERT_EQ(pieces.size(), ids->size());
  for (size_t i = 0; i < ids->size(); ++i) EXPECT_EQ(tok->TokenToId(pieces[i]), (*ids)[i]);
  EXPECT_EQ(tok->Decode(*ids, true), "caption en\n");
  // Out-of-range ids are skipped, not fatal.
  const std::vector<int32_t> junk = {-5, tok->vocab_size(), 1 << 30};
  EXPECT_EQ(tok->Decode(junk, false), "");
}

TEST(TokenizerTest, SentencePieceSpecialIds) {
  std::ifstream in(std::string(kTinyDir) + "/tokenizer.model", std::ios::binary);
  std::ostringstream data;
  data << in.rdbuf();
  auto tok = Tokenizer::FromSentencePiece(data.str());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->eos_id(), 1);
  EXPECT_EQ((*tok)->pad_id(), 0);
  EXPECT_TRUE((*tok)->IsSpecial(2));
  EXPECT_EQ((*tok)->TokenToId("<bos>"), 2);
  EXPECT_EQ((*tok)->TokenToId("no such piece"), -1);
  EXPECT_EQ((*tok)->TokenToId("<unk>"), 3);
}

TEST(TokenizerTest, InvalidUtf8InputIsAnError) {
  auto tok = LoadTiny();
  ASSERT_TRUE(tok);
  for (std::string bad : {std::string("\xff"), std::string("ab\xc3"), std::string("\xed\xa0\x80"),
                          std::string("\xc0\xaf"), std::string("\xf4\x90\x80\x80")}) {
    auto ids = tok->Encode(bad);
    ASSERT_FALSE(ids.ok());
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(ids.status().message().starts_with("[tokenizer]")) << ids.status().message();
  }
}

TEST(TokenizerTest, LoadMissingDirectory) {
  auto tok = Tokenizer::Load("testdata/text/no_such_dir");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kNotFound);
}

// A minimal valid tokenizer.json, then single mutations that must each be rejected.
constexpr const char* kMinimal = R"({
  "added_tokens": [{"id": 3, "content": "<s>", "special": true}],
  "normalizer": null, "pre_tokenizer": null, "decoder": null,
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})";

TEST(TokenizerTest, MinimalJsonWorks) {
  auto tok = Tokenizer::FromHfJson(kMinimal);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto ids = (*tok)->Encode("ab<s>ba");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{2, 3, 1, 0}));
  EXPECT_EQ((*tok)->bos_id(), 3);
  EXPECT_EQ((*tok)->vocab_size(), 4);
  EXPECT_EQ((*tok)->Decode(*ids, true), "ab b a");  // no decoder: tokens joined by spaces
}

TEST(TokenizerTest, MalformedJsonIsRejected) {
  const std::pair<const char*, StatusCode> cases[] = {
      {"", StatusCode::kDataLoss},  // JSON syntax errors: a corrupt file (exit 4)
      {"{", StatusCode::kDataLoss},
      {"[]", StatusCode::kInvalidArgument},
      {"{}", StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": [], "merges": []}})", StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a c"]}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "Unigram", "vocab": []}})", StatusCode::kUnimplemented},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": {"type": "Lowercase"}})",
       StatusCode::kUnimplemented},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": 5})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
           "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
           "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "decoder": {"type": "Sequence"}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "added_tokens": [{"id": 1}]})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "added_tokens": {}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": [], "dropout": 0.1}})",
       StatusCode::kUnimplemented},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
           "post_processor": {"type": "UnknownProcessing"}})",
       StatusCode::kUnimplemented},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
           "post_processor": {"type": "TemplateProcessing", "special_tokens": {},
             "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}], "pair": []}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
           "post_processor": {"type": "TemplateProcessing", "special_tokens": {},
             "single": [{"Sequence": {"id": "A", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}], "pair": []}})",
       StatusCode::kUnimplemented},
      {R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
           "post_processor": {"type": "BertProcessing", "sep": ["</s>"], "cls": ["<s>", 0]}})",
       StatusCode::kInvalidArgument},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "post_processor": {"type": "BertProcessing", "sep": ["</s>", 7], "cls": ["<s>", 0]}})",
       StatusCode::kInvalidArgument},
  };
  for (const auto& [json, code] : cases) {
    auto tok = Tokenizer::FromHfJson(json);
    ASSERT_FALSE(tok.ok()) << json;
    EXPECT_EQ(tok.status().code(), code) << json << " -> " << tok.status().ToString();
    EXPECT_TRUE(tok.status().message().starts_with("[tokenizer]")) << tok.status().message();
  }
  // Deep nesting is refused before the recursive parser sees it.
  auto deep = Tokenizer::FromHfJson(std::string(100000, '['));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested"), std::string::npos);
}

// A released Qwen2-VL tokenizer.json has "normalizer": {"type": "NFC"} (once refused): the tiny
// Qwen2-VL tokenizer with it loads, and a decomposed "e\u0301" encodes as the composed "\u00e9"
// (ids against tokenizers: golden_test.cc UnicodeNormalizerGolden).
TEST(TokenizerTest, QwenTokenizerWithNfcNormalizerLoads) {
  std::ifstream in("testdata/tiny/qwen2vl/tokenizer.json");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str());
  ASSERT_TRUE(j["normalizer"].is_null());
  j["normalizer"] = {{"type", "NFC"}};
  auto tok = Tokenizer::FromHfJson(j.dump());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto decomposed = (*tok)->Encode("caf\x65\xCC\x81 au lait");
  auto composed = (*tok)->Encode("caf\xC3\xA9 au lait");
  ASSERT_TRUE(decomposed.ok() && composed.ok());
  EXPECT_EQ(*decomposed, *composed);
}

TEST(TokenizerTest, MalformedSentencePieceIsRejected) {
  for (std::string bad :
       {std::string(), std::string("not a proto"), std::string("\x0a\xff\xff", 3)}) {
    auto tok = Tokenizer::FromSentencePiece(bad);
    ASSERT_FALSE(tok.ok());
    EXPECT_TRUE(tok.status().message().starts_with("[tokenizer]")) << tok.status().message();
  }
}

// Found by tokenizer_model_fuzz: a proto whose pieces make sentencepiece's trie builder
// (darts-clone) throw "zero-length key" instead of returning a status; it aborted the process.
TEST(TokenizerTest, SentencePieceThatThrowsIsRejected) {
  constexpr char kBytes[] =
      "\x18\x03\x0a\x0e\x0a\x05<bos>\x15\x00\x00\x00\x00\x18\x03\x0a\x0e\x0a\x05<unk>\x15\x00\x00"
      "\x00\x00\x18\x02\x0a\x0f\x0a\x06\x00\x00x00>\x15\x00\x00"
      "008>\xfa\x01\x09<lo0c9>00\xfa\x01\x09"
      "<loc00> ";
  auto tok = Tokenizer::FromSentencePiece(std::string(kBytes, sizeof(kBytes)));  // + the final 0
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("not a valid SentencePiece model"), std::string::npos)
      << tok.status().message();
}

TEST(TokenizerTest, LoadReportsPathOfBadFile) {
  const auto dir = std::filesystem::temp_directory_path() / "ocular_text_bad_tokenizer";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << "{\"model\": 3}";
  auto tok = Tokenizer::Load(dir.string());
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("tokenizer.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(StreamingDecoderTest, HoldsBackIncompleteCharacters) {
  auto tok = LoadTiny();
  ASSERT_TRUE(tok);
  // "😀" is not in the tiny vocabulary: it byte-falls back to four <0xNN> pieces.
  auto ids = tok->Encode(
      "a\xF0\x9F\x98\x80"
      "b");
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 6u);
  StreamingDecoder stream(*tok, false);
  std::vector<std::string> chunks;
  for (int32_t id : *ids) chunks.push_back(stream.Put(id));
  EXPECT_EQ(chunks, (std::vector<std::string>{"a", "", "", "", "\xF0\x9F\x98\x80", "b"}));
  EXPECT_EQ(stream.Finish(), "");
  // An unfinished sequence comes out as U+FFFD at Finish, like Decode.
  StreamingDecoder partial(*tok, false);
  EXPECT_EQ(partial.Put((*ids)[1]), "");
  EXPECT_EQ(partial.Finish(), tok->Decode(std::span<const int32_t>(ids->data() + 1, 1), false));
}

}  // namespace
}  // namespace ocular

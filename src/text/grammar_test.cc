// The grammar compilers and matcher: regexes against PCRE2 (an independent engine) on many
// strings, UTF-8 range splitting against the encoder, masks against token-by-token Accept,
// and the schema compiler's refusals. Schema answers are validated against Python's
// `jsonschema` end to end (tests/structured_output).
#include "text/grammar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/mapped_file.h"
#include "text/grammar_matcher.h"
#include "text/json_schema.h"
#include "text/regex.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace ocular::grammar {
namespace {

// The file at `path`, or "" when it cannot be read (the checks on it then fail).
std::string ReadAll(const std::string& path) {
  StatusOr<std::string> bytes = ReadFileToString(path);
  return bytes.ok() ? std::move(*bytes) : std::string();
}

// A vocabulary of every single byte (so any text can be fed byte by byte) plus a few
// multi-byte tokens, and id 0 as EOS.
std::shared_ptr<const TokenVocabulary> ByteVocab() {
  std::vector<std::optional<std::string>> v(1);  // 0: EOS (no bytes)
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"", "\":", "\",", "ab", "abc", "12", "true", " \"", "\xC3\xA9"})
    v.push_back(t);
  return std::make_shared<TokenVocabulary>(v);
}

bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g, ByteVocab(), {0});
  return m.AcceptBytes(text) && m.complete();
}

TEST(GrammarTest, Utf8SequencesCoverExactlyTheRange) {
  const std::pair<char32_t, char32_t> ranges[] = {{0x41, 0x5A},      {0x70, 0x90},
                                                  {0x7FF, 0x801},    {0xD700, 0xE100},
                                                  {0xFFF0, 0x10010}, {0x20, 0x10FFFF}};
  for (auto [lo, hi] : ranges) {
    const auto seqs = Utf8Sequences(lo, hi);
    for (char32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x11000 ? 1 : 97)) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string enc;
      text::AppendUtf8(&enc, cp);
      bool covered = false;
      for (const auto& s : seqs) {
        bool all = s.size() == enc.size();
        for (size_t i = 0; all && i < s.size(); ++i) {
          all = static_cast<uint8_t>(enc[i]) >= s[i].first &&
                static_cast<uint8_t>(enc[i]) <= s[i].second;
        }
        covered |= all;
      }
      EXPECT_EQ(covered, cp >= lo && cp <= hi)
          << std::hex << static_cast<uint32_t>(cp) << " in [" << static_cast<uint32_t>(lo) << ", "
          << static_cast<uint32_t>(hi) << "]";
    }
  }
}

TEST(GrammarTest, RegexAgreesWithPcre2) {
  const char* patterns[] = {"a(b|c)*d",
                            "[a-f0-9]{2,4}",
                            "x?y+z*",
                            "(ab|a)(bc|c)",
                            "[^abc]+",
                            "\\d{3}-\\d{4}",
                            "[\\w.]+@[a-z]+\\.(com|org)",
                            "(?:ha){2,}",
                            "a.c",
                            "[-+]?[0-9]*\\.?[0-9]+",
                            "\\s*[^ ]+",
                            "[\\]\\-]x",
                            "é+|ü",
                            "a{0,2}b{3}"};
  std::mt19937 rng(7);
  const std::string alphabet = "abcdxyz0123456789.-+@ _]\\ \xC3\xA9\xC3\xBC";
  for (const char* p : patterns) {
    auto g = RegexGrammar(p);
    ASSERT_TRUE(g.ok()) << p << ": " << g.status().message();
    auto grammar = std::make_shared<const Grammar>(std::move(*g));
    auto pcre = text::Regex::Compile(std::string("^(?:") + p + ")$");
    ASSERT_TRUE(pcre.ok());
    int positives = 0;
    for (int trial = 0; trial < 1000; ++trial) {
      std::string s;
      const int len = 1 + static_cast<int>(rng() % 9);
      for (int i = 0; i < len; ++i) {
        const char c = alphabet[rng() % alphabet.size()];
        s += c;
        if (static_cast<uint8_t>(c) >= 0xC0) s += alphabet[alphabet.find(c) + 1];  // whole é / ü
      }
      if (text::FindInvalidUtf8(s) != std::string_view::npos) continue;
      const bool want = !pcre->FindAll(s).empty();
      positives += want;
      EXPECT_EQ(Matches(grammar, s), want) << p << " on '" << s << "'";
    }
    // And texts drawn from the grammar itself (a random walk over allowed bytes) all match.
    auto vocab = ByteVocab();
    for (int walk = 0; walk < 200; ++walk) {
      GrammarMatcher m(grammar, vocab, {0});
      std::string s;
      while (s.size() < 40 && !(m.complete() && rng() % 3 == 0)) {
        const auto& mask = m.NextMask();
        std::vector<int32_t> bytes;
        for (int32_t id = 1; id <= 256; ++id) {
          if ((mask[id >> 5] >> (id & 31)) & 1) bytes.push_back(id);
        }
        if (bytes.empty()) break;
        const int32_t id = bytes[rng() % bytes.size()];
        ASSERT_TRUE(m.Accept(id));
        s += vocab->bytes(id);
      }
      if (!m.complete() || text::FindInvalidUtf8(s) != std::string_view::npos) continue;
      ++positives;
      EXPECT_FALSE(pcre->FindAll(s).empty()) << p << " generated '" << s << "'";
    }
    EXPECT_GT(positives, 20) << p;
  }
}

// \S is the ASCII complement of \s here (Python's and PCRE2's are Unicode-wide): a subset.
TEST(GrammarTest, RegexClassComplementsAreAscii) {
  auto g = std::make_shared<const Grammar>(std::move(RegexGrammar("\\S\\W\\D").value()));
  EXPECT_TRUE(Matches(g, "a.b"));
  EXPECT_FALSE(Matches(g, "\xC3\xA9.b"));
}

TEST(GrammarTest, RegexRefusesWhatItDoesNotImplement) {
  for (const char* p : {"(?=a)b", "(a)\\1", "\\bword", "a**", "(ab", "a^b", "[z-a]"}) {
    EXPECT_FALSE(RegexGrammar(p).ok()) << p;
  }
}

// Nested repetition counts multiply: refused from the counts before anything is built
// (json_schema_fuzz found `[^mo-za]?{52}{852}`, which took seconds to reach the node cap), with
// the node cap's error; a pattern just under the cap still compiles.
TEST(GrammarTest, NestedRepetitionsPastTheCapAreRefusedBeforeBuilding) {
  for (const char* p : {"(a{10000}){10000}", "[^mo-za]?{52}{852}{1000}", "((ab){300}c){5000}",
                        "(x|y{3000}){700}"}) {
    GrammarBuilder b;
    const StatusOr<Frag> f = CompileRegex(p, {}, &b);
    ASSERT_FALSE(f.ok()) << p;
    EXPECT_EQ(f.status().message().rfind("[grammar] the grammar needs more than 2000000", 0), 0u)
        << f.status().ToString();
    EXPECT_LT(b.node_count(), 10) << p;  // nothing was expanded
  }
  EXPECT_TRUE(RegexGrammar("(a{1000}){100}").ok());
  EXPECT_TRUE(RegexGrammar("a{10000}").ok());
}

// Every token the mask allows is accepted by Accept, and no other one is (checked over the
// byte vocabulary along a JSON text).
TEST(GrammarTest, MaskAgreesWithAccept) {
  auto g = JsonSchemaGrammar(R"({"type":"object","properties":{"a":{"type":"string"},
      "n":{"type":"integer","minimum":-5,"maximum":120}},"required":["n"]})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto grammar = std::make_shared<const Grammar>(std::move(*g));
  auto vocab = ByteVocab();
  GrammarMatcher m(grammar, vocab, {0});
  const std::string text = "{\"a\": \"x\xC3\xA9\", \"n\": 117}";
  for (size_t i = 0; i <= text.size(); ++i) {
    const std::vector<uint32_t> mask = m.NextMask();
    for (int32_t id = 0; id < vocab->size(); ++id) {
      GrammarMatcher probe = m;
      const bool allowed = (mask[id >> 5] >> (id & 31)) & 1;
      EXPECT_EQ(probe.Accept(id), allowed) << "at " << i << " token " << id;
    }
    if (i < text.size()) {
      ASSERT_TRUE(m.AcceptBytes(text.substr(i, 1))) << i;
    }
  }
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.Accept(0));
  EXPECT_TRUE(m.finished());
}

TEST(GrammarTest, SchemaBoundsAndShapes) {
  struct Case {
    const char* schema;
    std::vector<std::string> yes, no;
  };
  const Case cases[] = {
      {R"({"type":"integer","minimum":-12,"maximum":305})",
       {"-12", "-1", "0", "9", "10", "99", "100", "299", "305"},
       {"-13", "-0", "306", "400", "01", "1000", "1.0"}},
      {R"({"type":"integer","exclusiveMinimum":0})", {"1", "42", "1000000"}, {"0", "-1"}},
      {R"({"type":"number","minimum":0,"maximum":1})",
       {"0", "0.5", "1", "1.0", "1.000"},
       {"1.01", "-0.5", "2"}},
      {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":10})",
       {"0.001", "5", "9.99"},
       {"0", "0.0", "10", "-1"}},
      {R"({"type":"number","minimum":-3,"maximum":-1})",
       {"-3", "-2.5", "-1", "-1.00"},
       {"-0.5", "-3.5", "0", "1"}},
      {R"({"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2})",
       {"[true]", "[ false , true ]"},
       {"[]", "[true,true,true]", "[true,]"}},
      {R"({"type":"object","properties":{"a":{"type":"null"},"b":{"const":7},"c":{"enum":["x",2]}},"required":["b"]})",
       {R"({"b":7})", R"({"a":null,"b":7})", R"({"b":7,"c":"x"})",
        R"({ "a" : null , "b" : 7 , "c" : 2 })"},
       {"{}", R"({"a":null})", R"({"b":7,"a":null})", R"({"b":7,})", R"({"b":8})"}},
      {R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"}}})",
       {"{}", "{ }", R"({"b":null})", R"({"a":null,"b":null})"},
       {R"({,"b":null})", R"({"a":null,})"}},
      {R"({"type":"string","pattern":"^[A-Z]{2}\\d$"})",
       {"\"AB1\""},
       {"\"AB\"", "\"ab1\"", "\"AB12\""}},
      {R"({"type":"string","pattern":"x\"y"})", {R"("x\"y")", R"("ax\"yb")"}, {R"("xy")"}},
      {R"({"type":"string","maxLength":2})", {R"("")", R"("é\n")"}, {R"("abc")"}},
      {R"({"type":"string","format":"date"})",
       {R"("2024-02-28")", R"("0001-11-30")"},
       {R"("2024-13-01")", R"("0000-01-01")", R"("2024-11-31")"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
          "required":["kids"]}},"$ref":"#/$defs/node"})",
       {R"({"kids":[]})", R"({"kids":[{"kids":[]},{"kids":[{"kids":[]}]}]})"},
       {R"({"kids":[{}]})"}},
      {R"({"anyOf":[{"type":"string"},{"type":"array","items":{"type":"integer"}}]})",
       {R"("s")", "[1,2]"},
       {"1", "[\"s\"]"}},
      {R"({"type":["integer","null"]})", {"3", "null"}, {"\"3\""}},
  };
  for (const Case& c : cases) {
    auto g = JsonSchemaGrammar(c.schema);
    ASSERT_TRUE(g.ok()) << c.schema << ": " << g.status().message();
    auto grammar = std::make_shared<const Grammar>(std::move(*g));
    for (const auto& s : c.yes)
      EXPECT_TRUE(Matches(grammar, s)) << c.schema << " should accept " << s;
    for (const auto& s : c.no)
      EXPECT_FALSE(Matches(grammar, s)) << c.schema << " should reject " << s;
  }
}

TEST(GrammarTest, AnyJsonObject) {
  auto g = std::make_shared<const Grammar>(JsonObjectGrammar());
  for (const char* s : {"{}", R"({"a":[1,-2.5e3,{"b":null}],"c":"\u00e9"})", " {\"x\" : true}\n"}) {
    EXPECT_TRUE(Matches(g, s)) << s;
  }
  for (const char* s : {"[]", "{\"a\"}", "{'a':1}", "{\"a\":01}"}) EXPECT_FALSE(Matches(g, s)) << s;
}

TEST(GrammarTest, UnsupportedSchemasNameTheKeyword) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"object","properties":{"a":{"type":"string","oneOf":[]}}})",
       "'oneOf' at /properties/a"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"integer","multipleOf":3})", "'multipleOf'"},
      {R"({"type":"object","patternProperties":{}})", "'patternProperties'"},
      {R"({"type":"string","format":"hostname"})", "format 'hostname'"},
      {R"j({"type":"string","pattern":"(?=x)"})j", "lookahead"},
      {R"({"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"}]}}})", "left recursion"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"type":"object","properties":{},"required":["x"]})", "\"x\" is not in"},
      {R"({"type":"number","minimum":0.5})", "fractional 'minimum'"},
      {"{not json", "not valid JSON"},
  };
  for (auto [schema, want] : cases) {
    auto g = JsonSchemaGrammar(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.status().message().find(want), std::string::npos) << g.status().message();
    EXPECT_NE(g.status().message().find("[json-schema]"), std::string::npos)
        << g.status().message();
  }
}

TEST(GrammarTest, MasksAreCachedPerState) {
  auto g = std::make_shared<const Grammar>(JsonObjectGrammar());
  GrammarMatcher m(g, ByteVocab(), {0});
  ASSERT_TRUE(m.AcceptBytes("{\"k\":\"aaa"));
  m.NextMask();
  const auto computed = m.stats().masks_computed;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(m.AcceptBytes("a"));
    m.NextMask();
  }
  EXPECT_EQ(m.stats().masks_computed, computed);  // inside a string: one state
  EXPECT_EQ(m.stats().mask_hits, 5);
}

// A pattern of overlapping bounded repetitions (json_schema_fuzz found one that took 42 s)
// makes DFA states sets of thousands of stacks: past its work budget for one call the matcher
// fails for good with a "[grammar]" error and allows nothing; on the test corpus's schemas
// the default budget is never reached.
TEST(GrammarTest, TooComplexPatternFailsWithinTheBudget) {
  std::string pattern = "^(?:";
  for (int i = 1; i <= 8; ++i) pattern += (i > 1 ? "|.{" : ".{") + std::to_string(i) + ",20}";
  pattern += "){6}$";
  auto g = JsonSchemaGrammar(R"({"type": "string", "pattern": ")" + pattern + R"("})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  GrammarMatcher m(std::make_shared<const Grammar>(std::move(*g)), ByteVocab(), {0},
                   int64_t{1} << 16);
  int steps = 0;
  for (; steps < 64 && !m.failed(); ++steps) {
    m.NextMask();
    if (m.failed()) break;
    ASSERT_TRUE(m.AcceptBytes(steps == 0 ? "\"" : "a"));
  }
  ASSERT_TRUE(m.failed()) << steps << " steps";
  EXPECT_EQ(m.error().message().rfind("[grammar] the schema or pattern is too complex", 0), 0u)
      << m.error().ToString();
  EXPECT_LE(m.stats().max_call_work, (int64_t{1} << 16) + 256);
  const std::vector<uint32_t>& mask = m.NextMask();
  EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; }));
  EXPECT_FALSE(m.AcceptBytes("a"));
  EXPECT_FALSE(m.Accept(0));
  EXPECT_FALSE(m.complete());

  std::ifstream corpus("testdata/structured/schemas.jsonl");
  std::string line;
  int schemas = 0;
  while (std::getline(corpus, line)) {
    auto schema = nlohmann::json::parse(line)["schema"].dump();
    auto cg = JsonSchemaGrammar(schema);
    ASSERT_TRUE(cg.ok()) << schema;
    GrammarMatcher cm(std::make_shared<const Grammar>(std::move(*cg)), ByteVocab(), {0});
    for (int step = 0; step < 48 && !cm.finished(); ++step) {
      const std::vector<uint32_t>& mask = cm.NextMask(48 - step);
      const auto word = std::find_if(mask.begin(), mask.end(), [](uint32_t w) { return w; });
      if (word == mask.end()) break;
      ASSERT_TRUE(cm.Accept(static_cast<int32_t>(word - mask.begin()) * 32 + __builtin_ctz(*word)));
    }
    EXPECT_FALSE(cm.failed()) << schema;
    EXPECT_LT(cm.stats().max_call_work, GrammarMatcher::kDefaultWorkPerCall / 8) << schema;
    ++schemas;
  }
  EXPECT_EQ(schemas, 60);
}

// A matcher builds at most kMaxStates DFA states (1 KB each): `(a|b)*a(a|b){16}` has 2^17,
// and a long random text of a / b meets more than 2^16 of them.
TEST(GrammarTest, StatesAreBounded) {
  auto g = RegexGrammar("(a|b)*a(a|b){16}");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  GrammarMatcher m(std::make_shared<const Grammar>(std::move(*g)), ByteVocab(), {0});
  std::mt19937 rng(1);
  bool accepted = true;
  for (int chunk = 0; chunk < 400 && accepted; ++chunk) {
    std::string text(1000, 'a');
    for (char& c : text) c = rng() & 1 ? 'a' : 'b';
    accepted = m.AcceptBytes(text);
  }
  EXPECT_FALSE(accepted);
  ASSERT_TRUE(m.failed());
  EXPECT_NE(m.error().message().find("more than 65536 states"), std::string::npos)
      << m.error().ToString();
  EXPECT_EQ(m.stats().states, int64_t{GrammarMatcher::kMaxStates});
}

// A token's bytes, concatenated, are the text it decodes to (SentencePiece-style byte
// fallback in tokenizer.json and tokenizer.model, GPT-2 byte-level in mllama's).
TEST(GrammarTest, TokenBytesConcatenateToTheDecodedText) {
  const std::string text = "{\"caption\": \"a red \xC3\xA9toile\", \"n\": [1, 2]}\n\xE2\x9C\x93";
  for (const char* dir : {"testdata/tiny/pg2", "testdata/tiny/mllama"}) {
    for (bool sp : {false, true}) {
      if (sp && !std::ifstream(std::string(dir) + "/tokenizer.model")) continue;  // mllama's
      auto tok = sp ? Tokenizer::FromSentencePiece(ReadAll(std::string(dir) + "/tokenizer.model"))
                    : Tokenizer::Load(dir);
      ASSERT_TRUE(tok.ok()) << dir << ": " << tok.status().message();
      auto ids = (*tok)->Encode(text);
      ASSERT_TRUE(ids.ok());
      std::string bytes;
      for (int32_t id : *ids) bytes += (*tok)->TokenBytes(id).value_or("<none>");
      EXPECT_EQ(bytes, (*tok)->Decode(*ids, true)) << dir << (sp ? " (sentencepiece)" : "");
      EXPECT_EQ(bytes, text) << dir;
      EXPECT_FALSE((*tok)->TokenBytes((*tok)->eos_id()).has_value()) << dir;
    }
  }
}

// With tokens_left, a random walk that uses every token it may still ends complete.
TEST(GrammarTest, TokensLeftSteersToACompleteText) {
  auto g = JsonSchemaGrammar(R"({"type":"object","properties":{"a":{"type":"string"},
      "b":{"type":"array","items":{"type":"integer"}},"c":{"enum":["long value","x"]}},
      "required":["a","b","c"]})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto grammar = std::make_shared<const Grammar>(std::move(*g));
  auto vocab = ByteVocab();
  std::mt19937 rng(3);
  for (int walk = 0; walk < 100; ++walk) {
    const int max_tokens = 25 + walk % 20;
    GrammarMatcher m(grammar, vocab, {0});
    std::string text;
    for (int used = 0; used < max_tokens; ++used) {
      const auto& mask = m.NextMask(max_tokens - used);
      std::vector<int32_t> ids;
      for (int32_t id = 1; id < vocab->size(); ++id) {
        if ((mask[id >> 5] >> (id & 31)) & 1) ids.push_back(id);
      }
      if (ids.empty()) break;
      const int32_t id = ids[rng() % ids.size()];
      ASSERT_TRUE(m.Accept(id));
      text += vocab->bytes(id);
    }
    EXPECT_TRUE(m.complete()) << max_tokens << " tokens: " << text;
  }
}

// The shortest completion is exact: with exactly as many tokens left as the shortest text
// has bytes, every walk over single-byte tokens ends complete at that length (nested
// rules: an array of objects, strings, integers).
TEST(GrammarTest, TokensLeftAtTheShortestLengthCompletes) {
  auto g = JsonSchemaGrammar(R"({"type":"object","properties":{"a":{"type":"string"},
      "b":{"type":"array","items":{"type":"object","properties":{"n":{"type":"integer"}},
      "required":["n"]},"minItems":2},"c":{"enum":["long value","x"]}},
      "required":["a","b","c"]})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto grammar = std::make_shared<const Grammar>(std::move(*g));
  auto vocab = ByteVocab();
  const std::string shortest = R"({"a":"","b":[{"n":0},{"n":0}],"c":"x"})";
  std::mt19937 rng(5);
  for (int walk = 0; walk < 50; ++walk) {
    GrammarMatcher m(grammar, vocab, {0});
    std::string text;
    const int n = static_cast<int>(shortest.size());
    for (int used = 0; used < n; ++used) {
      const auto& mask = m.NextMask(n - used);
      std::vector<int32_t> ids;
      for (int32_t id = 1; id <= 256; ++id) {  // single bytes
        if ((mask[id >> 5] >> (id & 31)) & 1) ids.push_back(id);
      }
      ASSERT_FALSE(ids.empty());
      const int32_t id = ids[rng() % ids.size()];
      ASSERT_TRUE(m.Accept(id));
      text += vocab->bytes(id);
    }
    EXPECT_TRUE(m.complete()) << text;
    EXPECT_EQ(text.size(), shortest.size()) << text;
  }
}

}  // namespace
}  // namespace ocular::grammar

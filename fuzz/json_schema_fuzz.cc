// libFuzzer target: the JSON Schema compiler (src/text/json_schema) on arbitrary schema text,
// then a short walk of the grammar over a byte vocabulary. A compile error must carry
// "[json-schema]" (or "[grammar]" from the builder's size cap); a compiled grammar must never crash
// the matcher, which may give up only with a "[grammar]" error (its work budget, smaller here: 1/32
// of the default). The walk also stops after 2^18 units of work in all, so that a heavy grammar
// costs one input ~0.05 s rather than seconds (a test corpus schema needs at most 32k units per
// call). Seeds: testdata/structured/*.jsonl's schemas (scripts/fuzz).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "text/grammar_matcher.h"
#include "text/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ocular::grammar;
  static const auto vocab = [] {
    std::vector<std::optional<std::string>> v(1);  // id 0: EOS
    for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
    return std::make_shared<const TokenVocabulary>(v);
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = JsonSchemaGrammar(text);
  if (!g.ok()) {
    // The schema compiler's errors, or the grammar builder's ("[grammar] ... more than N
    // automaton nodes": huge repetition counts).
    const std::string_view m = g.status().message();
    if (m.rfind("[json-schema] ", 0) != 0 && m.rfind("[grammar] ", 0) != 0) std::abort();
    return 0;
  }
  GrammarMatcher m(std::make_shared<const Grammar>(std::move(*g)), vocab, {0},
                   GrammarMatcher::kDefaultWorkPerCall / 32);
  // Always the lowest allowed byte: a deterministic path of at most 64 steps.
  for (int step = 0; step < 64 && !m.finished() && m.stats().work < (1 << 18); ++step) {
    const auto& mask = m.NextMask(64 - step);
    int32_t id = -1;
    for (int32_t i = 0; i < vocab->size() && id < 0; ++i) {
      if ((mask[i >> 5] >> (i & 31)) & 1) id = i;
    }
    if (id < 0) {
      if (m.failed() && m.error().message().rfind("[grammar] ", 0) != 0) std::abort();
      break;
    }
    if (!m.Accept(id)) std::abort();  // the mask allowed it
  }
  return 0;
}

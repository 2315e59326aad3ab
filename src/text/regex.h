// A compiled Unicode regular expression (PCRE2, UTF + UCP), for the Split pre-tokenizer
// and Replace normalizer/decoder patterns of tokenizer.json. Internal to src/text.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ocular/status.h"

namespace ocular::text {

class Regex {
 public:
  // Compiles a pattern as `tokenizers` writes them (Oniguruma syntax; the subset used by
  // GPT-2 / Llama 3 style splits means the same in PCRE2 with UCP, including \s matching
  // U+0085, see regex_test.cc).
  static StatusOr<Regex> Compile(std::string_view pattern);

  // Non-overlapping matches, left to right, as [begin, end) byte ranges.
  // REQUIRES: `s` is valid UTF-8. Empty matches are not reported.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view s) const;

 private:
  struct CodeDeleter {
    void operator()(void* code) const;
  };
  std::shared_ptr<void> code_;  // pcre2_code_8*, shared: compiled code is immutable
};

}  // namespace ocular::text

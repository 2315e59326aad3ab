#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace ocular::text {

void Regex::CodeDeleter::operator()(void* code) const {
  pcre2_code_free(static_cast<pcre2_code*>(code));
}

StatusOr<Regex> Regex::Compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return Error(StatusCode::kInvalidArgument, "tokenizer", "bad regex '", pattern, "' at offset ",
                 offset, ": ", reinterpret_cast<const char*>(message));
  }
  Regex regex;
  regex.code_ = std::shared_ptr<void>(code, CodeDeleter());
  return regex;
}

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view s) const {
  std::vector<std::pair<size_t, size_t>> matches;
  auto* code = static_cast<pcre2_code*>(code_.get());
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  while (start <= s.size()) {
    const int rc =
        pcre2_match(code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: treat the rest as text
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t b = ovector[0], e = ovector[1];
    if (e > b) {
      matches.emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step over one character.
      start = b + 1;
      while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;
    }
  }
  return matches;
}

}  // namespace ocular::text

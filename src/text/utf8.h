// UTF-8 helpers shared by the tokenizers. Internal to src/text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ocular::text {

// Decodes the character at s[*pos] and advances *pos. Returns false (and leaves *pos) on an
// invalid or truncated sequence, an overlong form, a surrogate or a value above U+10FFFF.
bool NextCodepoint(std::string_view s, size_t* pos, char32_t* cp);

// Byte offset of the first invalid sequence, or std::string_view::npos if `s` is valid.
size_t FindInvalidUtf8(std::string_view s);

void AppendUtf8(std::string* out, char32_t cp);

// Like Rust's String::from_utf8_lossy (what `tokenizers` uses): each maximal invalid
// subpart (Unicode "substitution of maximal subparts") becomes one U+FFFD.
std::string Utf8Lossy(std::string_view bytes);

// The Unicode White_Space property (Rust's char::is_whitespace and regex \s).
bool IsWhiteSpace(char32_t cp);

// Length in bytes of the UTF-8 sequence introduced by lead byte `b` (1 for invalid leads).
inline size_t Utf8SequenceLength(unsigned char b) {
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return b < 0xF8 ? 4 : 1;
}

}  // namespace ocular::text

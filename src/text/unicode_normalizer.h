// tokenizer.json's Unicode normalizers NFC / NFD / NFKC / NFKD (tokenizers/src/normalizers/
// unicode.rs), with ICU. Internal.
#pragma once

#include <memory>
#include <string_view>

#include "ocular/status.h"
#include "text/hf_components.h"

namespace ocular::text {

// `form` is "NFC", "NFD", "NFKC" or "NFKD"; anything else is kInvalidArgument.
//
// `tokenizers` 0.22 normalizes with the crate unicode-normalization-alignments, whose tables
// are Unicode 9.0's: a character assigned later is, to it, a starter with no decomposition
// (U+32FF SQUARE ERA NAME REIWA stays as it is under NFKC). The normalizer therefore only
// touches characters assigned by Unicode 9.0 (ICU's FilteredNormalizer2 over [:age=9.0:]);
// the rest pass through unchanged and split the text around them, as they do there.
StatusOr<std::unique_ptr<Normalizer>> MakeUnicodeNormalizer(std::string_view form);

}  // namespace ocular::text

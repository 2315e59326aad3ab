// Bounded reads of small untrusted files (configs, tokenizers, indexes) and JSON parsing with
// positions in errors. Model directories are untrusted input: a name in them may be a FIFO
// (an unbounded blocking read), a link to /dev/zero (an endless one) or a huge file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ocular/status.h"

namespace ocular {

// Caps for the files a model directory holds. Real PaliGemma files are far below them
// (config.json ~1 KiB, index ~100 KiB, tokenizer.json ~17 MiB, tokenizer.model ~4 MiB).
inline constexpr int64_t kMaxConfigFileBytes = int64_t{16} << 20;      // *.json configs, index
inline constexpr int64_t kMaxTokenizerFileBytes = int64_t{256} << 20;  // tokenizer.{json,model}

// Reads the whole of `path` if it is a regular file of at most `max_bytes` bytes.
// Never blocks on a FIFO (opened non-blocking, then refused) and never reads past
// `max_bytes`, even if the file grows meanwhile. Errors carry "[component] path: ...":
//   kNotFound (absent), kIoError (unreadable, or not a regular file: FIFO, device, directory),
//   kResourceExhausted (larger than max_bytes; the message names the limit).
StatusOr<std::string> ReadFileBounded(const std::string& path, int64_t max_bytes,
                                      std::string_view component);

// "line L, column C" (both 1-based; columns count bytes) of byte `offset` in `text`.
std::string TextPosition(std::string_view text, size_t offset);

// `value` as JSON for an error message, cut to at most `max_chars` characters ("..." marks a
// cut): never a 300-digit number or a whole object in a message.
std::string ShortJson(const nlohmann::json& value, size_t max_chars = 40);

// Parses JSON text; a syntax error becomes kDataLoss "[component] source: invalid JSON at
// line L, column C: <reason>", and so does nesting deeper than `max_depth` arrays/objects
// (refused before parsing: nlohmann recurses once per level). Duplicate keys keep the last
// value (as Python's json does).
StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& source,
                                   std::string_view component, int max_depth = 64);

}  // namespace ocular

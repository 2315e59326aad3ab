// The checkpoint's chat template: where it is read from and which known template it is. ocular
// does not interpret Jinja: each family formats a conversation natively (gemma3/processor.cc,
// mllama/processor.cc) and applies it only when the checkpoint's template is one it recognises
// by fingerprint; tests/golden/chat_template_test.cc proves each native format equal to
// transformers' apply_chat_template on a corpus of conversations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_set.h"
#include "ocular/chat.h"
#include "ocular/status.h"

namespace ocular {

// The chat template text as transformers 4.57 loads it: chat_template.jinja, else
// chat_template.json's "chat_template", else tokenizer_config.json's "chat_template" (a string,
// or the entry named "default" of a list of {name, template}); "" when there is none. Errors: a
// file that cannot be read or parsed.
StatusOr<std::string> ReadChatTemplate(const FileSet& files);

// FNV-1a 64 of the template after CRLF -> LF and with leading and trailing whitespace removed
// (how a copy saved by another tool may differ without changing what the template renders).
uint64_t ChatTemplateFingerprint(std::string_view text);

// How a family's processor knows its checkpoint's template.
struct ChatTemplateInfo {
  enum class Kind { kNone, kKnown, kUnknown };
  Kind kind = Kind::kNone;
  uint64_t fingerprint = 0;
  size_t bytes = 0;
  std::string where;  // the files it came from, for messages
};
// Reads the template of `files` and looks its fingerprint up in `known`.
StatusOr<ChatTemplateInfo> IdentifyChatTemplate(const FileSet& files,
                                                const std::vector<uint64_t>& known);
// Processor::chat_format for a family whose format is `name`: `name` when the template is
// known, "unrecognized" when it is not, "" when there is none.
std::string ChatFormatName(const ChatTemplateInfo& info, std::string_view name);
// Ok for kKnown; else the kUnimplemented error `--chat` and the server report (exit 5), naming
// `family_templates` (the templates ocular knows for this family).
Status CheckChatTemplate(const ChatTemplateInfo& info, std::string_view family_templates);

// Jinja's `trim` filter (Python str.strip()): removes leading and trailing Unicode whitespace
// (str.isspace: ASCII \t\n\v\f\r and space, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000).
std::string_view PyStrip(std::string_view text);

// The text of a system message: its text parts joined by "\n". Error: an image part.
StatusOr<std::string> SystemText(const ChatMessage& message);

// The checks every family's chat formatting relies on: roles "system", "user" or "assistant",
// images only in user messages, and as many image parts as `n_images`.
Status CheckChatMessages(const std::vector<ChatMessage>& messages, int n_images);

// Today's date as strftime_now("%d %b %Y") gives it in transformers (local time): "01 Dec 2026".
std::string TodayDate();

}  // namespace ocular

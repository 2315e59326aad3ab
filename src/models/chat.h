// The checkpoint's chat template: where it is read from, the special tokens transformers hands
// it, and rendering a conversation with it (src/text/jinja, measured equal to Python jinja2) as
// transformers' processors do in apply_chat_template. tests/golden/chat_template_test.cc
// checks the renders and ids of the families' templates against transformers.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_set.h"
#include "models/processor.h"
#include "ocular/chat.h"
#include "ocular/status.h"

namespace ocular {

namespace jinja {
class Template;
}

// The chat template text as transformers 4.57 loads it: chat_template.jinja, else
// chat_template.json's "chat_template", else tokenizer_config.json's "chat_template" (a string,
// or the entry named "default" of a list of {name, template}); "" when there is none. Errors: a
// file that cannot be read or parsed.
StatusOr<std::string> ReadChatTemplate(const FileSet& files);

// A conversation as transformers' processors take it: {"role", "content"} where a lone text
// part is a plain string and other contents are lists of {"type": "image"} and
// {"type": "text", "text": ...}.
nlohmann::ordered_json ChatMessagesJson(const std::vector<ChatMessage>& messages);

class ChatTemplate {
 public:
  // Reads the template (ReadChatTemplate) and the special tokens transformers passes it
  // (tokenizer.special_tokens_map: tokenizer_config.json's bos_token, eos_token, unk_token,
  // sep_token, pad_token, cls_token, mask_token and additional_special_tokens, each a string or
  // an AddedToken object; special_tokens_map.json for those it lacks). A template that does not
  // parse is not an error here (raw prompts still work): Render reports it.
  static StatusOr<ChatTemplate> Load(const FileSet& files);

  bool has_template() const { return !source_.empty(); }
  // The tokenizer's bos_token ("" when it has none).
  const std::string& bos_token() const { return bos_token_; }

  // apply_chat_template(messages, add_generation_prompt=options.add_generation_prompt,
  // **special_tokens, **kwargs) with tools=None and documents=None; kwargs are
  // options.chat_template_kwargs (a JSON object) and date_string=options.date when it is set.
  // options.chat_template, when set, replaces the checkpoint's template. `now` is what
  // strftime_now formats. Errors: no template (kUnimplemented); a template that is not valid
  // Jinja (kDataLoss) or uses a construct ocular does not implement (kUnimplemented, naming it
  // and its line); a conversation the template refuses (kInvalidArgument, its reason).
  StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                               const PromptOptions& options,
                               std::time_t now = std::time(nullptr)) const;

 private:
  std::string source_;
  std::string where_;
  std::shared_ptr<const StatusOr<jinja::Template>> parsed_;
  nlohmann::ordered_json special_ = nlohmann::ordered_json::object();
  std::string bos_token_;
};

// The checks every family's chat prompt relies on: roles "system", "user" or "assistant",
// images only in user messages, and as many image parts as `n_images`.
Status CheckChatMessages(const std::vector<ChatMessage>& messages, int n_images);

// Today's date as strftime_now("%d %b %Y") gives it in transformers (local time): "01 Dec 2026".
std::string TodayDate();

// A Processor whose chats are the checkpoint's chat template (Gemma 3, mllama): chat_format and
// RenderChat come from `chat_`, which the family's Load fills (ChatTemplate::Load); the family
// writes BuildChatPrompt, tokenizing the render as its HF processor does.
class TemplateChatProcessor : public Processor {
 public:
  std::string chat_format() const override { return chat_.has_template() ? "jinja" : ""; }
  // The checkpoint's chat template rendered (ChatTemplate::Render).
  StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages,
                                   const PromptOptions& options) const override {
    return chat_.Render(messages, options);
  }

 protected:
  // processing_utils.py apply_chat_template: a rendered text that starts with bos_token is
  // tokenized without special tokens (so with that one bos); else the processor adds its own.
  bool AddSpecialTokensTo(const std::string& rendered) const {
    const std::string& bos = chat_.bos_token();
    return bos.empty() || !rendered.starts_with(bos);
  }

  ChatTemplate chat_;
};

}  // namespace ocular

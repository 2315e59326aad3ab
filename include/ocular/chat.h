// A conversation for Engine::GenerateChat: messages with roles, text and image parts, as an
// OpenAI / transformers chat conversation holds them. The families with a chat template
// (Gemma 3, Llama 3.2 Vision) format it as their checkpoint's template does (docs/models.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ocular {

struct ChatPart {
  bool is_image = false;  // an image: the next one of the request's images, in order
  std::string text;       // the text of a text part (used as is: no marker is expanded)
};

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::vector<ChatPart> content;

  static ChatMessage Text(std::string role, std::string text) {
    return {std::move(role), {ChatPart{false, std::move(text)}}};
  }
};

// A user turn written as a prompt: `text` is split at each `marker` (ModelInfo::image_marker)
// into text parts and image parts, in order; when the text has no marker, `n_images` image
// parts come first, then the text (the usual [image…, text] content of a chat turn). Empty
// text parts are dropped.
ChatMessage UserTurn(std::string_view text, int n_images, std::string_view marker);

}  // namespace ocular

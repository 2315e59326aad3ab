// The per-family front end: how a prompt with images becomes token ids and pixel values
// (the HF "processor": tokenizer + image processor + prompt template).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "image/image.h"
#include "ocular/status.h"
#include "text/tokenizer.h"

namespace ocular {

struct PromptOptions {
  // PaliGemma: tokenize the "\n" after the prompt separately (big_vision / gemma.cpp style)
  // instead of in one call with it (HF).
  bool separate_newline = false;
  // The text is one user turn: wrap it in the family's chat template where implemented.
  bool chat = false;
};

struct Prompt {
  std::vector<int32_t> ids;  // image tokens included
  int64_t prefix_len = 0;    // positions [0, prefix_len) attend bidirectionally
};

class Processor {
 public:
  virtual ~Processor() = default;
  virtual const Tokenizer& tokenizer() const = 0;
  // The ids for `n_images` images and the user's text. Errors: text that is not valid
  // UTF-8, text that spells the image token itself.
  virtual StatusOr<Prompt> BuildPrompt(int n_images, const std::string& text,
                                       const PromptOptions& options) const = 0;
  // Pixel values [3, R, R] of one decoded image, as the family's image processor makes them.
  virtual StatusOr<Tensor> Pixels(const Image& image) const = 0;
};

}  // namespace ocular

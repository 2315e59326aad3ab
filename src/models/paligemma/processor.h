// PaliGemmaProcessor: "<image>" × N per image + "<bos>" + prompt + "\n", SigLIP preprocessing.
// Reference: transformers/models/paligemma/processing_paligemma.py.
#pragma once

#include <memory>
#include <string>

#include "image/preprocess.h"
#include "models/config.h"
#include "models/processor.h"

namespace ocular::paligemma {

class PaliGemmaProcessor final : public Processor {
 public:
  // Loads the tokenizer and preprocessor_config.json of `dir`. Errors if the tokenizer's
  // "<image>" token disagrees with the config's image_token_index.
  static StatusOr<std::unique_ptr<PaliGemmaProcessor>> Load(const FileSet& files,
                                                            const PaliGemmaConfig& config);

  const Tokenizer& tokenizer() const override { return *tok_; }
  StatusOr<Prompt> BuildPrompt(int n_images, const std::string& text,
                               const PromptOptions& options) const override;
  StatusOr<Tensor> Pixels(const Image& image) const override;
  int64_t image_tokens() const override { return image_tokens_; }

 private:
  std::unique_ptr<Tokenizer> tok_;
  PreprocessConfig pp_;
  int image_size_ = 0, image_tokens_ = 0;
  int32_t image_token_id_ = -1;
};

}  // namespace ocular::paligemma

// Gemma3Processor: with pan-and-scan, markers of cropped images first gain their crops'
// markers (pan_and_scan.h); then each "<start_of_image>" in the prompt becomes
// "\n\n<start_of_image>" + "<image_soft_token>" × mm_tokens_per_image + "<end_of_image>\n\n",
// tokenized with <bos> first; Gemma3ImageProcessor's resize / rescale / normalize; the
// checkpoint's chat template rendered (RenderChat).
// Reference: transformers 4.57 models/gemma3/processing_gemma3.py, image_processing_gemma3.py.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "image/preprocess.h"
#include "models/chat.h"
#include "models/gemma3/config.h"
#include "models/gemma3/pan_and_scan.h"
#include "models/processor.h"

namespace ocular::gemma3 {

class Gemma3Processor final : public TemplateChatProcessor {
 public:
  // The tokenizer and, for model_type gemma3, preprocessor_config.json. Errors: the
  // tokenizer's <start_of_image> / <image_soft_token> / <end_of_image> ids disagree with
  // config.json; pan_and_scan_* values that are not numbers in range (kDataLoss).
  static StatusOr<std::unique_ptr<Gemma3Processor>> Load(const FileSet& files,
                                                         const Gemma3Config& config);

  const Tokenizer& tokenizer() const override { return *tok_; }
  // The text with its `n_images` "<start_of_image>" markers expanded, tokenized with the
  // tokenizer's special tokens (Tokenizer::AddSpecialTokens: GemmaTokenizer's add_bos_token,
  // default true), as Gemma3Processor calls the tokenizer. With images and an empty text, the text
  // is the markers joined by spaces (as HF). Errors: a marker count != n_images, images for a
  // text-only model, the image token in the text. Causal, but each image's run of tokens is a
  // bidirectional span.
  StatusOr<Prompt> BuildPrompt(int n_images, const std::string& text,
                               const PromptOptions& options) const override;
  StatusOr<Tensor> Pixels(const Image& image) const override;
  int64_t image_tokens() const override { return image_tokens_; }
  // With pan_and_scan: the image, then its PanAndScanCrops (preprocessor_config.json's
  // pan_and_scan_* parameters), each preprocessed as a whole image.
  StatusOr<std::vector<Tensor>> ImageViews(const Image& image, bool pan_and_scan) const override;
  // preprocessor_config.json's do_pan_and_scan (false when absent or null). transformers'
  // Gemma3Processor ignores that key (its call default is do_pan_and_scan=False); ocular takes
  // it as the checkpoint's default, which a request overrides either way.
  bool pan_and_scan_default() const override { return pan_and_scan_default_; }

  std::string image_marker() const override;
  // RenderChat's text, markers expanded as BuildPrompt; no special tokens added when the text
  // starts with the bos_token (transformers then adds none), else as BuildPrompt.
  StatusOr<Prompt> BuildChatPrompt(int n_images, const std::vector<ChatMessage>& messages,
                                   const PromptOptions& options) const override;

 private:
  // The ids of `body` with its n_images markers expanded (after the pan-and-scan rewrite of
  // `crops`, PromptOptions::image_crops), with the tokenizer's special tokens when
  // `add_special_tokens`.
  StatusOr<Prompt> Tokenize(const std::string& text, int n_images, bool add_special_tokens,
                            const std::vector<int>& crops) const;

  static Status ReadPanAndScan(const nlohmann::json& j, const std::string& where,
                               Gemma3Processor* p);

  std::unique_ptr<Tokenizer> tok_;
  PreprocessConfig pp_;
  bool has_vision_ = false;
  bool pan_and_scan_default_ = false;
  PanAndScanParams pan_and_scan_;
  int image_size_ = 0, image_tokens_ = 0;
  int32_t image_token_id_ = -1;
};

}  // namespace ocular::gemma3

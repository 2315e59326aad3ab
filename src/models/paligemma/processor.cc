#include "models/paligemma/processor.h"

#include "core/file_io.h"

namespace ocular::paligemma {

StatusOr<std::unique_ptr<PaliGemmaProcessor>> PaliGemmaProcessor::Load(
    const FileSet& files, const PaliGemmaConfig& config) {
  auto p = std::unique_ptr<PaliGemmaProcessor>(new PaliGemmaProcessor());
  OCULAR_ASSIGN_OR_RETURN(p->tok_, Tokenizer::Load(files));
  const char* pp_name = "preprocessor_config.json";
  OCULAR_ASSIGN_OR_RETURN(std::string pp_text, files.Read(pp_name, kMaxConfigFileBytes, "image"));
  OCULAR_ASSIGN_OR_RETURN(p->pp_, ParsePreprocessConfig(pp_text, files.Where(pp_name)));
  p->image_size_ = config.vision.image_size;
  p->image_tokens_ = config.image_tokens();
  p->image_token_id_ = config.image_token_index;
  const int32_t tok_image = p->tok_->TokenToId("<image>");
  if (tok_image >= 0 && tok_image != p->image_token_id_) {
    return Error(StatusCode::kDataLoss, "paligemma", files.origin(),
                 ": config.json image_token_index is ", p->image_token_id_,
                 " but the tokenizer's <image> token is ", tok_image);
  }
  return p;
}

// HF PaliGemmaProcessor: "<image>"*N*n_images + "<bos>" + prompt + "\n", tokenized in one
// call without BOS/EOS (processing_paligemma.py build_string_from_input; its __init__ sets
// the tokenizer's add_bos_token and add_eos_token to False, so AddSpecialTokens does not apply).
StatusOr<Prompt> PaliGemmaProcessor::BuildPrompt(int n_images, const std::string& text,
                                                 const PromptOptions& options) const {
  Prompt p;
  p.ids.assign(static_cast<size_t>(n_images) * image_tokens_, image_token_id_);
  if (tok_->bos_id() < 0)
    return Error(StatusCode::kDataLoss, "prompt",
                 "tokenizer has no BOS token (a checkpoint without <bos>)");
  p.ids.push_back(tok_->bos_id());
  OCULAR_ASSIGN_OR_RETURN(std::vector<int32_t> body,
                          tok_->Encode(options.separate_newline ? text : text + "\n"));
  for (int32_t id : body) {
    if (id == image_token_id_) {
      return Error(StatusCode::kInvalidArgument, "prompt",
                   "the prompt text contains the image token; pass images separately");
    }
  }
  p.ids.insert(p.ids.end(), body.begin(), body.end());
  if (options.separate_newline) {
    OCULAR_ASSIGN_OR_RETURN(std::vector<int32_t> nl, tok_->Encode("\n"));
    p.ids.insert(p.ids.end(), nl.begin(), nl.end());
  }
  // The whole image + prompt block is the bidirectional prefix (prefix-LM).
  p.bidirectional.push_back({0, static_cast<int64_t>(p.ids.size())});
  return p;
}

StatusOr<Tensor> PaliGemmaProcessor::Pixels(const Image& image) const {
  return PreprocessSquare(image, pp_, image_size_, "paligemma");
}

}  // namespace ocular::paligemma

// The per-family front end: how a prompt with images becomes a typed Prompt (models/prompt.h:
// ids, positions, attention spans, vision inputs) — the HF "processor": tokenizer + image
// processor + prompt template. The runtime calls AddImage per request image, then MakePrompt.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "image/image.h"
#include "models/prompt.h"
#include "ocular/chat.h"
#include "ocular/image_resize.h"
#include "ocular/status.h"
#include "text/tokenizer.h"

namespace ocular {

struct PromptOptions {
  // PaliGemma: tokenize the "\n" after the prompt separately (big_vision / gemma.cpp style)
  // instead of in one call with it (HF).
  bool separate_newline = false;
  // The text is one user turn of a chat (UserTurn with the family's image marker), formatted
  // as BuildChatPrompt does.
  bool chat = false;
  // Chat: end with the generation prompt (the assistant turn's header), as
  // apply_chat_template(add_generation_prompt=True).
  bool add_generation_prompt = true;
  // Chat: the date templates write (Llama 3.2 Vision: "Today Date: 26 Jul 2024" when no image
  // is in the conversation); "" = today (TodayDate), as transformers' strftime_now.
  std::string date;
  // Chat: a template that replaces the checkpoint's (`ocular run --chat-template FILE`); "" =
  // the checkpoint's.
  std::string chat_template;
  // Chat: extra template variables, a JSON object ("" = none), as transformers'
  // apply_chat_template(**kwargs) and vLLM's / llama-server's chat_template_kwargs.
  std::string chat_template_kwargs;
  // Gemma 3's pan-and-scan: per image (in prompt order), the number of crops ImageViews made of
  // it; each image's marker is rewritten as Gemma3Processor does (pan_and_scan.h). Empty: none.
  std::vector<int> image_crops;
};

// How many times `marker` (an image marker: never overlapping itself) stands in `text`.
inline int64_t CountMarkers(std::string_view text, std::string_view marker) {
  int64_t n = 0;
  for (size_t at = text.find(marker); at != std::string_view::npos;
       at = text.find(marker, at + marker.size())) {
    ++n;
  }
  return n;
}

// How one request's images are preprocessed.
struct ImageOptions {
  bool pan_and_scan = false;  // Gemma 3's crops (ImageViews)
  // The request's resize bounds (GenerateOptions::image_resize; Qwen-VL only); empty: those the
  // processor was loaded with.
  ImageResize resize;
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
  // Every image the model sees for one input image: {Pixels(image)}, or with pan_and_scan
  // (Gemma 3 only) the image followed by its pan-and-scan crops (PromptOptions::image_crops
  // then says how many). Errors: pan_and_scan where the family has none (kInvalidArgument).
  virtual StatusOr<std::vector<Tensor>> ImageViews(const Image& image, bool pan_and_scan) const {
    OCULAR_RETURN_IF_ERROR(RefusePanAndScan(pan_and_scan));
    OCULAR_ASSIGN_OR_RETURN(Tensor px, Pixels(image));
    std::vector<Tensor> out;
    out.push_back(std::move(px));
    return out;
  }
  // Appends what the model encodes of the request's image `source` to prompt->images and
  // prompt->pixels: each of ImageViews(image, options.pan_and_scan), image_tokens() feature rows
  // and prompt tokens each. A family whose images differ in size or grid (mllama's tiles,
  // Qwen-VL's patches) overrides it. Errors: those of CheckResize and ImageViews.
  virtual Status AddImage(const Image& image, const ImageOptions& options, int32_t source,
                          Prompt* prompt) const {
    OCULAR_RETURN_IF_ERROR(CheckResize(options.resize));
    OCULAR_ASSIGN_OR_RETURN(std::vector<Tensor> views, ImageViews(image, options.pan_and_scan));
    for (const Tensor& v : views) {
      VisionInput in;
      in.feature_rows = in.tokens = image_tokens();
      in.source = source;
      prompt->AddImage(v.data.data(), v.numel(), in);
    }
    return Status::Ok();
  }
  // Whether a request may resize its images with `resize` (ImageOptions::resize; at load,
  // EngineOptions::image_resize): OK when it is empty. Only Qwen2VLImageProcessor has such
  // bounds; every other family refuses them (kInvalidArgument), never ignores them.
  virtual Status CheckResize(const ImageResize& resize) const {
    if (resize.empty()) return Status::Ok();
    return Error(StatusCode::kInvalidArgument, "image",
                 "min_pixels / max_pixels (--min-pixels / --max-pixels) are the resize bounds of ",
                 "Qwen2VLImageProcessor (Qwen2-VL, Qwen2.5-VL, Qwen3-VL); this model family's ",
                 "processor resizes every image to its own fixed size");
  }
  // Feature rows (and prompt tokens) of one image for the default AddImage; 0 when the family
  // has no fixed count.
  virtual int64_t image_tokens() const { return 0; }
  // The prompt of `text` (messages == null) or of the conversation `messages` around the images
  // AddImage put into `images` (its `images` and `pixels` move into the result; `n_images` user
  // images). The ids come from BuildPrompt / BuildChatPrompt; a family whose ids or positions
  // depend on each image's grid (Qwen-VL: image pads per grid, M-RoPE positions) overrides it.
  virtual StatusOr<Prompt> MakePrompt(Prompt images, int n_images, const std::string& text,
                                      const std::vector<ChatMessage>* messages,
                                      const PromptOptions& options) const {
    StatusOr<Prompt> p = messages != nullptr ? BuildChatPrompt(n_images, *messages, options)
                                             : BuildPrompt(n_images, text, options);
    if (!p.ok()) return p;
    p->images = std::move(images.images);
    p->pixels = std::move(images.pixels);
    return p;
  }

  // Images per prompt the family takes (mllama: 4), counting each crop; 0: no limit.
  virtual int max_images() const { return 0; }

  // Whether the checkpoint asks for pan-and-scan when a request does not say
  // (preprocessor_config.json's do_pan_and_scan).
  virtual bool pan_and_scan_default() const { return false; }

  // What marks an image in a prompt ("<start_of_image>", "<|image|>"); "" when images are
  // not placed by markers (PaliGemma).
  virtual std::string image_marker() const { return ""; }
  // "jinja" when chats are rendered with the checkpoint's chat template (models/chat.h); ""
  // when the family or the checkpoint has none.
  virtual std::string chat_format() const { return ""; }
  // `messages` formatted as the checkpoint's chat template renders them in transformers'
  // apply_chat_template (the text, bos included, before images are expanded or tokens made).
  // Errors: no template, or a construct the renderer does not implement (kUnimplemented);
  // messages the template refuses (kInvalidArgument, with the template's reason).
  virtual StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages,
                                           const PromptOptions& options) const {
    (void)messages, (void)options;
    return Error(StatusCode::kUnimplemented, "chat",
                 "this model family has no chat template (PaliGemma takes task prompts)");
  }
  // RenderChat, then the ids the family's processor makes of that text and `n_images` images
  // (the image parts of `messages`, in order). Errors: those of RenderChat, a count of image
  // parts other than n_images.
  virtual StatusOr<Prompt> BuildChatPrompt(int n_images, const std::vector<ChatMessage>& messages,
                                           const PromptOptions& options) const {
    (void)n_images;
    OCULAR_ASSIGN_OR_RETURN(std::string text, RenderChat(messages, options));
    (void)text;
    return Error(StatusCode::kUnimplemented, "chat", "no chat prompt for this family");
  }

 protected:
  // For a family without pan-and-scan: kInvalidArgument when a request asks for it.
  static Status RefusePanAndScan(bool pan_and_scan) {
    if (!pan_and_scan) return Status::Ok();
    return Error(StatusCode::kInvalidArgument, "image",
                 "pan-and-scan crops are a Gemma 3 option; this model family has none");
  }
};

}  // namespace ocular

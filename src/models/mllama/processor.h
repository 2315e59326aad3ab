// MllamaProcessor: the prompt as written ("<|image|>" marks where each image goes; BOS placed
// after the leading image tokens) and MllamaImageProcessor's tiling: the canvas chosen among
// the aspect ratios of max_image_tiles, an aspect-preserving PIL resize, zero padding to the
// canvas, rescale/normalize, and the split into tile x tile crops.
// Reference: transformers 4.57 models/mllama/processing_mllama.py, image_processing_mllama.py.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "image/preprocess.h"
#include "models/chat.h"
#include "models/mllama/config.h"
#include "models/processor.h"

namespace ocular::mllama {

struct TileConfig {
  PreprocessConfig pp;  // rescale/normalize and the resample filter; pp.height = the tile side
  int max_image_tiles = 4;
};

struct TiledImage {
  Tensor pixels;            // [tiles, 3, tile, tile], row-major tile order
  int aspect_ratio_id = 0;  // 1 + index of (tiles_high, tiles_wide) in SupportedAspectRatios
  int tiles = 0;
};

// get_optimal_tiled_canvas: (canvas height, canvas width) in pixels for an image of
// height x width.
std::pair<int, int> OptimalCanvas(int height, int width, int max_tiles, int tile);
// get_image_size_fit_to_canvas: the (height, width) the image is resized to.
std::pair<int, int> FitToCanvas(int height, int width, int canvas_height, int canvas_width,
                                int tile);
// MllamaImageProcessor.preprocess on one image: its convert_to_rgb first (an image with alpha is
// composited onto white, CompositeOnWhite), then resize, pad, rescale, normalize and split.
// REQUIRES: image has pixels.
TiledImage TileImage(const Image& image, const TileConfig& config);

// Per-image pixel layout of the mllama family (what Pixels returns and EncodeImages reads):
// [max_tiles, 3, tile, tile] pixel values (tiles past the image's own are 0, as pack_images
// leaves them). The aspect ratio travels as the image's VisionInput::grid.
int64_t PixelFloats(const VisionConfig& v);

class MllamaProcessor final : public TemplateChatProcessor {
 public:
  // The tokenizer and preprocessor_config.json. Errors: a tile size or max_image_tiles that
  // disagrees with config.json, do_resize/do_pad false (not supported by transformers either),
  // a tokenizer whose <|image|> id is not config.json's image_token_index.
  static StatusOr<std::unique_ptr<MllamaProcessor>> Load(const FileSet& files,
                                                         const MllamaConfig& config);
  const Tokenizer& tokenizer() const override { return *tok_; }
  // The text must hold exactly n_images "<|image|>" markers (at most kMaxImages). Meta's
  // format: "<|begin_of_text|>" first unless the text has it, then the text as written (not
  // transformers' build_string_from_input, which puts it after the leading image tokens; no
  // post_processor tokens). prefix_len is 0 (a causal decoder).
  // options.chat: the text is one user turn (UserTurn), formatted as BuildChatPrompt.
  StatusOr<Prompt> BuildPrompt(int n_images, const std::string& text,
                               const PromptOptions& options) const override;
  // [PixelFloats(vision)] as described above.
  StatusOr<Tensor> Pixels(const Image& image) const override;
  // One image: Pixels, grid {1, tiles high, tiles wide} (its aspect ratio), ImageFeatureRows
  // feature rows (every tile's, for the cross layers) and one prompt token. Errors:
  // pan_and_scan (Gemma 3 only), resize bounds (Qwen-VL only: CheckResize).
  Status AddImage(const Image& image, const ImageOptions& options, int32_t source,
                  Prompt* prompt) const override;

  std::string image_marker() const override { return "<|image|>"; }
  int max_images() const override { return kMaxImages; }
  // RenderChat (TemplateChatProcessor): the Llama 3.2 Vision template writes "Today Date: " +
  // date_string, options.date, else strftime_now.
  // RenderChat's text tokenized as transformers' apply_chat_template does: MllamaProcessor's
  // build_string_from_input, the tokenizer's special tokens unless it starts with bos_token.
  StatusOr<Prompt> BuildChatPrompt(int n_images, const std::vector<ChatMessage>& messages,
                                   const PromptOptions& options) const override;

  static constexpr int kMaxImages = 4;  // per prompt (cross-attention K/V memory is per image)

 private:
  MllamaProcessor() = default;
  // n_images markers in `text`, at most kMaxImages (kInvalidArgument).
  Status CheckMarkers(int n_images, const std::string& text) const;
  // n_images image tokens in `ids` (a marker glued into a longer added token has none).
  Status CheckImageIds(int n_images, const std::vector<int32_t>& ids) const;
  std::unique_ptr<Tokenizer> tok_;
  TileConfig tiles_;
  VisionConfig vision_;
  int32_t image_token_id_ = -1;
};

}  // namespace ocular::mllama

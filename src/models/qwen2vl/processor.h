// Qwen2-VL's processor: Qwen2VLImageProcessor (the PIL one) and Qwen2VLProcessor's prompt, with
// get_rope_index's M-RoPE positions.
//   image   smart_resize to multiples of patch_size * merge_size between min_pixels and
//           max_pixels, PIL resize (resample), rescale, normalize, the frame repeated to
//           temporal_patch_size, patches flattened in merge-window order: pixel values
//           [t*h*w, C * temporal_patch_size * patch_size^2], image_grid_thw {t, h, w}
//   prompt  each "<|vision_start|><|image_pad|><|vision_end|>" of the text stands for the next
//           image; its <|image_pad|> becomes t*h*w / merge_size^2 pads (one per feature row);
//           positions [3, T] from get_rope_index, decode_offset = rope_deltas
// References: transformers 4.57 models/qwen2_vl/image_processing_qwen2_vl.py (smart_resize,
// Qwen2VLImageProcessor._preprocess), processing_qwen2_vl.py (Qwen2VLProcessor.__call__),
// modeling_qwen2_vl.py (Qwen2VLModel.get_rope_index).
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/file_set.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "models/chat.h"
#include "models/processor.h"
#include "models/qwen2vl/config.h"
#include "ocular/image_resize.h"
#include "text/tokenizer.h"

namespace ocular::qwen2vl {

// preprocessor_config.json as Qwen2VLImageProcessor reads it (its defaults).
struct ImageConfig {
  // rescale_factor, image_mean/std (OPENAI_CLIP_MEAN/STD by default), resample (BICUBIC),
  // do_rescale, do_normalize; its size fields are not used.
  PreprocessConfig pp;
  int64_t min_pixels = 56 * 56;         // size.shortest_edge, overridden by min_pixels
  int64_t max_pixels = 28 * 28 * 1280;  // size.longest_edge, overridden by max_pixels
  int patch_size = 14;
  int temporal_patch_size = 2;
  int merge_size = 2;

  int factor() const { return patch_size * merge_size; }
  // Patches of the largest image smart_resize makes (max_pixels / patch_size^2, rounded to
  // whole merge windows), for planning.
  int64_t max_patches() const;
};

// Parses preprocessor_config.json. Errors ([image], naming the file): bad values, do_resize
// false (the grid would not be whole merge windows), a resample filter ocular has not.
StatusOr<ImageConfig> ParseImageConfig(const std::string& json_text, const std::string& origin);
// `c` with the non-zero bounds of `resize` in place of its min_pixels / max_pixels, as
// Qwen2VLImageProcessor(min_pixels=, max_pixels=) and its __call__'s kwargs replace them.
// Errors (kInvalidArgument, [image]): a bound under factor^2 (smart_resize never makes fewer
// pixels than one merge window: the bound could not hold) or over 2^28, min_pixels > max_pixels.
StatusOr<ImageConfig> WithResize(const ImageConfig& c, const ImageResize& resize);
// preprocessor_config.json of `files`, WithResize(resize). The model plans its workspace and
// the processor resizes from this one description.
StatusOr<ImageConfig> LoadImageConfig(const FileSet& files, const ImageResize& resize = {});

// smart_resize(height, width, factor, min_pixels, max_pixels) -> (height, width), float64 as
// Python computes it (round half to even). Errors: an aspect ratio over 200 (kInvalidArgument,
// as transformers' ValueError).
StatusOr<std::pair<int, int>> SmartResize(int height, int width, int factor, int64_t min_pixels,
                                          int64_t max_pixels);

struct ImagePatches {
  std::vector<float> values;         // [t*h*w, C * temporal_patch_size * patch_size^2]
  std::array<int32_t, 3> grid = {};  // image_grid_thw: t, h, w in patches
};
// Qwen2VLImageProcessor on one image (pixel_values, image_grid_thw). Errors: those of
// SmartResize.
StatusOr<ImagePatches> Patchify(const Image& image, const ImageConfig& c);

// get_rope_index for one prompt: positions [3, T] axis-major and rope_deltas (max + 1 - T).
// Text runs continue from the largest position so far (one position per token, the same on
// every axis); an image's pads at {t, h, w} of its merged grid, offset by the position its run
// starts at. `grids`: the images' image_grid_thw in prompt order. REQUIRES: each image's pads
// follow a vision_start token and count t*h*w / merge^2 (MakePrompt builds them so).
std::pair<std::vector<int32_t>, int64_t> RopeIndex(std::span<const int32_t> ids,
                                                   std::span<const std::array<int32_t, 3>> grids,
                                                   int merge_size, int32_t image_token,
                                                   int32_t vision_start_token);

class Qwen2VLProcessor final : public Processor {
 public:
  static constexpr char kImageTag[] = "<|vision_start|><|image_pad|><|vision_end|>";

  // `resize`: EngineOptions::image_resize (LoadImageConfig).
  static StatusOr<std::unique_ptr<Qwen2VLProcessor>> Load(const FileSet& files,
                                                          const Qwen2VLConfig& config,
                                                          const ImageResize& resize = {});

  const Tokenizer& tokenizer() const override { return *tok_; }
  const ImageConfig& image_config() const { return image_; }
  // The ids of the text with one image pad per image (the runtime's path is MakePrompt, which
  // knows each image's grid). Errors as MakePrompt's.
  StatusOr<Prompt> BuildPrompt(int n_images, const std::string& text,
                               const PromptOptions& options) const override;
  // Pixel values [t*h*w, patch floats] of one image (Patchify).
  StatusOr<Tensor> Pixels(const Image& image) const override;
  // One VisionInput per image: its patches, grid {t, h, w}, t*h*w / merge^2 feature rows and
  // prompt pads, resized within options.resize's bounds where it sets them. Errors:
  // pan_and_scan (Gemma 3's); those of CheckResize and Patchify.
  Status AddImage(const Image& image, const ImageOptions& options, int32_t source,
                  Prompt* prompt) const override;
  // OK when the loaded config WithResize(resize) is valid and needs no more patches per image
  // than the loaded one (the model's workspace is planned for those); else kInvalidArgument.
  Status CheckResize(const ImageResize& resize) const override;
  // The text with each image's tag expanded to its pads, tokenized, with get_rope_index's
  // positions. A text without any tag gets one tag per image in front of it. Errors: a tag
  // count other than the images', a pad outside a tag, text that is not valid UTF-8; with a
  // chat (messages, or options.chat: `text` as one user turn), those of RenderChat. With no
  // image given yet (`images` empty, n_images > 0): BuildPrompt's / BuildChatPrompt's ids.
  StatusOr<Prompt> MakePrompt(Prompt images, int n_images, const std::string& text,
                              const std::vector<ChatMessage>* messages,
                              const PromptOptions& options) const override;
  std::string image_marker() const override { return kImageTag; }
  // The checkpoint's chat template (models/chat.h): "jinja" when it has one.
  std::string chat_format() const override;
  StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages,
                                   const PromptOptions& options) const override;
  // The rendered chat with one image pad per image (no grids; MakePrompt expands them).
  StatusOr<Prompt> BuildChatPrompt(int n_images, const std::vector<ChatMessage>& messages,
                                   const PromptOptions& options) const override;

 private:
  Qwen2VLProcessor() = default;
  // The config of a request's images: the loaded one WithResize(resize), within its patches.
  StatusOr<ImageConfig> RequestConfig(const ImageResize& resize) const;
  // ids of `text` whose i-th tag holds pads[i] image pads, and their positions.
  StatusOr<Prompt> Tokenize(const std::string& text, std::span<const int64_t> pads,
                            std::span<const std::array<int32_t, 3>> grids) const;

  std::unique_ptr<Tokenizer> tok_;
  ImageConfig image_;
  int32_t image_token_ = -1, vision_start_ = -1;
  ChatTemplate chat_;
};

}  // namespace ocular::qwen2vl

// Detection boxes and segmentation masks decoded from PaliGemma's <loc>/<seg> tokens, and the
// evaluation summary of `ocular eval`. Plain data + pure functions (implemented in src/tasks).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocular/image_resize.h"
#include "ocular/status.h"

namespace ocular {

// A binary instance mask in original-image pixels, stored for its pixel box only: image pixel
// (x, y) belongs to the object iff x0 <= x < x0 + width, y0 <= y < y0 + height and
// bits[(y - y0) * width + (x - x0)] != 0. How it is made: docs/segmentation.md.
struct InstanceMask {
  int image_width = 0, image_height = 0;  // the image the mask lies in
  int x0 = 0, y0 = 0, width = 0, height = 0;
  std::vector<uint8_t> bits;  // height * width, row-major, 0 or 1

  bool at(int x, int y) const {
    return x >= x0 && x < x0 + width && y >= y0 && y < y0 + height &&
           bits[static_cast<size_t>(y - y0) * width + (x - x0)] != 0;
  }
  int64_t area() const;  // pixels set
};

// A box in original-image pixel coordinates: x0 <= x1, y0 <= y1 (continuous edges,
// x in [0, width], y in [0, height]).
struct Detection {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  std::string label;  // trimmed; empty when the model emitted no label
  // The <locNNNN> values as emitted (y_min, x_min, y_max, x_max; not reordered), or -1 when the
  // detection did not come from tokens. Masks are placed from these exactly as big_vision does.
  std::array<int, 4> loc = {-1, -1, -1, -1};
  // The 16 <segNNN> codes (VQ-VAE codebook indices, row-major 4×4) when the model emitted
  // them (`segment` prompts); empty otherwise.
  std::vector<int> seg = {};
  // The decoded mask, when seg codes were decoded with a mask model (MaskDecoder, tasks.h).
  std::optional<InstanceMask> mask = std::nullopt;
};

// Parses PaliGemma detection / segmentation output ("<locY0><locX0><locY1><locX1> label ; ..."
// or "<loc>×4 <seg>×16 label ; ...") into boxes relative to the ORIGINAL image size
// (v = loc / 1023, docs/models.md §3), keeping the seg codes (masks are decoded by
// MaskDecoder). Never fails: malformed parts are skipped (details: src/tasks/detection.h).
std::vector<Detection> ParseDetections(std::string_view decoded_text, int image_w, int image_h);

// How a checkpoint's answers carry boxes: PaliGemma's <loc> tokens (ParseDetections), or the
// grounding JSON of Qwen2.5-VL ([{"bbox_2d": [x1, y1, x2, y2], "label": ...}] in pixels of the
// image as its processor resized it) and Qwen3-VL (the same JSON on a 0-1000 grid over the
// image). docs/models.md §12.
struct GroundingFormat {
  enum class Kind : uint8_t { kLocTokens, kQwenResizedPixels, kQwenGrid1000 };
  Kind kind = Kind::kLocTokens;
  // kQwenResizedPixels: Qwen2VLImageProcessor's smart_resize (factor = patch_size * merge_size).
  int factor = 28;
  int64_t min_pixels = 0, max_pixels = 0;
};

// The format of the checkpoint at model_path, from its config.json model_type (qwen2_5_vl,
// qwen3_vl) and, for Qwen2.5-VL, its preprocessor_config.json with `resize`'s non-zero bounds
// in place of its own (the engine's EngineOptions::image_resize). A GGUF file or another
// family: kLocTokens. Errors: a Qwen2.5-VL directory whose preprocessor_config.json is
// unreadable.
StatusOr<GroundingFormat> LoadGroundingFormat(const std::string& model_path,
                                              const ImageResize& resize = {});

// `format` with `resize`'s non-zero bounds in place of its own: the boxes of a request whose
// images were resized with GenerateOptions::image_resize.
GroundingFormat WithImageResize(GroundingFormat format, const ImageResize& resize);

// The boxes of a generated answer in pixels of the first image (image_w x image_h), read as
// `format` says. Never fails: malformed parts are skipped (tasks/qwen_boxes.h for the JSON).
std::vector<Detection> ParseGroundedDetections(const GroundingFormat& format,
                                               std::string_view decoded_text, int image_w,
                                               int image_h);

// True if any detection carries seg codes.
bool HasSegCodes(const std::vector<Detection>& detections);

// [{"x0":…,"y0":…,"x1":…,"y1":…,"label":"…"}, …]; a detection with seg codes adds
// "seg":[16 codes], and one with a decoded mask adds "mask": {"size":[height,width],
// "counts":[…]} — uncompressed COCO RLE of the whole image (column-major runs, starting with
// a run of 0s; pycocotools' frPyObjects reads it). docs/segmentation.md.
std::string DetectionsJson(const std::vector<Detection>& detections);

// COCO-style uncompressed RLE of `mask` over its whole image: run lengths in column-major
// (Fortran) order, alternating 0-runs and 1-runs, the first being a (possibly empty) 0-run.
std::vector<int64_t> MaskToCocoRle(const InstanceMask& mask);

struct EvalSummary {
  int num_examples = 0;
  double caption_exact = 0;
  int caption_n = 0;
  double vqa_accuracy = 0;  // count + color questions
  int vqa_n = 0;
  double detection_mean_iou = 0;
  double detection_map50 = 0;
  int detection_matched = 0, detection_predictions = 0, detection_ground_truth = 0;
  // Segmentation examples (kind "segment"): mask IoU of matched pairs (same label, greedy by
  // mask IoU), and big_vision's mIoU (mean over ground-truth objects; unmatched count 0).
  double mask_mean_iou = 0;
  double mask_miou = 0;
  int mask_matched = 0, mask_predictions = 0, mask_ground_truth = 0;
};
std::string EvalSummaryJson(const EvalSummary& summary);

}  // namespace ocular

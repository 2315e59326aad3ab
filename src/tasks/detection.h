// Detection output of PaliGemma: "<locY0><locX0><locY1><locX1> label ; ..." → boxes.
//
// Syntax (docs MODELS.md §3, big_vision pp/proj/paligemma + the HF demo parser):
// each object is 4 <locNNNN> tokens in the order (y_min, x_min, y_max, x_max),
// optionally 16 <segNNN> tokens, then the label; objects are joined by " ; ".
//
// Decoding rule (MODELS.md §3 / §7.6): this follows the big_vision reference
// evaluator, v = loc / 1023, pixel = v · size, where size is the ORIGINAL image's
// width (x) or height (y) — the model saw the image squashed to a square, so the
// normalised coordinates apply to the full original frame. Coordinates stay float
// (no int truncation) so callers can round as they need. The demo's /1024 rule
// differs by at most 0.1 % of the image size.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ocular {

// A box in original-image pixel coordinates: x0 <= x1, y0 <= y1 (continuous edges,
// x in [0, width], y in [0, height]).
struct Detection {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  std::string label;  // trimmed; empty when the model emitted no label
};

// Parses decoded model output into boxes. Never fails: malformed parts are skipped.
// Tolerates garbage between objects, fewer than 4 consecutive locs (that object is
// dropped), a missing label (empty label), a truncated tail, a trailing " ;",
// <loc> values outside 0..1023 (not a loc token) and swapped corners (ordered).
// image_w/image_h: the original image size in pixels (values <= 0 are treated as 1,
// i.e. normalised [0,1] coordinates come back).
std::vector<Detection> ParseDetections(std::string_view decoded_text, int image_w, int image_h);

// The inverse, for tests and tools: "<locY0><locX0><locY1><locX1> label" with
// loc = round(v · 1023) (big_vision's training encoding), objects joined by " ; ".
std::string FormatDetections(const std::vector<Detection>& detections, int image_w, int image_h);

}  // namespace ocular

// Detection output of PaliGemma: "<locY0><locX0><locY1><locX1> label ; ..." → boxes.
//
// Syntax (docs/models.md §3, big_vision pp/proj/paligemma + the HF demo parser):
// each object is 4 <locNNNN> tokens in the order (y_min, x_min, y_max, x_max),
// optionally 16 <segNNN> tokens, then the label; objects are joined by " ; ".
//
// Decoding rule (docs/models.md §3 / §7.6): this follows the big_vision reference
// evaluator, v = loc / 1023, pixel = v · size, where size is the ORIGINAL image's
// width (x) or height (y) — the model saw the image squashed to a square, so the
// normalised coordinates apply to the full original frame. Coordinates stay float
// (no int truncation) so callers can round as they need. The demo's /1024 rule
// differs by at most 0.1 % of the image size.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ocular/detection.h"
#include "ocular/status.h"

namespace ocular {

// Detection and ParseDetections are declared in the public header ocular/detection.h.

// The inverse, for tests and tools: "<locY0><locX0><locY1><locX1> label" with
// loc = round(v · 1023) (big_vision's training encoding), objects joined by " ; ".
std::string FormatDetections(const std::vector<Detection>& detections, int image_w, int image_h);

// The inverse of MaskToCocoRle: a mask covering the whole image_w × image_h image.
// kDataLoss unless the counts are non-negative and sum to image_w · image_h.
StatusOr<InstanceMask> MaskFromCocoRle(const std::vector<int64_t>& counts, int image_w,
                                       int image_h);

}  // namespace ocular

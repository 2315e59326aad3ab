// Detection boxes decoded from PaliGemma's <loc> tokens, and the evaluation summary of
// `ocular eval`. Plain data + pure functions (implemented in src/tasks).
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

// Parses PaliGemma detection output ("<locY0><locX0><locY1><locX1> label ; ...") into boxes
// relative to the ORIGINAL image size (v = loc / 1023, docs/models.md §3). Never fails: malformed
// parts are skipped (details: src/tasks/detection.h).
std::vector<Detection> ParseDetections(std::string_view decoded_text, int image_w, int image_h);

// [{"x0":…,"y0":…,"x1":…,"y1":…,"label":"…"}, …]
std::string DetectionsJson(const std::vector<Detection>& detections);

struct EvalSummary {
  int num_examples = 0;
  double caption_exact = 0;
  int caption_n = 0;
  double vqa_accuracy = 0;  // count + color questions
  int vqa_n = 0;
  double detection_mean_iou = 0;
  double detection_map50 = 0;
  int detection_matched = 0, detection_predictions = 0, detection_ground_truth = 0;
};
std::string EvalSummaryJson(const EvalSummary& summary);

}  // namespace ocular

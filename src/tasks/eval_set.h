// The held-out evaluation set of the shapes-world demo model and its scoring —
// what `ocular eval` runs. The set is a JSONL file written by
// tools/demo_model/evaluate.py --write-heldout (shipped as
// models/shapes-paligemma/heldout.jsonl); one object per line:
//   {"id": 0, "image": "0000.png", "width": 258, "height": 267, "kind": "detect",
//    "prefix": "detect star ; circle", "suffix": "<loc…>… star ; …",
//    "boxes": [[x0, y0, x1, y1, "star"], …]}   (boxes only for kinds "detect" and "segment")
// kind is one of caption, detect, segment, count, color (count + color = VQA). A "segment"
// example also has "masks": one COCO RLE {"size": [height, width], "counts": [...]} per box,
// in the same order (the format of `ocular run --json`, docs/segmentation.md).
// The scores use the definitions of tasks/eval_metrics.h, identical to
// tools/demo_model/metrics.py, so the two evaluators can be compared directly.
#pragma once

#include <string>
#include <vector>

#include "ocular/status.h"
#include "ocular/tasks.h"
#include "tasks/detection.h"

namespace ocular {

struct EvalExample {
  int id = 0;
  std::string image;  // file name relative to the images folder
  int width = 0, height = 0;
  std::string kind;              // caption | detect | segment | count | color
  std::string prefix;            // the prompt, e.g. "caption en"
  std::string expected;          // the reference answer (the training suffix)
  std::vector<Detection> boxes;  // ground truth for detect / segment, in pixels (+ masks)
};

// Reads and validates the JSONL file: kInvalidArgument / kDataLoss with the line
// number for malformed lines, unknown kinds, non-positive sizes or bad boxes.
StatusOr<std::vector<EvalExample>> LoadEvalSet(const std::string& path);

// EvalSummary, EvalSummaryJson and DetectionsJson are declared in ocular/detection.h.

// REQUIRES: predictions.size() == examples.size() (checked: kInvalidArgument).
// predictions[i] is the decoded model output for examples[i]. `masks` decodes the <seg> codes
// of "segment" examples (REQUIRES: non-null when there are any; checked: kInvalidArgument).
StatusOr<EvalSummary> ScoreEvalSet(const std::vector<EvalExample>& examples,
                                   const std::vector<std::string>& predictions,
                                   const MaskDecoder* masks = nullptr);

}  // namespace ocular

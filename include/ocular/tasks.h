// Task outputs on top of Engine: drawing detection boxes (ocular/detection.h) and the held-out
// evaluation of the shapes-world demo model (`ocular eval`).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ocular/detection.h"
#include "ocular/engine.h"
#include "ocular/status.h"

namespace ocular {

// Decodes `image_path` (as Engine does, RGB), draws the boxes and labels (DejaVu Sans from
// fonts-dejavu-core; boxes only if the font is missing) and writes a PNG to `out_png`.
Status DrawDetectionsToPng(const std::string& image_path, const std::vector<Detection>& boxes,
                           const std::string& out_png);

struct EvalOptions {
  std::string eval_set;     // heldout.jsonl (models/shapes-paligemma/heldout.jsonl)
  std::string images_dir;   // folder with the images the set names
  int limit = 0;            // 0: all examples
  int max_tokens = 40;      // as tools/demo_model/evaluate.py
  std::string predictions;  // if set, one JSON line per example is written here
};

// Runs every example through `engine` (greedy) and scores it like
// tools/demo_model/metrics.py. `progress(done, total)` is called after each example.
StatusOr<EvalSummary> Evaluate(Engine& engine, const EvalOptions& options,
                               const std::function<void(int, int)>& progress = nullptr);

}  // namespace ocular

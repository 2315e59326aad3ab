// ocular/tasks.h: drawing boxes on an image file and the held-out evaluation loop.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "image/image.h"
#include "ocular/tasks.h"
#include "tasks/draw.h"
#include "tasks/eval_set.h"

namespace ocular {

Status DrawDetectionsToPng(const std::string& image_path, const std::vector<Detection>& boxes,
                           const std::string& out_png) {
  OCULAR_ASSIGN_OR_RETURN(Image img, LoadImage(image_path));
  // Label size follows the image: ~1/25 of the shorter side, at least 11 px.
  const int text_px = std::max(11, std::min(img.width, img.height) / 25);
  auto font = Font::Load(Font::kDefaultPath, text_px);
  DrawOptions opts;
  opts.font = font.ok() ? font->get() : nullptr;  // no font: boxes without text
  DrawDetections(img.rgb.data(), img.width, img.height, boxes, opts);
  return WritePng(out_png, img);
}

StatusOr<EvalSummary> Evaluate(Engine& engine, const EvalOptions& o,
                               const std::function<void(int, int)>& progress) {
  OCULAR_ASSIGN_OR_RETURN(std::vector<EvalExample> examples, LoadEvalSet(o.eval_set));
  if (o.limit > 0 && static_cast<size_t>(o.limit) < examples.size()) examples.resize(o.limit);
  // Segment examples need the mask model; loaded once, before any
  // generation, only if the set has any.
  std::unique_ptr<MaskDecoder> masks;
  const bool has_segment = std::any_of(examples.begin(), examples.end(),
                                       [](const EvalExample& ex) { return ex.kind == "segment"; });
  if (has_segment) {
    const std::string path = o.seg_model.empty() ? FindMaskModel(o.model_dir) : o.seg_model;
    if (path.empty()) {
      return Error(StatusCode::kNotFound, "eval", o.eval_set,
                   " has segment examples but no mask model was found in ", o.model_dir,
                   " (vae-oid.npz or vae.safetensors); pass --seg-model");
    }
    OCULAR_ASSIGN_OR_RETURN(masks, MaskDecoder::Load(path));
  }
  std::ofstream pred_file;
  if (!o.predictions.empty()) {
    pred_file.open(o.predictions, std::ios::trunc);
    if (!pred_file) return Error(StatusCode::kIoError, "eval", o.predictions, ": cannot write");
  }
  GenerateOptions g;
  g.max_tokens = o.max_tokens;
  std::vector<std::string> predictions;
  for (size_t i = 0; i < examples.size(); ++i) {
    const EvalExample& ex = examples[i];
    OCULAR_ASSIGN_OR_RETURN(GenerateResult r,
                            engine.Generate({o.images_dir + "/" + ex.image}, ex.prefix, g));
    predictions.push_back(r.text);
    if (pred_file) {
      pred_file << nlohmann::json({{"id", ex.id},
                                   {"prefix", ex.prefix},
                                   {"prediction", r.text},
                                   {"expected", ex.expected}})
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    }
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(examples.size()));
  }
  return ScoreEvalSet(examples, predictions, masks.get());
}

}  // namespace ocular

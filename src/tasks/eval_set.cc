#include "tasks/eval_set.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_io.h"
#include "tasks/eval_metrics.h"

namespace ocular {
namespace {

using nlohmann::json;

// "masks": [{"size": [h, w], "counts": [...]}, ...], one per box, sized like the image.
Status ParseMasks(const json& j, EvalExample* ex) {
  if (!j.contains("masks") || !j["masks"].is_array() || j["masks"].size() != ex->boxes.size()) {
    return Status(StatusCode::kDataLoss,
                  "segment example without a 'masks' array of one mask per box");
  }
  for (size_t i = 0; i < ex->boxes.size(); ++i) {
    const json& m = j["masks"][i];
    if (!m.is_object() || !m.contains("size") || !m.contains("counts") || !m["size"].is_array() ||
        m["size"].size() != 2 || !m["size"][0].is_number_integer() ||
        !m["size"][1].is_number_integer() || !m["counts"].is_array()) {
      return Status(StatusCode::kDataLoss, "a mask is not {\"size\": [h, w], \"counts\": [...]}");
    }
    if (m["size"][0].get<int64_t>() != ex->height || m["size"][1].get<int64_t>() != ex->width) {
      return Status(StatusCode::kDataLoss,
                    StrCat("a mask's size ", ShortJson(m["size"]), " is not the image's [",
                           ex->height, ", ", ex->width, "]"));
    }
    std::vector<int64_t> counts;
    for (const json& c : m["counts"]) {
      if (!c.is_number_integer())
        return Status(StatusCode::kDataLoss, "a mask count is not an integer");
      counts.push_back(c.get<int64_t>());
    }
    StatusOr<InstanceMask> mask = MaskFromCocoRle(counts, ex->width, ex->height);
    if (!mask.ok()) return mask.status();
    ex->boxes[i].mask = std::move(*mask);
  }
  return Status::Ok();
}

Status ParseExample(const json& j, EvalExample* ex) {
  if (!j.is_object()) return Status(StatusCode::kDataLoss, "not a JSON object");
  for (const char* key : {"id", "width", "height"}) {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      return Status(StatusCode::kDataLoss, StrCat("missing integer '", key, "'"));
    }
  }
  for (const char* key : {"image", "kind", "prefix", "suffix"}) {
    if (!j.contains(key) || !j[key].is_string()) {
      return Status(StatusCode::kDataLoss, StrCat("missing string '", key, "'"));
    }
  }
  ex->id = j["id"].get<int>();
  ex->width = j["width"].get<int>();
  ex->height = j["height"].get<int>();
  ex->image = j["image"].get<std::string>();
  ex->kind = j["kind"].get<std::string>();
  ex->prefix = j["prefix"].get<std::string>();
  ex->expected = j["suffix"].get<std::string>();
  if (ex->width <= 0 || ex->height <= 0) {
    return Status(StatusCode::kDataLoss,
                  StrCat("image size ", ex->width, "x", ex->height, " is not positive"));
  }
  if (ex->kind != "caption" && ex->kind != "detect" && ex->kind != "segment" &&
      ex->kind != "count" && ex->kind != "color") {
    return Status(StatusCode::kDataLoss, StrCat("unknown kind '", ex->kind, "'"));
  }
  if (ex->kind != "detect" && ex->kind != "segment") return Status::Ok();
  if (!j.contains("boxes") || !j["boxes"].is_array()) {
    return Status(StatusCode::kDataLoss, StrCat(ex->kind, " example without a 'boxes' array"));
  }
  for (const json& b : j["boxes"]) {
    if (!b.is_array() || b.size() != 5 || !b[4].is_string()) {
      return Status(StatusCode::kDataLoss, "a box is not [x0, y0, x1, y1, label]");
    }
    Detection d;
    float* coords[4] = {&d.x0, &d.y0, &d.x1, &d.y1};
    for (int k = 0; k < 4; ++k) {
      if (!b[k].is_number() || !std::isfinite(b[k].get<double>())) {
        return Status(StatusCode::kDataLoss, "a box coordinate is not a finite number");
      }
      *coords[k] = b[k].get<float>();
    }
    if (d.x1 < d.x0 || d.y1 < d.y0) {
      return Status(StatusCode::kDataLoss, "a box has x1 < x0 or y1 < y0");
    }
    d.label = b[4].get<std::string>();
    ex->boxes.push_back(std::move(d));
  }
  if (ex->kind == "segment") return ParseMasks(j, ex);
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<EvalExample>> LoadEvalSet(const std::string& path) {
  // Bounded and regular-file-checked: a FIFO or a link to /dev/zero is an error, not a hang.
  OCULAR_ASSIGN_OR_RETURN(const std::string text,
                          ReadFileBounded(path, kMaxTokenizerFileBytes, "eval"));
  std::istringstream f(text);
  std::vector<EvalExample> out;
  std::string line;
  int line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    StatusOr<json> j = ParseJson(line, StrCat(path, ":", line_no), "eval");
    if (!j.ok()) {
      // "[eval] <path>:<n>: invalid JSON at line 1, column C: ..." → the column and reason.
      const std::string& m = j.status().message();
      const size_t at = m.find("invalid JSON");
      return Error(StatusCode::kDataLoss, "eval", path, ":", line_no, ": not valid JSON (",
                   at == std::string::npos ? m : m.substr(at), ")");
    }
    EvalExample ex;
    Status s = ParseExample(*j, &ex);
    if (!s.ok()) return Error(s.code(), "eval", path, ":", line_no, ": ", s.message());
    out.push_back(std::move(ex));
  }
  if (out.empty()) return Error(StatusCode::kDataLoss, "eval", path, ": no examples");
  return out;
}

StatusOr<EvalSummary> ScoreEvalSet(const std::vector<EvalExample>& examples,
                                   const std::vector<std::string>& predictions,
                                   const MaskDecoder* masks) {
  if (predictions.size() != examples.size()) {
    return Error(StatusCode::kInvalidArgument, "eval", predictions.size(), " predictions for ",
                 examples.size(), " examples");
  }
  AccuracyMetric caption, vqa;
  DetectionMetrics det;
  SegmentationMetrics seg;
  for (size_t i = 0; i < examples.size(); ++i) {
    const EvalExample& ex = examples[i];
    if (ex.kind == "detect") {
      det.Add(ParseDetections(predictions[i], ex.width, ex.height), ex.boxes);
    } else if (ex.kind == "segment") {
      if (masks == nullptr) {
        return Error(StatusCode::kInvalidArgument, "eval", "example ", ex.id,
                     " is a segment example: scoring it needs a mask model (--seg-model)");
      }
      std::vector<Detection> pred = ParseDetections(predictions[i], ex.width, ex.height);
      masks->AddMasks(&pred, ex.width, ex.height);  // codes outside the codebook: no mask
      seg.Add(pred, ex.boxes);
    } else if (ex.kind == "caption") {
      caption.Add(predictions[i], ex.expected);
    } else {
      vqa.Add(predictions[i], ex.expected);
    }
  }
  EvalSummary s;
  s.num_examples = static_cast<int>(examples.size());
  s.caption_exact = caption.Accuracy();
  s.caption_n = caption.total();
  s.vqa_accuracy = vqa.Accuracy();
  s.vqa_n = vqa.total();
  s.detection_mean_iou = det.MeanIoU();
  s.detection_map50 = det.MapAt50();
  s.detection_matched = det.matched();
  s.detection_predictions = det.num_predictions();
  s.detection_ground_truth = det.num_ground_truth();
  s.mask_mean_iou = seg.MeanIoU();
  s.mask_miou = seg.MIoU();
  s.mask_matched = seg.matched();
  s.mask_predictions = seg.num_predictions();
  s.mask_ground_truth = seg.num_ground_truth();
  return s;
}

std::string EvalSummaryJson(const EvalSummary& s) {
  json j = {{"num_examples", s.num_examples},
            {"caption_exact", s.caption_exact},
            {"caption_n", s.caption_n},
            {"vqa_accuracy", s.vqa_accuracy},
            {"vqa_n", s.vqa_n},
            {"detection_mean_iou", s.detection_mean_iou},
            {"detection_map50", s.detection_map50},
            {"detection_matched", s.detection_matched},
            {"detection_predictions", s.detection_predictions},
            {"detection_ground_truth", s.detection_ground_truth}};
  if (s.mask_ground_truth > 0 || s.mask_predictions > 0) {  // the set has segment examples
    j["mask_mean_iou"] = s.mask_mean_iou;
    j["mask_miou"] = s.mask_miou;
    j["mask_matched"] = s.mask_matched;
    j["mask_predictions"] = s.mask_predictions;
    j["mask_ground_truth"] = s.mask_ground_truth;
  }
  return j.dump(2);
}

std::string DetectionsJson(const std::vector<Detection>& detections) {
  json arr = json::array();
  for (const Detection& d : detections) {
    json o = {{"x0", d.x0}, {"y0", d.y0}, {"x1", d.x1}, {"y1", d.y1}, {"label", d.label}};
    if (!d.seg.empty()) o["seg"] = d.seg;
    if (d.mask) {
      o["mask"] = {{"size", {d.mask->image_height, d.mask->image_width}},
                   {"counts", MaskToCocoRle(*d.mask)}};
    }
    arr.push_back(std::move(o));
  }
  // Replace invalid UTF-8 in labels instead of throwing (labels are model output).
  return arr.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ocular

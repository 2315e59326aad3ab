#include "tasks/eval_metrics.h"

#include <algorithm>
#include <numeric>

namespace ocular {
namespace {

std::string_view TrimWhitespace(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

bool AnswerMatches(std::string_view prediction, std::string_view expected) {
  return TrimWhitespace(prediction) == TrimWhitespace(expected);
}

float BoxIoU(const Detection& a, const Detection& b) {
  const double iw = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  const double ih = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  if (iw <= 0 || ih <= 0) return 0.0f;
  const double inter = iw * ih;
  const double area_a = static_cast<double>(a.x1 - a.x0) * (a.y1 - a.y0);
  const double area_b = static_cast<double>(b.x1 - b.x0) * (b.y1 - b.y0);
  const double uni = area_a + area_b - inter;
  return uni > 0 ? static_cast<float>(inter / uni) : 0.0f;
}

std::vector<BoxMatch> MatchDetections(const std::vector<Detection>& predictions,
                                      const std::vector<Detection>& ground_truth) {
  std::vector<BoxMatch> candidates;
  for (size_t p = 0; p < predictions.size(); ++p) {
    for (size_t g = 0; g < ground_truth.size(); ++g) {
      if (predictions[p].label != ground_truth[g].label) continue;
      const float iou = BoxIoU(predictions[p], ground_truth[g]);
      if (iou > 0) candidates.push_back({static_cast<int>(p), static_cast<int>(g), iou});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const BoxMatch& a, const BoxMatch& b) { return a.iou > b.iou; });
  std::vector<bool> pred_used(predictions.size()), gt_used(ground_truth.size());
  std::vector<BoxMatch> matches;
  for (const BoxMatch& m : candidates) {
    if (pred_used[m.pred] || gt_used[m.gt]) continue;
    pred_used[m.pred] = gt_used[m.gt] = true;
    matches.push_back(m);
  }
  return matches;
}

void DetectionMetrics::Add(const std::vector<Detection>& predictions,
                           const std::vector<Detection>& ground_truth) {
  num_predictions_ += static_cast<int>(predictions.size());
  num_ground_truth_ += static_cast<int>(ground_truth.size());
  std::vector<bool> pred_tp(predictions.size()), gt_tp(ground_truth.size());
  for (const BoxMatch& m : MatchDetections(predictions, ground_truth)) {
    ious_.push_back(m.iou);
    if (m.iou >= 0.5f) pred_tp[m.pred] = gt_tp[m.gt] = true;
  }
  for (size_t p = 0; p < predictions.size(); ++p) {
    ClassCounts& c = classes_[predictions[p].label];
    (pred_tp[p] ? c.tp : c.fp) += 1;
  }
  for (size_t g = 0; g < ground_truth.size(); ++g) {
    if (!gt_tp[g]) classes_[ground_truth[g].label].fn += 1;
  }
}

double DetectionMetrics::MeanIoU() const {
  if (ious_.empty()) return 0.0;
  return std::accumulate(ious_.begin(), ious_.end(), 0.0) / static_cast<double>(ious_.size());
}

double DetectionMetrics::MapAt50() const {
  double sum = 0;
  int n = 0;
  for (const auto& [label, c] : classes_) {
    if (c.tp + c.fn == 0) continue;  // no ground truth: not a class of the mean
    const double precision = c.tp + c.fp ? static_cast<double>(c.tp) / (c.tp + c.fp) : 0.0;
    const double recall = static_cast<double>(c.tp) / (c.tp + c.fn);
    sum += precision * recall;
    ++n;
  }
  return n ? sum / n : 0.0;
}

}  // namespace ocular

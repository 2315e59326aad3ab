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

// The greedy matching of eval_metrics.h: candidate pairs with the same label and iou(p, g) > 0,
// by IoU descending (stable: lower prediction, then lower ground-truth index first).
template <typename IouFn>
std::vector<BoxMatch> GreedyMatch(const std::vector<Detection>& predictions,
                                  const std::vector<Detection>& ground_truth, IouFn iou_of) {
  std::vector<BoxMatch> candidates;
  for (size_t p = 0; p < predictions.size(); ++p) {
    for (size_t g = 0; g < ground_truth.size(); ++g) {
      if (predictions[p].label != ground_truth[g].label) continue;
      const float iou = iou_of(predictions[p], ground_truth[g]);
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
  return GreedyMatch(predictions, ground_truth,
                     [](const Detection& p, const Detection& g) { return BoxIoU(p, g); });
}

float MaskIoU(const InstanceMask& a, const InstanceMask& b) {
  auto valid = [](const InstanceMask& m) {
    return m.bits.size() == static_cast<size_t>(m.width) * m.height;
  };
  if (!valid(a) || !valid(b)) return 0.0f;
  // Only the overlap of the two boxes can hold intersection pixels.
  const int x0 = std::max(a.x0, b.x0), x1 = std::min(a.x0 + a.width, b.x0 + b.width);
  const int y0 = std::max(a.y0, b.y0), y1 = std::min(a.y0 + a.height, b.y0 + b.height);
  int64_t inter = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) inter += a.at(x, y) && b.at(x, y);
  }
  const int64_t uni = a.area() + b.area() - inter;
  return uni > 0 ? static_cast<float>(static_cast<double>(inter) / static_cast<double>(uni)) : 0.0f;
}

void SegmentationMetrics::Add(const std::vector<Detection>& predictions,
                              const std::vector<Detection>& ground_truth) {
  num_predictions_ += static_cast<int>(predictions.size());
  num_ground_truth_ += static_cast<int>(ground_truth.size());
  const auto matches =
      GreedyMatch(predictions, ground_truth, [](const Detection& p, const Detection& g) {
        return p.mask && g.mask ? MaskIoU(*p.mask, *g.mask) : 0.0f;
      });
  for (const BoxMatch& m : matches) ious_.push_back(m.iou);
}

double SegmentationMetrics::MeanIoU() const {
  if (ious_.empty()) return 0.0;
  return std::accumulate(ious_.begin(), ious_.end(), 0.0) / static_cast<double>(ious_.size());
}

double SegmentationMetrics::MIoU() const {
  if (num_ground_truth_ == 0) return 0.0;
  return std::accumulate(ious_.begin(), ious_.end(), 0.0) / num_ground_truth_;
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

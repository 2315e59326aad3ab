// Evaluation metrics for captioning, VQA and detection — the same definitions as
// tools/demo_model/metrics.py (the transformers-side evaluator), so ocular's figures
// and the reference's are comparable number for number.
//
// Text answers (caption, VQA): exact match after trimming leading/trailing
// whitespace (ASCII space, tab, CR, LF). Nothing else is normalised.
//
// Detection matching rule, per example:
//   candidate pairs = (prediction, ground truth) with the SAME label string and
//   IoU > 0; sorted by IoU descending (ties: lower prediction index, then lower
//   ground-truth index); taken greedily when both sides are still unmatched.
// Mean IoU = mean of IoU over all matched pairs of all examples (0 if none).
// mAP@0.5: a matched pair with IoU >= 0.5 is a true positive; every other
// prediction is a false positive, every other ground truth a false negative,
// counted per class (class = label string). PaliGemma emits no scores, so each
// class has a single operating point and its AP (all-point interpolated) is
// precision × recall. mAP = mean AP over classes that have >= 1 ground truth;
// predictions of classes without ground truth add no class to the mean.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tasks/detection.h"

namespace ocular {

bool AnswerMatches(std::string_view prediction, std::string_view expected);

// Intersection over union of two boxes (continuous edges); 0 when either is empty.
float BoxIoU(const Detection& a, const Detection& b);

struct BoxMatch {
  int pred = 0;  // index into predictions
  int gt = 0;    // index into ground truths
  float iou = 0;
};

// The greedy matching described above, in the order the pairs were taken.
std::vector<BoxMatch> MatchDetections(const std::vector<Detection>& predictions,
                                      const std::vector<Detection>& ground_truth);

// Accumulates detection statistics over examples.
class DetectionMetrics {
 public:
  void Add(const std::vector<Detection>& predictions, const std::vector<Detection>& ground_truth);
  double MeanIoU() const;  // over matched pairs
  double MapAt50() const;
  int matched() const { return static_cast<int>(ious_.size()); }
  int num_predictions() const { return num_predictions_; }
  int num_ground_truth() const { return num_ground_truth_; }

 private:
  struct ClassCounts {
    int tp = 0, fp = 0, fn = 0;
  };
  std::vector<float> ious_;
  std::map<std::string, ClassCounts> classes_;
  int num_predictions_ = 0;
  int num_ground_truth_ = 0;
};

// Intersection over union of two masks in the same image (pixels set in either); 0 when both
// are empty.
float MaskIoU(const InstanceMask& a, const InstanceMask& b);

// Segmentation scores. Matching per example as for boxes above, but by MASK IoU: pairs with
// the same label and mask IoU > 0, greedy by IoU descending (same tie order); a prediction
// without a mask matches nothing.
//   MeanIoU(): mean mask IoU over matched pairs (0 if none) — the box metric's counterpart.
//   MIoU():    mean over ground-truth objects of their matched IoU, 0 when unmatched — the
//              "miou" of big_vision's segmentation evaluator (one object per example there).
class SegmentationMetrics {
 public:
  void Add(const std::vector<Detection>& predictions, const std::vector<Detection>& ground_truth);
  double MeanIoU() const;
  double MIoU() const;
  int matched() const { return static_cast<int>(ious_.size()); }
  int num_predictions() const { return num_predictions_; }
  int num_ground_truth() const { return num_ground_truth_; }

 private:
  std::vector<float> ious_;
  int num_predictions_ = 0;
  int num_ground_truth_ = 0;
};

// Accumulates exact-match accuracy.
class AccuracyMetric {
 public:
  void Add(std::string_view prediction, std::string_view expected) {
    ++total_;
    if (AnswerMatches(prediction, expected)) ++correct_;
  }
  double Accuracy() const { return total_ ? static_cast<double>(correct_) / total_ : 0.0; }
  int total() const { return total_; }
  int correct() const { return correct_; }

 private:
  int total_ = 0;
  int correct_ = 0;
};

}  // namespace ocular

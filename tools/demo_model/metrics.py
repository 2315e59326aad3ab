"""Caption / VQA / detection metrics — the definitions src/tasks/eval_metrics.h
implements in C++ (keep the two in step; testdata/tasks/metrics_cases.json pins
them together).

Text: exact match after stripping ASCII whitespace (space, tab, CR, LF) at both ends.
Detection decoding: v = loc / 1023, pixel = v * size (big_vision's evaluator rule,
docs/models.md section 3), float coordinates, corners ordered.
Matching, per example: pairs (pred, gt) with the same label and IoU > 0, sorted by
IoU descending (ties: lower pred index, then lower gt index), taken greedily.
Mean IoU: over all matched pairs. mAP@0.5: per class (label string) TP = matched
pairs with IoU >= 0.5, FP = other predictions, FN = other ground truths;
AP = precision * recall (one operating point: PaliGemma emits no scores);
mAP = mean over classes with >= 1 ground truth.
"""

from __future__ import annotations

import re

_WS = " \t\r\n"
_OBJ = re.compile(r"<loc(\d{4})><loc(\d{4})><loc(\d{4})><loc(\d{4})>")


def answer_matches(pred: str, expected: str) -> bool:
  return pred.strip(_WS) == expected.strip(_WS)


def parse_detections(text: str, width: int, height: int) -> list:
  """[(x0, y0, x1, y1, label)] — same tolerant rule as ocular::ParseDetections."""
  w = float(width) if width > 0 else 1.0
  h = float(height) if height > 0 else 1.0
  out = []
  pos = 0
  while True:
    m = _OBJ.search(text, pos)
    if not m:
      break
    vals = [int(g) for g in m.groups()]
    p = m.end()
    if any(v > 1023 for v in vals):
      pos = m.start() + 1
      continue
    while p < len(text) and text[p] in _WS:
      p += 1
    seg = re.match(r"(?:<seg\d{3}>){16}", text[p:])
    if seg:
      p += seg.end()
    end = p
    while end < len(text) and text[end] not in ";<":
      end += 1
    label = text[p:end].strip(_WS)
    y0, x0, y1, x1 = (vals[0] / 1023.0 * h, vals[1] / 1023.0 * w, vals[2] / 1023.0 * h,
                      vals[3] / 1023.0 * w)
    out.append((min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1), label))
    pos = end + 1 if end < len(text) and text[end] == ";" else end
  return out


def box_iou(a, b) -> float:
  iw = min(a[2], b[2]) - max(a[0], b[0])
  ih = min(a[3], b[3]) - max(a[1], b[1])
  if iw <= 0 or ih <= 0:
    return 0.0
  inter = iw * ih
  union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
  return inter / union if union > 0 else 0.0


def match(preds: list, gts: list) -> list:
  cands = []
  for i, p in enumerate(preds):
    for j, g in enumerate(gts):
      if p[4] != g[4]:
        continue
      iou = box_iou(p, g)
      if iou > 0:
        cands.append((iou, i, j))
  cands.sort(key=lambda c: (-c[0], c[1], c[2]))
  used_p, used_g, out = set(), set(), []
  for iou, i, j in cands:
    if i in used_p or j in used_g:
      continue
    used_p.add(i)
    used_g.add(j)
    out.append((i, j, iou))
  return out


class DetectionMetrics:

  def __init__(self):
    self.ious = []
    self.classes = {}  # label -> [tp, fp, fn]
    self.num_pred = 0
    self.num_gt = 0

  def add(self, preds: list, gts: list) -> None:
    self.num_pred += len(preds)
    self.num_gt += len(gts)
    tp_p, tp_g = set(), set()
    for i, j, iou in match(preds, gts):
      self.ious.append(iou)
      if iou >= 0.5:
        tp_p.add(i)
        tp_g.add(j)
    for i, p in enumerate(preds):
      c = self.classes.setdefault(p[4], [0, 0, 0])
      c[0 if i in tp_p else 1] += 1
    for j, g in enumerate(gts):
      if j not in tp_g:
        self.classes.setdefault(g[4], [0, 0, 0])[2] += 1

  def mean_iou(self) -> float:
    return sum(self.ious) / len(self.ious) if self.ious else 0.0

  def map50(self) -> float:
    aps = []
    for tp, fp, fn in self.classes.values():
      if tp + fn == 0:
        continue
      precision = tp / (tp + fp) if tp + fp else 0.0
      aps.append(precision * tp / (tp + fn))
    return sum(aps) / len(aps) if aps else 0.0


def mask_iou(a, b) -> float:
  union = (a | b).sum()
  return float((a & b).sum() / union) if union else 0.0


class SegmentationMetrics:
  """ocular::SegmentationMetrics: per example, same-label pairs with mask IoU > 0, greedy
  by IoU descending (ties: lower pred, then lower gt index); a prediction without a
  mask matches nothing. mean_iou over matched pairs, miou over ground-truth objects."""

  def __init__(self):
    self.ious, self.num_pred, self.num_gt = [], 0, 0

  def add(self, preds: list, gts: list) -> None:
    """preds, gts: [(mask or None, label)]."""
    self.num_pred += len(preds)
    self.num_gt += len(gts)
    cands = []
    for i, (pm, pl) in enumerate(preds):
      for j, (gm, gl) in enumerate(gts):
        if pm is None or pl != gl:
          continue
        iou = mask_iou(pm, gm)
        if iou > 0:
          cands.append((iou, i, j))
    cands.sort(key=lambda c: (-c[0], c[1], c[2]))
    used_p, used_g = set(), set()
    for iou, i, j in cands:
      if i not in used_p and j not in used_g:
        used_p.add(i)
        used_g.add(j)
        self.ious.append(iou)

  def mean_iou(self) -> float:
    return sum(self.ious) / len(self.ious) if self.ious else 0.0

  def miou(self) -> float:
    return sum(self.ious) / self.num_gt if self.num_gt else 0.0


def predicted_masks(text: str, width: int, height: int, decode) -> list:
  """[(mask or None, label)] for the objects parse_detections finds in `text`, in its
  order. decode(loc [4], codes [16], width, height) -> full-image bool mask, or None
  (an empty box: vqvae.mask_decoder); objects without 16 <seg> codes get None."""
  dets = parse_detections(text, width, height)
  out = []
  for m in _OBJ.finditer(text):
    if len(out) == len(dets):
      break
    loc = [int(g) for g in m.groups()]
    if any(v > 1023 for v in loc):
      continue
    codes = re.match(r"[ \t\r\n]*((?:<seg\d{3}>){16})", text[m.end():])
    mask = (decode(loc, [int(c) for c in re.findall(r"\d{3}", codes.group(1))], width,
                   height) if codes else None)
    out.append((mask, dets[len(out)][4]))
  return out


def score_examples(examples: list, predictions: list, decode=None) -> dict:
  """Held-out examples (shapes.heldout_examples [+ heldout_segment_examples]) + decoded
  outputs -> metrics dict (same keys as ocular::EvalSummaryJson, plus the count/colour
  split). decode: see predicted_masks (vqvae.mask_decoder); needed for segment examples."""
  caption, vqa, count, color = [], [], [], []
  det = DetectionMetrics()
  seg = SegmentationMetrics()
  for e, p in zip(examples, predictions):
    if e["kind"] == "detect":
      det.add(parse_detections(p, e["width"], e["height"]),
              [tuple(b) for b in e["boxes"]])
      continue
    if e["kind"] == "segment":
      from tools.demo_model import shapes  # numpy only
      gts = [(shapes.rle_decode(m["counts"], e["height"], e["width"]), b[4])
             for m, b in zip(e["masks"], e["boxes"])]
      seg.add(predicted_masks(p, e["width"], e["height"], decode), gts)
      continue
    ok = answer_matches(p, e["suffix"])
    if e["kind"] == "caption":
      caption.append(ok)
    else:
      vqa.append(ok)
      (count if e["kind"] == "count" else color).append(ok)
  mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
  return {
      "num_examples": len(examples),
      "caption_exact": mean(caption), "caption_n": len(caption),
      "vqa_accuracy": mean(vqa), "vqa_n": len(vqa),
      "vqa_count_accuracy": mean(count), "vqa_color_accuracy": mean(color),
      "detection_mean_iou": det.mean_iou(), "detection_map50": det.map50(),
      "detection_matched": len(det.ious), "detection_predictions": det.num_pred,
      "detection_ground_truth": det.num_gt,
      **({"mask_mean_iou": seg.mean_iou(), "mask_miou": seg.miou(),
          "mask_matched": len(seg.ious), "mask_predictions": seg.num_pred,
          "mask_ground_truth": seg.num_gt} if seg.num_gt or seg.num_pred else {}),
  }

"""Writes the small fixtures of the C++ tasks tests (deterministic):

  testdata/tasks/detections.jsonl   held-out detection suffixes + generator boxes
  testdata/tasks/metrics_cases.json perturbed predictions + the metrics that
                                    tools/demo_model/metrics.py computes for them
  testdata/tasks/heldout_small.jsonl + heldout_small_scored.json: the first 60
                                    held-out examples, predictions, their scores

  .venv/bin/python -m tools.demo_model.make_fixtures
"""

from __future__ import annotations

import json
import os
import random

from tools.demo_model import metrics, shapes

OUT = os.path.join("testdata", "tasks")


def _loc(v: float) -> str:
  return shapes.loc_token(v)


def _perturbed_prediction(rng: random.Random, ex: dict) -> str:
  """A plausible (sometimes wrong or malformed) model output for a detect example."""
  w, h = ex["width"], ex["height"]
  parts = []
  for x0, y0, x1, y1, label in ex["boxes"]:
    r = rng.random()
    if r < 0.1:
      continue  # missed object
    if r < 0.15:
      label = label + "x"  # wrong label
    j = rng.choice((0.0, 0.02, 0.05, 0.15, 0.4))
    dx, dy = (x1 - x0) * j, (y1 - y0) * j
    box = [x0 + rng.uniform(-dx, dx), y0 + rng.uniform(-dy, dy),
           x1 + rng.uniform(-dx, dx), y1 + rng.uniform(-dy, dy)]
    parts.append(_loc(box[1] / h) + _loc(box[0] / w) + _loc(box[3] / h) + _loc(box[2] / w) +
                 " " + label)
  if rng.random() < 0.1:  # a spurious extra box
    parts.append("<loc0100><loc0100><loc0300><loc0300> circle")
  text = " ; ".join(parts)
  if rng.random() < 0.1:
    text += " ;"  # trailing separator
  if rng.random() < 0.05:
    text = text[: max(0, len(text) - 12)]  # truncated output
  return text


def main() -> None:
  os.makedirs(OUT, exist_ok=True)
  examples = shapes.heldout_examples(200)
  detect = [e for e in examples if e["kind"] == "detect"]
  with open(os.path.join(OUT, "detections.jsonl"), "w", encoding="utf-8") as f:
    for e in detect[:30]:
      rec = {k: e[k] for k in ("seed", "width", "height", "prefix", "suffix", "boxes")}
      f.write(json.dumps(rec, sort_keys=True) + "\n")

  rng = random.Random(1234)
  det = metrics.DetectionMetrics()
  cases = []
  text_total = text_correct = 0
  for e in examples[:120]:
    if e["kind"] == "detect":
      pred = _perturbed_prediction(rng, e)
      preds = metrics.parse_detections(pred, e["width"], e["height"])
      gts = [tuple(b) for b in e["boxes"]]
      det.add(preds, gts)
    else:
      pred = e["suffix"] if rng.random() < 0.8 else rng.choice(("red", "2", "a blue star"))
      if rng.random() < 0.1:
        pred = " " + pred + "\n"
      text_total += 1
      text_correct += metrics.answer_matches(pred, e["suffix"])
    cases.append({"kind": e["kind"], "width": e["width"], "height": e["height"],
                  "expected": e["suffix"], "boxes": e.get("boxes", []), "prediction": pred})
  summary = {"text_accuracy": text_correct / text_total, "mean_iou": det.mean_iou(),
             "map50": det.map50(), "matched": len(det.ious), "num_pred": det.num_pred,
             "num_gt": det.num_gt}
  with open(os.path.join(OUT, "metrics_cases.json"), "w", encoding="utf-8") as f:
    json.dump({"cases": cases, "summary": summary}, f, indent=1, sort_keys=True)
    f.write("\n")
  print(summary)

  # The eval-set path of `ocular eval`: a small held-out JSONL, predictions, and the
  # figures metrics.score_examples gives for them.
  small = shapes.heldout_examples(60)
  with open(os.path.join(OUT, "heldout_small.jsonl"), "w", encoding="utf-8") as f:
    for ex in small:
      f.write(json.dumps(ex, sort_keys=True) + "\n")
  preds = []
  for e in small:
    if e["kind"] == "detect":
      preds.append(_perturbed_prediction(rng, e))
    else:
      preds.append(e["suffix"] if rng.random() < 0.75 else "blue")
  with open(os.path.join(OUT, "heldout_small_scored.json"), "w", encoding="utf-8") as f:
    json.dump({"predictions": preds, "summary": metrics.score_examples(small, preds)}, f,
              indent=1, sort_keys=True)
    f.write("\n")


if __name__ == "__main__":
  main()

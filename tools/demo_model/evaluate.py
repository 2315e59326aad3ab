"""Evaluates a shapes-world PaliGemma with transformers (greedy decoding) on the
500 held-out scenes (seeds HELDOUT_SEED_BASE + i, tools/demo_model/shapes.py).

  .venv/bin/python -m tools.demo_model.evaluate --model models/shapes-paligemma \
      --predictions build-tasks/eval/predictions.jsonl --metrics build-tasks/eval/metrics.json
  .venv/bin/python -m tools.demo_model.evaluate --write-heldout models/shapes-paligemma/heldout.jsonl

Metrics (definitions in tools/demo_model/metrics.py, same as src/tasks/eval_metrics.h):
caption exact match, VQA exact match (count + colour questions), detection mean IoU
of matched boxes and mAP@0.5.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from tools.demo_model import metrics, shapes  # noqa: E402


def write_heldout(path: str, count: int) -> None:
  """Prompts + expected answers (+ boxes) for the C++ evaluator. Images: regenerate
  them with `python -m tools.demo_model.shapes --heldout --out DIR` (file names match)."""
  with open(path, "w", encoding="utf-8") as f:
    for ex in shapes.heldout_examples(count):
      f.write(json.dumps(ex, sort_keys=True) + "\n")


def generate(model, processor, examples: list, batch: int, max_new_tokens: int) -> list:
  outs = []
  for i in range(0, len(examples), batch):
    chunk = examples[i:i + batch]
    images = [shapes.make_scene(e["seed"])[0] for e in chunk]
    inputs = processor(text=["<image>" + e["prefix"] for e in chunk], images=images,
                       padding="longest", return_tensors="pt")
    with torch.inference_mode():
      gen = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    new = gen[:, inputs["input_ids"].shape[1]:]
    outs.extend(processor.tokenizer.batch_decode(new, skip_special_tokens=True))
  return outs


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--model", help="HF folder (model + processor)")
  ap.add_argument("--count", type=int, default=shapes.HELDOUT_COUNT)
  ap.add_argument("--batch", type=int, default=50)
  ap.add_argument("--max-new-tokens", type=int, default=40)
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--predictions", help="write one JSON line per example")
  ap.add_argument("--metrics", help="write the metrics JSON here")
  ap.add_argument("--write-heldout", help="write the held-out JSONL and exit")
  ap.add_argument("--seg-vae", help="v2: mask VQ-VAE NPZ; adds the held-out segment "
                  "examples (use --max-new-tokens 80) and the mask metrics")
  args = ap.parse_args()
  if args.write_heldout:
    write_heldout(args.write_heldout, args.count)
    return

  from transformers import PaliGemmaForConditionalGeneration, PaliGemmaProcessor
  torch.set_num_threads(args.threads)
  processor = PaliGemmaProcessor.from_pretrained(args.model)
  processor.tokenizer.padding_side = "left"
  model = PaliGemmaForConditionalGeneration.from_pretrained(args.model).eval()
  examples = shapes.heldout_examples(args.count)
  decode = None
  if args.seg_vae:  # v2: the 125 held-out segment examples too (answers up to ~70 tokens)
    from tools.demo_model import vqvae
    examples += shapes.heldout_segment_examples(vqvae.MaskCodec(args.seg_vae))
    decode = vqvae.mask_decoder(args.seg_vae)
  t0 = time.time()
  preds = generate(model, processor, examples, args.batch, args.max_new_tokens)
  result = metrics.score_examples(examples, preds, decode)
  result["seconds"] = round(time.time() - t0, 1)
  print(json.dumps(result, indent=2))
  if args.predictions:
    os.makedirs(os.path.dirname(args.predictions) or ".", exist_ok=True)
    with open(args.predictions, "w", encoding="utf-8") as f:
      for e, p in zip(examples, preds):
        f.write(json.dumps({"id": e["id"], "kind": e["kind"], "prefix": e["prefix"],
                            "expected": e["suffix"], "prediction": p}, sort_keys=True) + "\n")
  if args.metrics:
    with open(args.metrics, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=2, sort_keys=True)
      f.write("\n")


if __name__ == "__main__":
  main()

"""Assembles models/shapes-paligemma/ from a training output folder:
the HF checkpoint files, the training log, heldout.jsonl (the 500 held-out prompts + expected answers
for `ocular eval`) and sample.png (held-out scene SAMPLE_INDEX, for `make demo`).

  .venv/bin/python -m tools.demo_model.export --src build-tasks/train/final \
      --dst models/shapes-paligemma
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

from tools.demo_model import shapes

SAMPLE_INDEX = 22  # a 261x193 gradient scene: red square, blue star, orange triangle
HF_FILES = ("config.json", "generation_config.json", "model.safetensors",
            "preprocessor_config.json", "processor_config.json", "special_tokens_map.json",
            "added_tokens.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json",
            "training_args.json")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--src", help="save_pretrained folder written by train.py")
  ap.add_argument("--dst", required=True)
  args = ap.parse_args()
  os.makedirs(args.dst, exist_ok=True)
  if args.src:
    for name in HF_FILES:
      if os.path.exists(os.path.join(args.src, name)):
        shutil.copyfile(os.path.join(args.src, name), os.path.join(args.dst, name))
    log = os.path.join(os.path.dirname(os.path.abspath(args.src)), "train_log.txt")
    if os.path.exists(log):  # train.py writes it to the workdir, the parent of --out
      shutil.copyfile(log, os.path.join(args.dst, "train_log.txt"))
  with open(os.path.join(args.dst, "heldout.jsonl"), "w", encoding="utf-8") as f:
    for ex in shapes.heldout_examples():
      f.write(json.dumps(ex, sort_keys=True) + "\n")
  img, _ = shapes.make_scene(shapes.HELDOUT_SEED_BASE + SAMPLE_INDEX)
  img.save(os.path.join(args.dst, "sample.png"))


if __name__ == "__main__":
  main()

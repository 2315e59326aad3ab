"""Assembles models/shapes-paligemma/ from a training output folder:
the HF checkpoint files, heldout.jsonl (the 500 held-out prompts + expected answers
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

SAMPLE_INDEX = 22  # a 298x163 noisy scene: red hexagon, blue star, orange square
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
  with open(os.path.join(args.dst, "heldout.jsonl"), "w", encoding="utf-8") as f:
    for ex in shapes.heldout_examples():
      f.write(json.dumps(ex, sort_keys=True) + "\n")
  img, _ = shapes.make_scene(shapes.HELDOUT_SEED_BASE + SAMPLE_INDEX)
  img.save(os.path.join(args.dst, "sample.png"))


if __name__ == "__main__":
  main()

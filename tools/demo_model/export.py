"""Assembles models/shapes-paligemma/ from training output folders (one per stage,
in order): the HF checkpoint files of the last stage, the training logs of all
stages (concatenated), the vision pre-training log if any, each stage's trainer
arguments (training_args.stageN.json), heldout.jsonl (the 500 held-out prompts +
expected answers for `ocular eval`) and sample.png (held-out scene SAMPLE_INDEX,
for `make demo`).

  .venv/bin/python -m tools.demo_model.export --src ROOT/lm/out ROOT/lm2/out \
      --vision-log ROOT/tower/log.txt --seg-vae ROOT/vae/shapes-vae.npz \
      --dst models/shapes-paligemma          (ROOT: train_v2.py's --root)
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
            "added_tokens.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--src", nargs="*", default=[],
                  help="train.py --out folders, one per training stage, in order")
  ap.add_argument("--vision-log", help="shape_probe.py's output of the vision "
                  "pre-training stage (copied as vision_pretrain_log.txt)")
  ap.add_argument("--dst", required=True)
  ap.add_argument("--seg-vae", help="v2: the mask VQ-VAE NPZ; copied as vae.safetensors "
                  "(decoder + codebook, what ocular loads) and the held-out segment examples "
                  "appended to heldout.jsonl")
  args = ap.parse_args()
  os.makedirs(args.dst, exist_ok=True)
  if args.src:
    for name in HF_FILES:
      if os.path.exists(os.path.join(args.src[-1], name)):
        shutil.copyfile(os.path.join(args.src[-1], name), os.path.join(args.dst, name))
    with open(os.path.join(args.dst, "train_log.txt"), "w", encoding="utf-8") as log:
      for stage, src in enumerate(args.src, 1):
        shutil.copyfile(os.path.join(src, "training_args.json"),
                        os.path.join(args.dst, f"training_args.stage{stage}.json"))
        # train.py writes its log to the workdir, the parent of --out
        with open(os.path.join(os.path.dirname(os.path.abspath(src)), "train_log.txt"),
                  encoding="utf-8") as f:
          log.write(f.read())
  if args.vision_log:
    shutil.copyfile(args.vision_log, os.path.join(args.dst, "vision_pretrain_log.txt"))
  examples = shapes.heldout_examples()
  if args.seg_vae:
    import numpy as np
    from safetensors.numpy import save_file
    from tools.demo_model import vqvae
    examples += shapes.heldout_segment_examples(vqvae.MaskCodec(args.seg_vae))
    arrays = {k: np.ascontiguousarray(v) for k, v in np.load(args.seg_vae).items()
              if not k.startswith("encoder.")}
    save_file(arrays, os.path.join(args.dst, "vae.safetensors"))
  with open(os.path.join(args.dst, "heldout.jsonl"), "w", encoding="utf-8") as f:
    for ex in examples:
      f.write(json.dumps(ex, sort_keys=True) + "\n")
  img, _ = shapes.make_scene(shapes.HELDOUT_SEED_BASE + SAMPLE_INDEX)
  img.save(os.path.join(args.dst, "sample.png"))


if __name__ == "__main__":
  main()

"""The demo model v2 recipe, every stage in order, resumable: run the same command again.

  nohup nice -n 19 .venv/bin/python -m tools.demo_model.train_v2 --root /work/demo2-train \
      >> /work/demo2-train/driver.txt 2>&1 &

Stages (each its own resumable script with fixed arguments; a stage that finished leaves
ROOT/<stage>.done and is skipped, a stage that was interrupted resumes from its last
checkpoint and — data and initialisation being pure functions of seeds and steps, one
torch thread per process, no dropout — ends with the same weights as an uninterrupted run):
  vae    tools/demo_model/vqvae.py: the mask VQ-VAE (128 codes, 4x4 tokens, big_vision's
         structure) -> ROOT/vae/shapes-vae.npz
  tower  tools/demo_model/tower.py: SigLIP tower pre-training on single-object scenes with
         the CNN teacher's per-patch features distilled into it -> ROOT/tower/tower.pt
  lm     tools/demo_model/train.py: the full PaliGemma, five tasks (caption, detect, count,
         colour, segment), started from the tower, bf16 autocast matmuls (--bf16)
         -> ROOT/lm/out (HF folder)
  lm2    tools/demo_model/train.py again: 8000 more steps from lm's weights (fresh optimizer,
         cosine from 3e-4, data seeds continuing after lm's), captions weighted up
         -> ROOT/lm2/out (HF folder, the shipped model)
Kill it at any moment (kill the driver's process group, or let the session end);
re-running the command continues where the last checkpoint left off. Progress: ROOT/*/log*.
The arguments of every stage are in stages() below (models/shapes-paligemma/MODEL_CARD.md,
"Training"); export.py --src ROOT/lm/out ROOT/lm2/out assembles the shipped folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

PY = sys.executable

# The v2 curriculum: (first step, max objects, weights over caption, detect, count,
# colour, segment), batch 32.
CURRICULUM = [[0, 1, [0.25, 0.3, 0.0, 0.25, 0.2]],
              [1000, 2, [0.2, 0.35, 0.1, 0.15, 0.2]],
              [2500, 3, [0.2, 0.35, 0.1, 0.1, 0.25]]]
# Stage lm2 (continued training from lm's last weights, new data): three objects,
# captions weighted up (their errors are shape/colour binding of overlapping objects).
CURRICULUM2 = [[0, 3, [0.35, 0.3, 0.05, 0.05, 0.25]]]


def stages(root: str) -> list:
  vae = os.path.join(root, "vae")
  tower = os.path.join(root, "tower")
  lm = os.path.join(root, "lm")
  lm2 = os.path.join(root, "lm2")
  return [
      ("vae", [PY, "-m", "tools.demo_model.vqvae", "--workdir", vae, "--steps", "3000",
               "--out", os.path.join(vae, "shapes-vae.npz")]),
      ("tower", [PY, "-m", "tools.demo_model.tower", "--workdir", tower, "--steps", "6000",
                 "--batch", "32", "--procs", "2", "--lr", "5e-4", "--distill", "feat",
                 "--layer", "-1", "--weight", "1.0", "--ckpt-every", "100"]),
      ("lm", [PY, "-m", "tools.demo_model.train", "--workdir", lm,
              "--out", os.path.join(lm, "out"), "--steps", "12000", "--batch", "32",
              "--procs", "2", "--bf16", "--ckpt-every", "100", "--probe-every", "500",
              "--init-vision", os.path.join(tower, "tower.pt"),
              "--seg-vae", os.path.join(vae, "shapes-vae.npz"),
              "--curriculum", json.dumps(CURRICULUM)]),
      ("lm2", [PY, "-m", "tools.demo_model.train", "--workdir", lm2,
               "--out", os.path.join(lm2, "out"), "--steps", "8000", "--batch", "32",
               "--procs", "2", "--bf16", "--ckpt-every", "100", "--probe-every", "500",
               "--init-from", os.path.join(lm, "checkpoint.pt"), "--step-offset", "12000",
               "--lr", "3e-4", "--warmup", "200",
               "--loc-sigma-start", "4", "--loc-sigma-end", "4",
               "--seg-vae", os.path.join(vae, "shapes-vae.npz"),
               "--curriculum", json.dumps(CURRICULUM2)]),
  ]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--root", required=True)
  ap.add_argument("--only", help="run this stage only (still skipped when done)")
  args = ap.parse_args()
  os.makedirs(args.root, exist_ok=True)
  env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1",
             PYTHONPATH=os.getcwd())
  for name, cmd in stages(args.root):
    done = os.path.join(args.root, name + ".done")
    if os.path.exists(done) or (args.only and name != args.only):
      continue
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} stage {name}: {' '.join(cmd)}", flush=True)
    t0 = time.time()
    rc = subprocess.call(cmd, env=env)
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} stage {name} exit {rc} after "
          f"{time.time() - t0:.0f}s", flush=True)
    if rc != 0:
      sys.exit(rc)
    with open(done, "w") as f:
      f.write(json.dumps({"cmd": cmd, "seconds_this_run": time.time() - t0}) + "\n")


if __name__ == "__main__":
  main()

"""Diagnostics for the shapes model's localisation (why detection does not learn).

  .venv/bin/python -m tools.demo_model.diagnose --model models/shapes-paligemma \
      [--checkpoint WORKDIR/checkpoint.pt]

Two measurements on single-object held-out-range scenes (seeds 1 000 009 000+):
1. Decoder attention at the last prompt position ("\\n", which predicts the first
   answer token): per layer and head, the share of the image attention that lands
   on object patches, next to the object's share of the patches. Equal shares mean
   the decoder does not select the object (it pools the whole image).
2. Linear probes (ridge regression, 300 train / 100 test scenes) from the image
   features the decoder receives to the object's centre: mean-pooled over all
   patches vs pooled over the object's patches (oracle mask). Error is the mean
   absolute error as a fraction of the image side, with the predict-the-mean
   baseline. And from the decoder's hidden state at the last prompt position of
   "detect <shape>" (after each layer): if position is readable there but the loc
   tokens still come out at the prior, the bottleneck is the readout into <loc>
   logits, not the vision features or the attention.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from tools.demo_model import shapes

GRID_PATCH = 14


def _scenes(count: int, image_size: int):
  imgs, centres, masks = [], [], []
  seed = shapes.HELDOUT_SEED_BASE + 9000
  grid = image_size // GRID_PATCH
  while len(imgs) < count:
    seed += 1
    img, scene = shapes.make_scene(seed)
    if len(scene.objects) != 1:
      continue
    o = scene.objects[0]
    a = np.asarray(img.resize((image_size, image_size)), dtype=np.float32)
    saturated = (a.max(2) - a.min(2)) > 100
    cover = saturated.reshape(grid, GRID_PATCH, grid, GRID_PATCH).mean((1, 3))
    imgs.append((img, o.shape))
    centres.append([(o.y0 + o.y1) / 2 / scene.height, (o.x0 + o.x1) / 2 / scene.width])
    masks.append(cover.reshape(-1))
  return imgs, np.array(centres), np.array(masks)


def _ridge_error(z: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
  ztr, zte, ytr, yte = z[:300], z[300:], y[:300], y[300:]
  a = np.linalg.solve(ztr.T @ ztr + lam * np.eye(z.shape[1]), ztr.T @ (ytr - ytr.mean(0)))
  return np.abs(zte @ a + ytr.mean(0) - yte).mean(0)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--model", required=True, help="HF folder (config + processor)")
  ap.add_argument("--checkpoint", help="train.py checkpoint.pt to load instead")
  args = ap.parse_args()
  from transformers import PaliGemmaForConditionalGeneration, PaliGemmaProcessor
  torch.set_num_threads(1)
  processor = PaliGemmaProcessor.from_pretrained(args.model)
  processor.tokenizer.padding_side = "left"
  model = PaliGemmaForConditionalGeneration.from_pretrained(
      args.model, attn_implementation="eager").eval()
  if args.checkpoint:
    model.load_state_dict(torch.load(args.checkpoint, weights_only=False)["model"])
  size = model.config.vision_config.image_size
  scenes, centres, masks = _scenes(400, size)
  image_id = model.config.image_token_index

  # 1. attention selectivity (32 scenes, detect and colour prompts alternating)
  n = 32
  prompts = [("detect " if i % 2 else "answer en what color is the ") + s +
             ("" if i % 2 else "?") for i, (_, s) in enumerate(scenes[:n])]
  inputs = processor(text=["<image>" + p for p in prompts], images=[s[0] for s in scenes[:n]],
                     return_tensors="pt", padding="longest")
  with torch.no_grad():
    out = model(**inputs, output_attentions=True)
  on_object = torch.tensor(masks[:n] > 0.2, dtype=torch.float32)
  is_image = inputs["input_ids"] == image_id
  print(f"object share of patches: {on_object.mean():.3f}")
  for layer, att in enumerate(out.attentions):
    cells = []
    for h in range(att.shape[1]):
      a = torch.stack([att[b, h, -1][is_image[b]] for b in range(n)])
      share = ((a * on_object).sum(1) / a.sum(1)).mean()
      cells.append(f"h{h} image {a.sum(1).mean():.2f} object share {share:.2f}")
    print(f"layer {layer}: " + " | ".join(cells))

  # 2. linear probes of the object centre
  feats = []
  with torch.no_grad():
    for i in range(0, len(scenes), 50):
      pv = processor.image_processor([s[0] for s in scenes[i:i + 50]],
                                     return_tensors="pt")["pixel_values"]
      feats.append(model.model.get_image_features(pv).numpy())
  f = np.concatenate(feats)
  w = masks / (masks.sum(1, keepdims=True) + 1e-6)
  base = np.abs(centres[300:] - centres[:300].mean(0)).mean(0)
  print(f"centre (y, x) baseline error {base.round(3)}")
  hidden = []
  with torch.no_grad():
    for i in range(0, len(scenes), 50):
      chunk = scenes[i:i + 50]
      inputs = processor(text=["<image>detect " + s for _, s in chunk],
                         images=[im for im, _ in chunk], return_tensors="pt",
                         padding="longest")
      out = model(**inputs, output_hidden_states=True)
      hidden.append(torch.stack([h[:, -1] for h in out.hidden_states[1:]], 1).numpy())
  hidden = np.concatenate(hidden)  # [scenes, layers, hidden]
  probes = [("mean-pooled", f.mean(1)), ("object-pooled", (f * w[:, :, None]).sum(1))]
  probes += [(f"decoder layer {k} at the prompt end", hidden[:, k])
             for k in range(hidden.shape[1])]
  for name, z in probes:
    best = min((_ridge_error(z, centres, lam) for lam in (1e-3, 1e-2, 1e-1, 1.0)),
               key=lambda e: e.sum())
    print(f"{name} features -> centre error {best.round(3)}")


if __name__ == "__main__":
  main()

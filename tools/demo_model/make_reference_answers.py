"""Reference answers of the shipped shapes model, for ocular's parity test.

Runs transformers (f32, eager, greedy) on models/shapes-paligemma with a few held-out
scenes and every task kind, and writes testdata/tasks/shapes_reference.json: for each
case the image file, prompt, generated token ids and decoded text, and for `segment`
prompts each object's full-image mask as the reference decodes it (the mask VQ-VAE in torch,
big_vision's placement: vqvae.mask_decoder; COCO RLE). The scene images
are written next to it (small PNGs) so the C++ test needs no Python.
tests/golden/shapes_model_test.cc checks that ocular generates the same ids and masks.

  .venv/bin/python -m tools.demo_model.make_reference_answers
"""

from __future__ import annotations

import json
import os
import random

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from tools.demo_model import shapes  # noqa: E402

MODEL = "models/shapes-paligemma"
OUT = os.path.join("testdata", "tasks")
# Held-out scene indices (plain 3 objects, noise 2, gradient 1); the first entry (None) is
# the shipped sample image (gradient, 3 objects).
SCENES = (None, 1, 2, 8)
MAX_NEW_TOKENS = 80  # three segmented objects are 3 x 21 tokens
# The model's mask VQ-VAE (MODEL/vae.safetensors is its decoder half, export.py).
VAE = os.path.join("testdata", "seg", "vae-shapes.npz")


def _prompts(scene: shapes.Scene, seed: int) -> list:
  rng = random.Random(seed)
  out = ["caption en", "answer en how many shapes are there?"]
  out += [f"answer en what color is the {o.shape}?" for o in scene.objects]
  out.append(shapes.make_task(scene, rng, "detect")["prefix"])
  out.append("detect " + " ; ".join(o.shape for o in scene.objects))
  out.append(f"segment {scene.objects[0].shape}")  # 4 <loc> + 16 <seg> + the label
  out.append("segment " + " ; ".join(o.shape for o in scene.objects))
  return out


def main() -> None:
  from transformers import PaliGemmaForConditionalGeneration, PaliGemmaProcessor
  from tools.demo_model import metrics, vqvae
  from tools.demo_model.export import SAMPLE_INDEX
  decode = vqvae.mask_decoder(VAE)
  torch.set_num_threads(2)
  processor = PaliGemmaProcessor.from_pretrained(MODEL)
  model = PaliGemmaForConditionalGeneration.from_pretrained(
      MODEL, attn_implementation="eager").eval()
  cases = []
  for k in SCENES:
    index = SAMPLE_INDEX if k is None else k
    seed = shapes.HELDOUT_SEED_BASE + index
    img, scene = shapes.make_scene(seed)
    if k is None:
      image_path = os.path.join(MODEL, "sample.png")
    else:
      image_path = os.path.join(OUT, f"shapes_{index:04d}.png")
      img.save(image_path, optimize=True)
    for prompt in _prompts(scene, seed):
      inputs = processor(text="<image>" + prompt, images=img, return_tensors="pt")
      with torch.inference_mode():
        gen = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, do_sample=False)
      ids = gen[0, inputs["input_ids"].shape[1]:].tolist()
      case = {"image": image_path, "prompt": prompt, "output_ids": ids,
              "text": processor.tokenizer.decode(ids, skip_special_tokens=True)}
      if prompt.startswith("segment "):
        masks = metrics.predicted_masks(case["text"], img.width, img.height, decode)
        case["masks"] = [None if m is None else shapes.coco_rle(m) for m, _ in masks]
      cases.append(case)
  path = os.path.join(OUT, "shapes_reference.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"model": MODEL, "max_new_tokens": MAX_NEW_TOKENS, "cases": cases}, f,
              indent=1, sort_keys=True)
    f.write("\n")
  print(f"{len(cases)} cases -> {path}")


if __name__ == "__main__":
  main()

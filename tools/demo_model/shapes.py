"""The "shapes world": deterministic synthetic scenes + PaliGemma-style tasks.

Every scene is a pure function of one integer seed (``make_scene(seed)``), so the
training stream, the held-out set and the shipped sample image are reproducible
bit for bit. A scene holds 1-3 objects of distinct shape types (so "what color is
the triangle?" has one answer), drawn without overlap on a non-square canvas with a
plain, gradient or noisy (textured) background.

Tasks (PaliGemma prompt syntax, see docs/models.md sections 1.6 / 3):
  caption en                          -> "a red circle and a blue square"
  detect circle                       -> "<loc0123><loc0045><loc0456><loc0390> circle"
  detect red square ; blue triangle   -> two objects joined by " ; " in prompt order
  answer en how many shapes are there? -> "2"
  answer en what color is the triangle? -> "green"

Box encoding (docs/models.md section 3, big_vision training rule): a box is
(y_min, x_min, y_max, x_max) in continuous pixel edges of the ORIGINAL canvas,
normalised by the canvas height/width, and each value becomes <locNNNN> with
NNNN = round(v * 1023).

Run ``python -m tools.demo_model.shapes --out DIR --count N`` to dump scenes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

SHAPES = ("circle", "square", "triangle", "star")
COLORS = {
    "red": (220, 30, 30),
    "green": (30, 170, 40),
    "blue": (35, 70, 225),
    "yellow": (240, 215, 20),
    "purple": (140, 40, 180),
    "orange": (245, 130, 15),
}
COLOR_NAMES = tuple(COLORS)
BACKGROUNDS = ("plain", "gradient", "noise")
# Canvas sides (pixels, drawn independently: aspect ratios up to 1.5) and the shape
# radius as a fraction of the shorter side: at the model's 112 px input the smallest
# shape is still ~18 px across.
MIN_SIDE, MAX_SIDE = 192, 288
RADIUS = (0.12, 0.22)

# Seeds: training uses TRAIN_SEED_BASE + i; the held-out evaluation set uses
# HELDOUT_SEED_BASE + i for i in [0, 500). The ranges never meet.
TRAIN_SEED_BASE = 0
HELDOUT_SEED_BASE = 1_000_000_000
HELDOUT_COUNT = 500


@dataclass
class Obj:
  shape: str
  color: str
  # Continuous pixel edges on the canvas: x0 <= x < x1, y0 <= y < y1.
  x0: float
  y0: float
  x1: float
  y1: float
  # How it was drawn (centre, radius in pixels, rotation in radians): object_mask
  # redraws it. None for metadata-only objects (_cheap_scene).
  geometry: tuple | None = None

  @property
  def name(self) -> str:
    return f"{self.color} {self.shape}"


@dataclass
class Scene:
  seed: int
  width: int
  height: int
  background: str
  objects: list  # list[Obj], sorted left to right by box centre

  def loc_string(self, o: Obj) -> str:
    return "".join(
        loc_token(v)
        for v in (o.y0 / self.height, o.x0 / self.width, o.y1 / self.height,
                  o.x1 / self.width))


def loc_token(v: float) -> str:
  """big_vision's training encoding: round(v * 1023), clamped to [0, 1023]."""
  return f"<loc{min(1023, max(0, int(round(v * 1023)))):04d}>"


def _grey_tone(rng: random.Random) -> tuple:
  """A low-saturation background colour, so no shape colour is ever camouflaged."""
  base = rng.choice([rng.randint(20, 70), rng.randint(150, 235)])
  return tuple(max(0, min(255, base + rng.randint(-12, 12))) for _ in range(3))


def _background(rng: random.Random, kind: str, w: int, h: int) -> Image.Image:
  a, b = _grey_tone(rng), _grey_tone(rng)
  if kind == "plain":
    return Image.new("RGB", (w, h), a)
  if kind == "gradient":
    t = np.linspace(0.0, 1.0, w if rng.random() < 0.5 else h, dtype=np.float64)
    line = (np.outer(1.0 - t, a) + np.outer(t, b)).astype(np.uint8)
    arr = (np.broadcast_to(line[None, :, :], (h, w, 3)) if line.shape[0] == w else
           np.broadcast_to(line[:, None, :], (h, w, 3)))
    return Image.fromarray(np.ascontiguousarray(arr), "RGB")
  # noise: per-pixel uniform texture around the base tone
  nrng = np.random.default_rng(rng.getrandbits(32))
  amp = rng.randint(10, 40)
  arr = np.asarray(a, np.int32)[None, None, :] + nrng.integers(-amp, amp + 1, (h, w, 3))
  return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")


def _polygon(shape: str, cx: float, cy: float, r: float, rot: float) -> list:
  if shape == "triangle":
    angles = [rot + k * 2 * math.pi / 3 for k in range(3)]
    return [(cx + r * math.cos(t), cy + r * math.sin(t)) for t in angles]
  if shape == "star":
    pts = []
    for k in range(10):
      rr = r if k % 2 == 0 else r * 0.45
      t = rot + k * math.pi / 5
      pts.append((cx + rr * math.cos(t), cy + rr * math.sin(t)))
    return pts
  raise ValueError(shape)


def _draw(draw: ImageDraw.ImageDraw, shape: str, color: tuple, cx: float, cy: float,
          r: float, rot: float) -> tuple:
  """Draws one shape; returns its continuous-edge bounding box (x0, y0, x1, y1)."""
  if shape == "circle":
    box = (round(cx - r), round(cy - r), round(cx + r) - 1, round(cy + r) - 1)
    draw.ellipse(box, fill=color)
    return box[0], box[1], box[2] + 1, box[3] + 1
  if shape == "square":
    s = r * 0.85
    box = (round(cx - s), round(cy - s), round(cx + s) - 1, round(cy + s) - 1)
    draw.rectangle(box, fill=color)
    return box[0], box[1], box[2] + 1, box[3] + 1
  pts = [(round(x), round(y)) for x, y in _polygon(shape, cx, cy, r, rot)]
  draw.polygon(pts, fill=color)
  xs, ys = [p[0] for p in pts], [p[1] for p in pts]
  return min(xs), min(ys), max(xs) + 1, max(ys) + 1


def make_scene(seed: int, radius: tuple = RADIUS) -> tuple:
  """Returns (PIL RGB image, Scene) for one seed. Deterministic. `radius`: the
  range of shape radii as fractions of the shorter side (training curricula start
  with larger shapes; the held-out set uses the default)."""
  rng = random.Random(seed)
  w, h = rng.randint(MIN_SIDE, MAX_SIDE), rng.randint(MIN_SIDE, MAX_SIDE)
  kind = rng.choice(BACKGROUNDS)
  img = _background(rng, kind, w, h)
  draw = ImageDraw.Draw(img)
  n = rng.choice((1, 2, 2, 3, 3))
  shapes = rng.sample(SHAPES, n)
  objects = []
  for shape in shapes:
    color_name = rng.choice(COLOR_NAMES)
    for _ in range(200):  # rejection-sample a non-overlapping placement
      r = rng.uniform(*radius) * min(w, h)
      cx, cy = rng.uniform(r + 2, w - r - 2), rng.uniform(r + 2, h - r - 2)
      if all(math.hypot(cx - ocx, cy - ocy) > r + orr + 4 for ocx, ocy, orr in
             ((o[0], o[1], o[2]) for o in objects)):
        break
    else:
      continue
    objects.append((cx, cy, r, shape, color_name, rng.uniform(0, 2 * math.pi)))
  result = []
  for cx, cy, r, shape, color_name, rot in objects:
    x0, y0, x1, y1 = _draw(draw, shape, COLORS[color_name], cx, cy, r, rot)
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    result.append(Obj(shape, color_name, float(x0), float(y0), float(x1), float(y1),
                      (cx, cy, r, rot)))
  result.sort(key=lambda o: (o.x0 + o.x1, o.y0 + o.y1))
  return img, Scene(seed, w, h, kind, result)


def object_mask(scene: Scene, o: Obj) -> np.ndarray:
  """The object's pixels on the canvas, [height, width] bool: the same draw call as
  make_scene on a blank single-channel canvas (objects never overlap, so this is
  exactly what the object covers in the image)."""
  canvas = Image.new("L", (scene.width, scene.height), 0)
  cx, cy, r, rot = o.geometry
  _draw(ImageDraw.Draw(canvas), o.shape, 255, cx, cy, r, rot)
  return np.asarray(canvas) > 127


def caption(scene: Scene) -> str:
  """Objects left to right: "a red circle", "... and a blue square", "a, b and c"."""
  names = [("an " if o.color[0] in "aeiou" else "a ") + o.name for o in scene.objects]
  if len(names) == 1:
    return names[0]
  return ", ".join(names[:-1]) + " and " + names[-1]


def detect_answer(scene: Scene, queries: list) -> str:
  """PaliGemma detection output for queries (each a shape or "color shape")."""
  parts = []
  for q in queries:
    for o in scene.objects:
      if q == o.shape or q == o.name:
        parts.append(f"{scene.loc_string(o)} {q}")
  return " ; ".join(parts)


TASK_KINDS = ("caption", "detect", "count", "color")
# v2 adds segmentation; weights over these five kinds draw "segment" too. Four weights
# draw over TASK_KINDS exactly as before.
TASK_KINDS_V2 = TASK_KINDS + ("segment",)
_TASK_WEIGHTS = (0.25, 0.45, 0.1, 0.2)


def make_task(scene: Scene, rng: random.Random, kind: str | None = None,
              weights: tuple | None = None, absent: float = 0.0,
              seg_codes=None) -> dict:
  """One (prefix, suffix) pair about the scene. kind: one of TASK_KINDS_V2 or None
  (drawn with `weights` over the first len(weights) kinds of TASK_KINDS_V2, default
  _TASK_WEIGHTS). absent (training only): the probability that a detect prompt also
  names a shape that is not in the scene, which the answer leaves out (as PaliGemma
  does) — detection then needs the shape to be recognised, not only the one object
  found. absent=0 draws exactly the same tasks as before (the held-out set uses 0).
  seg_codes(scene, obj) -> 16 codebook indices (vqvae.MaskCodec.codes): required for
  "segment", which answers like detect with the 16 <segNNN> tokens after each box
  (big_vision's refcoco_mask2str: loc string, then mask string, then the label)."""
  if kind is None:
    w = weights or _TASK_WEIGHTS
    kind = rng.choices(TASK_KINDS_V2[:len(w)], w)[0]
  objs = scene.objects
  if kind == "caption":
    return {"kind": kind, "prefix": "caption en", "suffix": caption(scene)}
  if kind == "count":
    return {"kind": kind, "prefix": "answer en how many shapes are there?",
            "suffix": str(len(objs))}
  if kind == "color":
    o = rng.choice(objs)
    return {"kind": kind, "prefix": f"answer en what color is the {o.shape}?",
            "suffix": o.color}
  # detect: a random non-empty subset of the objects, in random order, each named by
  # its shape or by "color shape".
  k = rng.randint(1, len(objs))
  chosen = rng.sample(objs, k)
  queries = [o.name if rng.random() < 0.5 else o.shape for o in chosen]
  if absent > 0 and rng.random() < absent:
    missing = rng.choice([s for s in SHAPES if all(o.shape != s for o in objs)])
    if rng.random() < 0.5:
      missing = f"{rng.choice(COLOR_NAMES)} {missing}"
    queries.insert(rng.randint(0, len(queries)), missing)
  if kind == "segment":
    if seg_codes is None:
      raise ValueError("segment tasks need seg_codes (the mask VQ-VAE's encoder)")
    return {"kind": kind, "prefix": "segment " + " ; ".join(queries),
            "suffix": segment_answer(scene, queries, seg_codes), "queries": queries}
  return {"kind": "detect", "prefix": "detect " + " ; ".join(queries),
          "suffix": detect_answer(scene, queries), "queries": queries}


def segment_answer(scene: Scene, queries: list, seg_codes) -> str:
  """PaliGemma segmentation output: per matching object, 4 <loc> + 16 <seg> + label."""
  parts = []
  for q in queries:
    for o in scene.objects:
      if q == o.shape or q == o.name:
        segs = "".join(f"<seg{c:03d}>" for c in seg_codes(scene, o))
        parts.append(f"{scene.loc_string(o)}{segs} {q}")
  return " ; ".join(parts)


def coco_rle(mask: np.ndarray) -> list:
  """Uncompressed COCO RLE counts of a [height, width] bool mask: column-major runs,
  alternating 0 and 1, starting with a 0-run (docs/segmentation.md)."""
  flat = np.asarray(mask, bool).T.reshape(-1)
  change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
  edges = np.concatenate([[0], change, [flat.size]])
  counts = np.diff(edges).tolist()
  return ([0] + counts) if flat.size and flat[0] else counts


def rle_decode(counts: list, height: int, width: int) -> np.ndarray:
  """Inverse of coco_rle."""
  flat = np.repeat(np.arange(len(counts)) % 2, counts).astype(bool)
  return flat.reshape(width, height).T


SEGMENT_HELDOUT_COUNT = 125  # seeds HELDOUT_SEED_BASE + HELDOUT_COUNT + i


def heldout_segment_examples(seg_codes, count: int = SEGMENT_HELDOUT_COUNT) -> list:
  """The v2 held-out segmentation examples: seeds HELDOUT_SEED_BASE + HELDOUT_COUNT + i
  (after the 500 of heldout_examples, still never used in training), one "segment"
  task each, with the ground-truth boxes and full-image masks (COCO RLE) that `ocular
  eval` and metrics.py score."""
  out = []
  for i in range(count):
    seed = HELDOUT_SEED_BASE + HELDOUT_COUNT + i
    _, scene = make_scene(seed)
    task = make_task(scene, random.Random(seed ^ 0x5EED), "segment", seg_codes=seg_codes)
    objs = [o for q in task["queries"] for o in scene.objects if q in (o.shape, o.name)]
    labels = [q for q in task["queries"] for o in scene.objects if q in (o.shape, o.name)]
    out.append({
        "id": HELDOUT_COUNT + i, "seed": seed, "image": f"{HELDOUT_COUNT + i:04d}.png",
        "width": scene.width, "height": scene.height, "kind": "segment",
        "prefix": task["prefix"], "suffix": task["suffix"],
        "boxes": [[o.x0, o.y0, o.x1, o.y1, q] for o, q in zip(objs, labels)],
        "masks": [{"size": [scene.height, scene.width],
                   "counts": coco_rle(object_mask(scene, o))} for o in objs]})
  return out


def heldout_examples(count: int = HELDOUT_COUNT) -> list:
  """The held-out evaluation set: one task per scene, kinds cycled so each kind is
  a quarter of the set. Returns dicts with seed, image size, prefix, suffix, boxes."""
  out = []
  for i in range(count):
    seed = HELDOUT_SEED_BASE + i
    _, scene = make_scene(seed)
    task = make_task(scene, random.Random(seed ^ 0x5EED), TASK_KINDS[i % 4])
    ex = {"id": i, "seed": seed, "image": f"{i:04d}.png", "width": scene.width,
          "height": scene.height, "kind": task["kind"], "prefix": task["prefix"],
          "suffix": task["suffix"]}
    if task["kind"] == "detect":
      ex["boxes"] = [[o.x0, o.y0, o.x1, o.y1, q] for q in task["queries"]
                     for o in scene.objects if q in (o.shape, o.name)]
    out.append(ex)
  return out


def corpus_lines(count: int = 20000) -> list:
  """Prompt + answer text for tokenizer training (no images)."""
  lines = []
  for i in range(count):
    t = make_task(_cheap_scene(i), random.Random(i ^ 0x7A5C))
    lines.append(t["prefix"])
    lines.append(t["suffix"])
  return lines


def _cheap_scene(seed: int) -> Scene:
  """Scene metadata without pixels (tokenizer corpus only)."""
  rng = random.Random(seed)
  n = rng.choice((1, 2, 3))
  objs = [Obj(s, rng.choice(COLOR_NAMES), 0.0, 0.0, 1.0, 1.0)
          for s in rng.sample(SHAPES, n)]
  return Scene(seed, 1, 1, "plain", objs)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--out", required=True, help="folder for PNGs + tasks.jsonl")
  ap.add_argument("--count", type=int, default=HELDOUT_COUNT)
  ap.add_argument("--heldout", action="store_true",
                  help="write the held-out evaluation set (images + JSONL)")
  ap.add_argument("--seg-vae", help="v2: also the held-out segment examples, tokenized "
                  "with this mask VQ-VAE NPZ (tools/demo_model/vqvae.py; needs torch)")
  ap.add_argument("--set", help="draw the images of this JSONL's examples instead (e.g. "
                  "models/shapes-paligemma/heldout.jsonl, segment scenes included; numpy "
                  "and Pillow only)")
  args = ap.parse_args()
  os.makedirs(args.out, exist_ok=True)
  if args.set:
    with open(args.set, encoding="utf-8") as f:
      examples = [json.loads(line) for line in f if line.strip()]
    args.heldout = True
  else:
    examples = heldout_examples(args.count)
  if args.seg_vae and not args.set:
    from tools.demo_model import vqvae  # torch
    examples += heldout_segment_examples(vqvae.MaskCodec(args.seg_vae))
  with open(os.path.join(args.out, "tasks.jsonl"), "w", encoding="utf-8") as f:
    for ex in examples:
      f.write(json.dumps(ex, sort_keys=True) + "\n")
  if args.heldout:
    for ex in examples:
      img, _ = make_scene(ex["seed"])
      img.save(os.path.join(args.out, ex["image"]), optimize=False)


if __name__ == "__main__":
  main()

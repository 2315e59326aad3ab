"""How fast can a vision encoder of the demo model's size learn shape identity alone?

  .venv/bin/python -m tools.demo_model.shape_probe --steps 1500 [--arch cnn|patchify] [--patch P]

Trains a 4-way shape classifier on single-object shapes-world scenes (same images,
same SigLIP preprocessing as the demo model): the demo model's SigLIP tower (112 px,
patch 14, hidden 128, 4 layers; train.py's sin-cos position init) + mean pooling +
a linear layer, or one of two CNN controls ("cnn": 3x3 convolutions; "patchify": a
--patch x --patch stride-patch stem like SigLIP's, then the same kind of head).
Prints the accuracy on 128 held-out single-object scenes every 50 steps. It isolates
the vision half of the demo model's shape-identity gap (MODEL_CARD.md): with a
direct label on every example, how many steps does the shape take to appear? (At
lr 3e-3: "cnn" 98 % at step 600, "patchify" 38 %; the SigLIP tower ~32 %.)
With --save it is also stage 0 of the shipped model, the vision pre-training
(MODEL_CARD.md: --steps 4600 --batch 32 --procs 2 --lr 5e-4).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from tools.demo_model import parallel, shapes, train  # noqa: E402


def single_object_batch(processor, first_seed: int, n: int, radius: tuple,
                        positions=None) -> tuple:
  images, labels = [], []
  for j in (range(n) if positions is None else positions):
    seed = first_seed + j
    img, scene = shapes.make_scene(seed, radius)
    while len(scene.objects) != 1:
      seed += train.SEED_STRIDE
      img, scene = shapes.make_scene(seed, radius)
    images.append(img)
    labels.append(shapes.SHAPES.index(scene.objects[0].shape))
  pixels = processor(images, return_tensors="pt")["pixel_values"]
  return pixels, torch.tensor(labels)


def siglip_classifier(image_size: int, patch: int):
  from transformers import SiglipVisionConfig, SiglipVisionModel
  cfg = SiglipVisionConfig(hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                           num_attention_heads=4, image_size=image_size,
                           patch_size=patch, hidden_act="gelu_pytorch_tanh",
                           layer_norm_eps=1e-6, vision_use_head=False)
  tower = SiglipVisionModel(cfg)
  holder = torch.nn.Module()  # init_vision_positions expects model.model.vision_tower
  holder.model = torch.nn.Module()
  holder.model.vision_tower = tower
  train.init_vision_positions(holder, 1.0)

  class Classifier(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.tower, self.head = tower, torch.nn.Linear(128, len(shapes.SHAPES))

    def forward(self, x):
      return self.head(self.tower(pixel_values=x).last_hidden_state.mean(1))
  return Classifier()


def cnn_classifier(patchify: bool, patch: int):
  """Controls. "cnn": four 3x3 conv + BatchNorm + ReLU blocks with 2x2 max pooling,
  then global max pooling — a translation-equivariant first layer. "patchify": the
  same head behind SigLIP's kind of stem, one patch x patch stride-patch convolution
  (a linear map of each patch, as the ViT's patch embedding) — to tell the cost of a
  patch-wise linear stem apart from the cost of the transformer behind it."""
  nn = torch.nn

  def block(cin, cout, k=3, stride=1, pad=1):
    return [nn.Conv2d(cin, cout, k, stride, pad), nn.BatchNorm2d(cout), nn.ReLU()]
  if patchify:
    layers = block(3, 128, patch, patch, 0) + block(128, 128)
  else:
    layers = (block(3, 32) + [nn.MaxPool2d(2)] + block(32, 64) + [nn.MaxPool2d(2)] +
              block(64, 128) + [nn.MaxPool2d(2)] + block(128, 128))
  return nn.Sequential(*layers, nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                       nn.Linear(128, len(shapes.SHAPES)))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--arch", choices=("siglip", "cnn", "patchify"), default="siglip")
  ap.add_argument("--steps", type=int, default=1500)
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--lr", type=float, default=1e-3)
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--procs", type=int, default=1,
                  help="data-parallel processes, one thread each (parallel.py); "
                  "--batch is the global batch")
  ap.add_argument("--image-size", type=int, default=train.IMAGE_SIZE,
                  help="model input side (a multiple of --patch)")
  ap.add_argument("--patch", type=int, default=train.PATCH_SIZE,
                  help="patch side of the siglip tower / the patchify control's stem")
  ap.add_argument("--save", help="siglip: save the tower's weights here every 500 steps "
                  "and at the end (train.py --init-vision loads them)")
  ap.add_argument("--radius", type=float, nargs=2, default=shapes.RADIUS,
                  help="shape radius range as fractions of the shorter side")
  args = ap.parse_args()
  parallel.launch(run, args, args.procs)


def run(args, rank: int, procs: int) -> None:
  torch.set_num_threads(args.threads if procs == 1 else 1)
  torch.manual_seed(0)
  processor = train.build_image_processor(args.image_size)
  model = (siglip_classifier(args.image_size, args.patch) if args.arch == "siglip" else
           cnn_classifier(args.arch == "patchify", args.patch))
  parallel.sync_parameters(model, procs)
  opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
  radius = tuple(args.radius)
  val_x, val_y = single_object_batch(processor, shapes.HELDOUT_SEED_BASE, 128, radius)
  t0 = time.time()
  for step in range(args.steps + 1):
    if step % 50 == 0 and rank == 0:
      model.eval()
      with torch.no_grad():
        acc = (model(val_x).argmax(1) == val_y).float().mean().item()
      print(f"step {step} held-out shape accuracy {acc:.3f} ({time.time() - t0:.0f}s)",
            flush=True)
      model.train()
    if (rank == 0 and args.save and args.arch == "siglip" and
        (step % 500 == 0 or step == args.steps)):
      torch.save({"vision_tower": model.tower.state_dict(), "step": step,
                  "accuracy": acc}, args.save + ".tmp")
      os.replace(args.save + ".tmp", args.save)
    if step == args.steps:
      break
    x, y = single_object_batch(processor, shapes.TRAIN_SEED_BASE + step * args.batch,
                               args.batch, radius, parallel.part(args.batch, rank, procs))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    parallel.average_gradients(model, procs)
    opt.step()


if __name__ == "__main__":
  main()

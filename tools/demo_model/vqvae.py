"""The shapes world's mask VQ-VAE: big_vision's segmentation tokenizer at a small width.

  .venv/bin/python -m tools.demo_model.vqvae --workdir /work/demo2-train/vae \
      --out testdata/seg/shapes-vae.npz [--steps 3000]

PaliGemma answers `segment X` with 4 <loc> and 16 <seg> tokens per object: the codebook
indices of a VQ-VAE (arXiv:2301.02229) whose decoder ocular runs (src/tasks/mask_decoder,
docs/segmentation.md). This module trains one on the shapes world's masks with the SAME
structure and tensor names as big_vision's `vae-oid.npz`, only narrower (decoder width
--width instead of 128, code dimension --dim instead of 512, still 128 codes, 4x4 grid,
64x64 masks), so the same C++ code decodes it.

big_vision's format (big_vision/pp/proj/paligemma/segmentation.py, refcoco_mask2str and
encode_to_codebook_indices), followed here:
  - the object's mask is cropped to its box and resized to 64x64 with antialiased
    bilinear filtering, values in [0, 1] (mask_crop: the box is the object's pixel edges,
    the same edges its <loc> tokens encode; torch's antialiased bilinear stands in for
    tf.image.resize(..., antialias=True));
  - encoder: x -> 2 (x - 0.5); 4 stride-2 convs with ReLU (encoder.0, .2, .4, .6; 4x4
    kernels, padding 1 = TF "SAME" for stride 2 on even sizes); 2 residual blocks
    (encoder.8, .9: 3x3, ReLU, 3x3, ReLU, 1x1, + input); 1x1 conv to the code dimension
    (encoder.10); nearest codebook entry (squared distance) at each of the 4x4 cells,
    row-major -> 16 indices;
  - decoder: tools/reference/make_seg_fixtures.make_decoder (the reference the C++ decoder
    is tested against); output ~ the mask mapped to [-1, 1], object where > 0.
Training (deterministic: seeded data and init, one thread): reconstruction MSE to
2 m - 1, plus the VQ-VAE codebook and 0.25 x commitment terms with a straight-through
gradient (van den Oord et al. 2017); codes unused for --restart-every steps are reset
to encoder outputs of the current batch. Masks come from scenes with seeds
VAE_SEED_BASE + i (never a training or held-out scene of the language model). Resumable:
WORKDIR/checkpoint.pt is written every --ckpt-every steps and picked up on restart.
"""

from __future__ import annotations

import argparse
import os
import re
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tools.demo_model import shapes  # noqa: E402
from tools.reference import make_seg_fixtures as ref  # noqa: E402

MASK_SIZE = 64
NUM_CODES = 128
VAE_SEED_BASE = 2_000_000_000  # disjoint from training (< 1e9) and held-out (1e9 + i)


def mask_crop(scene: shapes.Scene, o: shapes.Obj) -> np.ndarray:
  """The object's mask in its box, resized to 64x64, float32 in [0, 1] (big_vision:
  mask[y1:y2, x1:x2] -> resize bilinear antialias -> / 255)."""
  m = shapes.object_mask(scene, o)
  x0, y0, x1, y1 = int(o.x0), int(o.y0), int(o.x1), int(o.y1)
  crop = torch.from_numpy(m[y0:y1, x0:x1].astype(np.float32))[None, None]
  out = F.interpolate(crop, size=(MASK_SIZE, MASK_SIZE), mode="bilinear",
                      align_corners=False, antialias=True)
  return out[0, 0].clamp(0, 1).numpy()


def make_encoder(dim: int, width: int) -> torch.nn.Sequential:
  """big_vision's encoder as the PyTorch Sequential whose names its NPZ uses."""
  chans = [1, width // 8, width // 4, width // 2, width]
  layers = []
  for i in range(4):
    layers += [torch.nn.Conv2d(chans[i], chans[i + 1], 4, stride=2, padding=1),
               torch.nn.ReLU()]
  layers += [ref.ResBlock(width), ref.ResBlock(width), torch.nn.Conv2d(width, dim, 1)]
  return torch.nn.Sequential(*layers)


class MaskVAE(torch.nn.Module):
  def __init__(self, dim: int, width: int):
    super().__init__()
    self.dim, self.width = dim, width
    self.encoder = make_encoder(dim, width)
    self.decoder = ref.make_decoder(dim, width)
    self.codebook = torch.nn.Parameter(torch.empty(NUM_CODES, dim).uniform_(-1, 1) / dim ** 0.5)

  def encode_continuous(self, masks: torch.Tensor) -> torch.Tensor:
    """[B, 64, 64] in [0, 1] -> encoder output [B, D, 4, 4]."""
    return self.encoder(2.0 * (masks[:, None] - 0.5))

  def nearest(self, z: torch.Tensor) -> torch.Tensor:
    """[B, D, 4, 4] -> codes [B, 16] (big_vision _get_codebook_indices: row-major cells)."""
    flat = z.permute(0, 2, 3, 1).reshape(-1, self.dim)
    d = (flat.pow(2).sum(1, keepdim=True) + self.codebook.pow(2).sum(1)[None]
         - 2 * flat @ self.codebook.T)
    return d.argmin(1).reshape(z.shape[0], 16)

  def decode_codes(self, codes: torch.Tensor) -> torch.Tensor:
    """codes [B, 16] -> logits [B, 64, 64] (make_seg_fixtures.decode's lookup)."""
    q = self.codebook[codes].reshape(-1, 4, 4, self.dim).permute(0, 3, 1, 2)
    return self.decoder(q)[:, 0]

  def state_npz(self) -> dict:
    """The tensors under big_vision's vae-oid.npz names."""
    sd = {f"encoder.{k}": v for k, v in self.encoder.state_dict().items()}
    sd.update({f"decoder.{k}": v for k, v in self.decoder.state_dict().items()})
    sd["_vq_vae._embedding"] = self.codebook.detach()
    return {k: v.detach().float().numpy() for k, v in sd.items()}


def load_npz(path: str) -> MaskVAE:
  arrays = dict(np.load(path))
  dim = arrays["_vq_vae._embedding"].shape[1]
  width = arrays["decoder.0.weight"].shape[0]
  vae = MaskVAE(dim, width)
  vae.encoder.load_state_dict({k[len("encoder."):]: torch.from_numpy(v)
                               for k, v in arrays.items() if k.startswith("encoder.")})
  vae.decoder.load_state_dict({k[len("decoder."):]: torch.from_numpy(v)
                               for k, v in arrays.items() if k.startswith("decoder.")})
  with torch.no_grad():
    vae.codebook.copy_(torch.from_numpy(arrays["_vq_vae._embedding"]))
  return vae.eval()


class MaskCodec:
  """seg_codes for shapes.make_task: the 16 codes of an object's mask."""

  def __init__(self, path: str):
    self.vae = load_npz(path)

  @torch.no_grad()
  def __call__(self, scene: shapes.Scene, o: shapes.Obj) -> list:
    m = torch.from_numpy(mask_crop(scene, o))[None]
    return self.vae.nearest(self.vae.encode_continuous(m))[0].tolist()


def mask_decoder(path: str):
  """decode(loc [4], codes [16], width, height) -> the full-image bool mask ocular draws
  (docs/segmentation.md: big_vision's placement, make_seg_fixtures.place_mask), or None
  for an empty box; for metrics.predicted_masks."""
  vae = load_npz(path)

  @torch.no_grad()
  def decode(loc, codes, width, height):
    if any(c >= NUM_CODES for c in codes):
      return None
    logits = vae.decode_codes(torch.tensor([codes]))[0].numpy()
    return ref.place_mask(logits, loc, width, height)[0]
  return decode


def scene_masks(seed: int) -> list:
  """64x64 crops of every object of scene `seed`."""
  _, scene = shapes.make_scene(seed)
  return [mask_crop(scene, o) for o in scene.objects]


def mask_batch(step: int, scenes: int) -> torch.Tensor:
  crops = []
  for j in range(scenes):
    crops += scene_masks(VAE_SEED_BASE + step * scenes + j)
  return torch.from_numpy(np.stack(crops))


def vq_step(vae: MaskVAE, masks: torch.Tensor, beta: float = 0.25) -> tuple:
  z = vae.encode_continuous(masks)
  codes = vae.nearest(z.detach())
  q = vae.codebook[codes].reshape(-1, 4, 4, vae.dim).permute(0, 3, 1, 2)
  codebook_loss = F.mse_loss(q, z.detach())
  commit = F.mse_loss(z, q.detach())
  st = z + (q - z).detach()  # straight-through
  recon = F.mse_loss(vae.decoder(st)[:, 0], 2.0 * masks - 1.0)
  return recon + codebook_loss + beta * commit, recon.item(), codes, z


def place_iou(vae: MaskVAE, seeds: range) -> float:
  """Mean IoU over the objects of scenes `seeds` between the object's mask and the mask
  ocular would draw from its codes (big_vision's placement: loc tokens / 1023, int edges,
  PIL bilinear of the float logits, > 0; make_seg_fixtures.place_mask)."""
  ious = []
  for seed in seeds:
    _, scene = shapes.make_scene(seed)
    for o in scene.objects:
      m = torch.from_numpy(mask_crop(scene, o))[None]
      with torch.no_grad():
        logits = vae.decode_codes(vae.nearest(vae.encode_continuous(m)))[0].numpy()
      loc = [int(v) for v in re.findall(r"<loc(\d{4})>", scene.loc_string(o))]
      pred, _ = ref.place_mask(logits, loc, scene.width, scene.height)
      gt = shapes.object_mask(scene, o)
      if pred is None:
        ious.append(0.0)
        continue
      ious.append(float((pred & gt).sum() / max(1, (pred | gt).sum())))
  return float(np.mean(ious))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--workdir", required=True, help="checkpoint.pt and log.txt")
  ap.add_argument("--out", help="write the trained tensors here (NPZ, big_vision names)")
  ap.add_argument("--steps", type=int, default=3000)
  ap.add_argument("--scenes", type=int, default=32, help="scenes per batch (1-3 masks each)")
  ap.add_argument("--lr", type=float, default=1e-3)
  ap.add_argument("--dim", type=int, default=64, help="code dimension (vae-oid: 512)")
  ap.add_argument("--width", type=int, default=64, help="decoder width (vae-oid: 128)")
  ap.add_argument("--restart-every", type=int, default=100)
  ap.add_argument("--ckpt-every", type=int, default=200)
  args = ap.parse_args()
  torch.set_num_threads(1)
  torch.manual_seed(0)
  os.makedirs(args.workdir, exist_ok=True)
  vae = MaskVAE(args.dim, args.width)
  opt = torch.optim.Adam(vae.parameters(), lr=args.lr)
  gen = torch.Generator().manual_seed(1)
  used = torch.zeros(NUM_CODES, dtype=torch.bool)
  start = 0
  ckpt = os.path.join(args.workdir, "checkpoint.pt")
  if os.path.exists(ckpt):
    ck = torch.load(ckpt, weights_only=False)
    vae.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    gen.set_state(ck["gen"])
    used, start = ck["used"], ck["step"]
  log = open(os.path.join(args.workdir, "log.txt"), "a", encoding="utf-8")
  print(f"start {start} args {vars(args)}", file=log, flush=True)
  t0 = time.time()
  for step in range(start, args.steps):
    lr = args.lr * min(1.0, 0.5 * (1 + np.cos(np.pi * step / args.steps)) + 0.05)
    for g in opt.param_groups:
      g["lr"] = lr
    masks = mask_batch(step, args.scenes)
    loss, recon, codes, z = vq_step(vae, masks)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    used[codes.reshape(-1)] = True
    if (step + 1) % args.restart_every == 0 and step + 1 < 0.8 * args.steps:
      dead = (~used).nonzero()[:, 0]
      if len(dead):
        pool = z.detach().permute(0, 2, 3, 1).reshape(-1, vae.dim)
        pick = torch.randint(0, len(pool), (len(dead),), generator=gen)
        with torch.no_grad():
          vae.codebook[dead] = pool[pick]
      print(f"step {step + 1} restarted {len(dead)} unused codes", file=log, flush=True)
      used.zero_()
    if step % 50 == 0:
      print(f"step {step} loss {loss.item():.4f} recon {recon:.4f} lr {lr:.2e} "
            f"({time.time() - t0:.0f}s)", file=log, flush=True)
    if (step + 1) % args.ckpt_every == 0 or step + 1 == args.steps:
      torch.save({"model": vae.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state(),
                  "used": used, "step": step + 1}, ckpt + ".tmp")
      os.replace(ckpt + ".tmp", ckpt)
  vae.eval()
  iou = place_iou(vae, range(shapes.HELDOUT_SEED_BASE, shapes.HELDOUT_SEED_BASE + 200))
  codes = torch.cat([vae.nearest(vae.encode_continuous(mask_batch(s, 32)))
                     for s in range(10_000, 10_005)])
  print(f"final: round-trip mask IoU {iou:.4f} on the objects of 200 held-out scenes; "
        f"{len(codes.unique())} of {NUM_CODES} codes in use", file=log, flush=True)
  if args.out:
    ref.write_npz(args.out, vae.state_npz(), compressed=True)


if __name__ == "__main__":
  main()

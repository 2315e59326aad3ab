"""Vision pre-training of the demo model's SigLIP tower, helped by a CNN teacher (v2 stage 0).

  .venv/bin/python -m tools.demo_model.tower --workdir W --steps N [--batch 32 --procs 2]
      [--distill feat|logits|none --layer L --weight X] [--radius A B]

The question of shape_probe.py (MODEL_CARD.md: the demo tower reaches ~32 % held-out shape
accuracy after 600 steps of batch 16, a 3x3 CNN 98 %), with a DeiT-style helper: a small
CNN teacher (shape_probe.cnn_classifier, trained first on the same single-object stream,
--teacher-steps, lr 3e-3, cached in W/teacher.pt) is run on every training image, and the
tower's patch tokens after encoder layer --layer (0 = the patch embeddings, k = after
layer k, -1 = the final output) are trained to predict, through a linear map that is
discarded afterwards,
  feat:   the teacher's last conv features (14x14x128, average-pooled to the 8x8 patch grid,
          divided by their RMS) — mean squared error;
  logits: the teacher's classifier applied at every cell of that grid (before its global
          max pooling) — KL divergence to its softmax, per patch;
  none:   nothing (shape_probe's stage 0).
The tower's own shape classifier (mean pool + linear, cross-entropy on the label) trains
at the same time; its held-out accuracy (128 single-object scenes) is logged every 50
steps. The architecture stays SigLIP: the map, the classifier and the teacher are
training-time helpers only. With --workdir the run checkpoints every --ckpt-every steps
(model, map, optimizer, step) and resumes from W/checkpoint.pt; W/tower.pt holds the
tower in shape_probe's --save format (train.py --init-vision).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tools.demo_model import parallel, shape_probe, shapes, train  # noqa: E402

GRID = train.IMAGE_SIZE // train.PATCH_SIZE  # 8
TEACHER_SEED_BASE = 7_000_000  # the teacher's stream (training range, < HELDOUT_SEED_BASE)


def train_teacher(processor, steps: int, batch: int, radius: tuple, path: str):
  """shape_probe's "cnn" control, trained on single-object scenes (lr 3e-3), cached."""
  if os.path.exists(path):
    return torch.load(path, weights_only=False)
  torch.manual_seed(0)
  net = shape_probe.cnn_classifier(False, 0)
  opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
  for step in range(steps):
    x, y = shape_probe.single_object_batch(
        processor, shapes.TRAIN_SEED_BASE + TEACHER_SEED_BASE + step * batch, batch, radius)
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
  net.eval()
  torch.save(net, path + ".tmp")
  os.replace(path + ".tmp", path)
  return net


def teacher_targets(net, x):
  """(features [B, 64, 128] at the 8x8 patch grid / their RMS, per-cell logits [B, 64, 4])."""
  trunk, head = net[:-3], net[-1]  # drop AdaptiveMaxPool2d and Flatten; keep the Linear
  with torch.no_grad():
    f = trunk(x)  # [B, 128, 14, 14]
    f = F.adaptive_avg_pool2d(f, GRID).flatten(2).transpose(1, 2)  # [B, 64, 128]
    logits = head(f)
    f = f / f.pow(2).mean().sqrt().clamp_min(1e-6)
  return f, logits


def distill_loss(kind: str, pred, feat, logits):
  if kind == "feat":
    return F.mse_loss(pred, feat)
  return F.kl_div(F.log_softmax(pred, -1), F.log_softmax(logits, -1), log_target=True,
                  reduction="batchmean") / pred.shape[1]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--workdir", help="teacher.pt, checkpoint.pt, tower.pt, log.txt")
  ap.add_argument("--teacher", help="teacher cache (default WORKDIR/teacher.pt)")
  ap.add_argument("--teacher-steps", type=int, default=800)
  ap.add_argument("--distill", choices=("feat", "logits", "none"), default="feat")
  ap.add_argument("--layer", type=int, default=-1)
  ap.add_argument("--weight", type=float, default=1.0)
  ap.add_argument("--steps", type=int, default=600)
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--lr", type=float, default=1e-3)
  ap.add_argument("--procs", type=int, default=1)
  ap.add_argument("--ckpt-every", type=int, default=100)
  ap.add_argument("--radius", type=float, nargs=2, default=shapes.RADIUS)
  args = ap.parse_args()
  if args.workdir:
    os.makedirs(args.workdir, exist_ok=True)
  args.teacher = args.teacher or os.path.join(args.workdir, "teacher.pt")
  if args.distill != "none":
    torch.set_num_threads(1)
    train_teacher(train.build_image_processor(), args.teacher_steps, 16, tuple(args.radius),
                  args.teacher)
  parallel.launch(run, args, args.procs)


def run(args, rank: int, procs: int) -> None:
  torch.set_num_threads(1)
  radius = tuple(args.radius)
  processor = train.build_image_processor()
  teacher = (torch.load(args.teacher, weights_only=False) if args.distill != "none" else None)
  log = print if rank == 0 else (lambda *a, **k: None)
  if args.workdir and rank == 0:
    logf = open(os.path.join(args.workdir, "log.txt"), "a", encoding="utf-8")
    log = lambda *a, **k: (print(*a, **k), print(*a, file=logf, flush=True))  # noqa: E731
  val_x, val_y = shape_probe.single_object_batch(processor, shapes.HELDOUT_SEED_BASE, 128,
                                                 radius)
  if teacher is not None:
    with torch.no_grad():
      tacc = (teacher(val_x).argmax(1) == val_y).float().mean().item()
    log(f"teacher held-out accuracy {tacc:.3f}", flush=True)
  torch.manual_seed(0)
  model = shape_probe.siglip_classifier(train.IMAGE_SIZE, train.PATCH_SIZE)
  proj = torch.nn.Linear(128, 128 if args.distill == "feat" else len(shapes.SHAPES))
  both = torch.nn.ModuleList([model, proj])
  opt = torch.optim.AdamW(both.parameters(), lr=args.lr)
  start = 0
  ckpt = os.path.join(args.workdir, "checkpoint.pt") if args.workdir else None
  if ckpt and os.path.exists(ckpt):
    ck = torch.load(ckpt, weights_only=False)
    both.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    start = ck["step"]
    log(f"resumed at step {start}", flush=True)
  parallel.sync_parameters(both, procs)
  log(f"args {vars(args)}", flush=True)
  t0 = time.time()
  for step in range(start, args.steps + 1):
    if step % 50 == 0 and rank == 0:
      model.eval()
      with torch.no_grad():
        acc = (model(val_x).argmax(1) == val_y).float().mean().item()
      log(f"step {step} held-out shape accuracy {acc:.3f} ({time.time() - t0:.0f}s)",
          flush=True)
      model.train()
    if ckpt and rank == 0 and step > start and (step % args.ckpt_every == 0 or
                                                 step == args.steps):
      torch.save({"model": both.state_dict(), "opt": opt.state_dict(), "step": step},
                 ckpt + ".tmp")
      os.replace(ckpt + ".tmp", ckpt)
      tower = os.path.join(args.workdir, "tower.pt")
      torch.save({"vision_tower": model.tower.state_dict(), "step": step}, tower + ".tmp")
      os.replace(tower + ".tmp", tower)
    if step == args.steps:
      break
    x, y = shape_probe.single_object_batch(
        processor, shapes.TRAIN_SEED_BASE + step * args.batch, args.batch, radius,
        parallel.part(args.batch, rank, procs))
    out = model.tower(pixel_values=x, output_hidden_states=teacher is not None)
    loss = F.cross_entropy(model.head(out.last_hidden_state.mean(1)), y)
    if teacher is not None:
      tokens = out.hidden_states[args.layer] if args.layer >= 0 else out.last_hidden_state
      feat, logits = teacher_targets(teacher, x)
      loss = loss + args.weight * distill_loss(args.distill, proj(tokens), feat, logits)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if teacher is None:  # the map gets no gradient; keep the all-reduce buffers aligned
      proj.zero_grad(set_to_none=False)
    parallel.average_gradients(both, procs)
    opt.step()


if __name__ == "__main__":
  main()

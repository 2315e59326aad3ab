"""Trains the tiny shapes-world PaliGemma on CPU with transformers.

  .venv/bin/python -m tools.demo_model.train --workdir build-tasks/final \
      --out build-tasks/final/out

Real architecture (PaliGemmaForConditionalGeneration = SigLIP + projector + Gemma)
at a tiny config; inputs come from PaliGemmaProcessor (prefix "<image>"*64 + "<bos>"
+ prompt + "\\n", suffix + "<eos>", labels = -100 on the prefix via token_type_ids).
Data is generated on the fly from deterministic seeds (tools/demo_model/shapes.py),
following a fixed curriculum (CURRICULUM below: single objects first, so the vision
path is learned before the decoder settles on the text prior); all RNGs are seeded,
torch runs with a fixed thread count, so a run is repeatable on the same machine.
--device cuda --workers N trains on a GPU with N data processes (the batches, and
so the data, are the same for any N; see BatchStream); the shipped model is CPU-trained.

Training details that are not plain HF defaults (none changes the architecture):
  - init: Fourier-feature <loc> rows (init_loc_embeddings), 2-D sin-cos SigLIP
    position embeddings (init_vision_positions), LeCun-normal projector
    (init_projector);
  - loss: the suffix cross-entropy, with <loc> targets smoothed over neighbouring
    bins by an annealed Gaussian (suffix_loss);
  - log: teacher-forced held-out metrics every --probe-every steps (probe_metrics);
  - --procs N: N data-parallel CPU processes, one thread each (parallel.py);
  - knobs kept for experiments (the defaults are the earlier one-process recipe; the
    shipped model's arguments are in MODEL_CARD.md, with what the knobs did):
    --curriculum, --loc-init quad/thermo, --loc-fmax, --qk-init-gain,
    --vision-pos-gain, --text-kv-heads, --absent (detect prompts that also name an
    absent shape).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time

# Threads sleep instead of spinning at OpenMP barriers: on a shared 2-core machine a
# spinning thread waiting for a descheduled sibling made steps 10x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from tools.demo_model import parallel, shapes, tokenizer as shapes_tokenizer

IMAGE_SIZE = 112
PATCH_SIZE = 14  # SigLIP-So400m's patch size
NUM_IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2  # 64 (an 8x8 grid)


def build_config(vocab_size: int, image_token_index: int, args):
  from transformers import PaliGemmaConfig
  # Embedding rows: the SentencePiece vocab + <image>, padded to a multiple of 64
  # like HF PaliGemma (rows past <image> are never produced by the tokenizer).
  rows = (vocab_size + 63) // 64 * 64
  return PaliGemmaConfig(
      vision_config=dict(
          model_type="siglip_vision_model", hidden_size=args.vision_hidden,
          intermediate_size=args.vision_mlp, num_hidden_layers=args.vision_layers,
          num_attention_heads=args.vision_heads, image_size=IMAGE_SIZE,
          patch_size=PATCH_SIZE, num_channels=3, layer_norm_eps=1e-6,
          hidden_act="gelu_pytorch_tanh", vision_use_head=False,
          projection_dim=args.text_hidden, num_image_tokens=NUM_IMAGE_TOKENS),
      text_config=dict(
          model_type="gemma", hidden_size=args.text_hidden,
          intermediate_size=args.text_mlp, num_hidden_layers=args.text_layers,
          num_attention_heads=args.text_heads, num_key_value_heads=args.text_kv_heads,
          head_dim=args.text_hidden // args.text_heads, vocab_size=rows,
          max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=10000.0,
          hidden_activation="gelu_pytorch_tanh", pad_token_id=0, bos_token_id=2,
          eos_token_id=1, tie_word_embeddings=True),
      image_token_index=image_token_index, vocab_size=rows,
      projection_dim=args.text_hidden, hidden_size=args.text_hidden,
      pad_token_id=0, bos_token_id=2, eos_token_id=1)


def build_image_processor(size: int = IMAGE_SIZE):
  """SigLIP preprocessing as in PaliGemma: bicubic resize to size x size, x 1/255,
  mean = std = 0.5."""
  from transformers import SiglipImageProcessor
  return SiglipImageProcessor(
      do_resize=True, size={"height": size, "width": size}, resample=3,
      do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
      image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], do_convert_rgb=False)


def build_processor(tok_dir: str):
  from transformers import AutoTokenizer, PaliGemmaProcessor
  image_processor = build_image_processor()
  image_processor.image_seq_length = NUM_IMAGE_TOKENS
  tok = AutoTokenizer.from_pretrained(tok_dir)
  return PaliGemmaProcessor(image_processor=image_processor, tokenizer=tok)


def init_loc_embeddings(model, tok, kind: str, fmax: float) -> None:
  """Init of the 1024 <loc> rows (tied with the output layer), at the mean norm of
  the other rows, so neighbouring locations start with similar embeddings/logits:
  "fourier" (shipped): sin/cos of 2*pi*f*v/1023 for frequencies f log-spaced from
  0.25 to `fmax` cycles; "quad" (experiment): the Fourier rows on all but 3
  dimensions plus (1, z, 1/3 - z^2), z = 2v - 1, on the last 3 — a hidden state h
  then adds a + b*z - c*z^2 to the logit of bin z, a parabola whose argmax b / 2c
  moves linearly with h (with Fourier rows alone the decoder must produce
  high-frequency sin/cos of the coordinate); "thermo" (experiment): tanh ramps
  around `hidden` knots, a code a decoder holding the coordinate linearly could
  threshold — at 5x this norm the vision path collapsed, at this norm it learned no
  faster than "fourier"."""
  emb = model.get_input_embeddings().weight
  hidden = emb.shape[1]
  ids = tok.convert_tokens_to_ids(shapes_tokenizer.LOC_TOKENS)
  u = torch.arange(1024, dtype=torch.float64) / 1023.0
  nfreq = hidden // 2
  norm = emb[4:].norm(dim=1).mean().double()
  if kind == "thermo":
    knots = (torch.arange(hidden, dtype=torch.float64) + 0.5) / hidden
    feats = torch.tanh((u[:, None] - knots[None, :]) * hidden)
    feats = feats / feats.norm(dim=1, keepdim=True) * norm
  else:
    width = hidden - 3 if kind == "quad" else hidden
    freqs = torch.logspace(math.log10(0.25), math.log10(fmax), nfreq, dtype=torch.float64)
    ang = 2 * math.pi * u[:, None] * freqs[None, :]
    feats = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)[:, :width]
    feats = feats / feats.norm(dim=1, keepdim=True) * norm
    if kind == "quad":
      z = 2 * u - 1
      quad = torch.stack([torch.ones_like(z), z, 1.5 * (1 / 3 - z * z)], dim=1)
      feats = torch.cat([feats, 0.5 * norm * quad], dim=1)
  with torch.no_grad():
    emb[ids] = feats.to(emb.dtype)


def init_decoder_attention(model, gain: float) -> None:
  """Scales the decoder's q/k projections at init by `gain`: with Gemma's std 0.02
  the attention logits start near 0 (uniform attention over the image tokens), and
  reading where an object is needs attention that picks its patches."""
  if gain == 1.0:
    return
  with torch.no_grad():
    for layer in model.model.language_model.layers:
      layer.self_attn.q_proj.weight.mul_(gain)
      layer.self_attn.k_proj.weight.mul_(gain)


def init_vision_positions(model, gain: float) -> None:
  """2-D sin-cos init of SigLIP's learned position embeddings (as in MAE / big_vision's
  "sincos2d" option): patch (row, col) starts with Fourier features of its row and
  column, so object positions are readable from the first step. Still the learned
  nn.Embedding of the real architecture; only its starting value changes."""
  emb = model.model.vision_tower.vision_model.embeddings.position_embedding.weight
  grid = math.isqrt(emb.shape[0])  # IMAGE_SIZE // PATCH_SIZE for the shipped config
  dim = emb.shape[1]
  q = dim // 4
  omega = 1.0 / (10000.0 ** (torch.arange(q, dtype=torch.float64) / q))
  ys, xs = torch.meshgrid(torch.arange(grid, dtype=torch.float64),
                          torch.arange(grid, dtype=torch.float64), indexing="ij")
  ay, ax = ys.reshape(-1, 1) * omega, xs.reshape(-1, 1) * omega
  feats = torch.cat([ay.sin(), ay.cos(), ax.sin(), ax.cos()], dim=1)
  with torch.no_grad():
    emb[:, :feats.shape[1]] = (gain * feats).to(emb.dtype)


def init_projector(model) -> None:
  """LeCun-normal projector (std 1/sqrt(vision hidden)) instead of the 0.02 default:
  with the default, the image features were ~15x weaker than the text embeddings and
  a first run collapsed the vision tower to a constant output (the decoder learned
  the text prior only: loc loss stayed at ln 1024)."""
  w = model.model.multi_modal_projector.linear.weight
  with torch.no_grad():
    w.normal_(0.0, w.shape[1] ** -0.5)


# Curriculum (see MODEL_CARD.md): (first step, max objects per scene, task weights
# over shapes.TASK_KINDS = caption, detect, count, color). First single-object scenes
# (colour questions, captions and single-box detection: answers the text prior cannot
# give, so the decoder has to read the image before it settles on the prior); then
# up to 2 objects; then the full world, detection weighted most (the task with the
# most tokens to learn).
CURRICULUM = (
    (0, 1, (0.3, 0.4, 0.0, 0.3)),
    (1500, 2, (0.25, 0.45, 0.1, 0.2)),
    (3500, 3, (0.25, 0.5, 0.1, 0.15)),
)
# Seeds skipped by the curriculum's object-count filter are replaced by
# seed + k * SEED_STRIDE (k = 1, 2, ...), still deterministic and disjoint from the
# held-out range.
SEED_STRIDE = 10_000_019


def curriculum_at(step: int, curriculum=CURRICULUM) -> tuple:
  stage = curriculum[0]
  for s in curriculum:
    if step >= s[0]:
      stage = s
  return stage[1], stage[2], tuple(stage[3]) if len(stage) > 3 else shapes.RADIUS


def make_batch(processor, step: int, batch: int, curriculum=CURRICULUM,
               absent: float = 0.0, positions=None, seg_codes=None):
  """Global batch `step` (examples step * batch + j), or only its `positions` (a data
  parallel process's part, parallel.part). seg_codes: the mask VQ-VAE's encoder
  (vqvae.MaskCodec), needed when the curriculum weights "segment" (a fifth weight)."""
  max_objects, weights, radius = curriculum_at(step, curriculum)
  images, prefixes, suffixes = [], [], []
  for j in (range(batch) if positions is None else positions):
    seed = shapes.TRAIN_SEED_BASE + step * batch + j
    img, scene = shapes.make_scene(seed, radius)
    while len(scene.objects) > max_objects:
      seed += SEED_STRIDE
      img, scene = shapes.make_scene(seed, radius)
    task = shapes.make_task(scene, random.Random(seed ^ 0x5EED), weights=weights,
                            absent=absent, seg_codes=seg_codes)
    images.append(img)
    prefixes.append("<image>" + task["prefix"])
    suffixes.append(task["suffix"])
  return processor(text=prefixes, images=images, suffix=suffixes, padding="longest",
                   return_tensors="pt")


class BatchStream(torch.utils.data.IterableDataset):
  """The training batches of steps [first, last), in step order. Under a DataLoader
  with W workers, worker w builds steps first + w, first + w + W, ... and the loader
  hands them out round-robin, so the order — and, batches being pure functions of
  their step, the data — do not depend on W; W > 0 only moves image drawing and
  PaliGemmaProcessor off the training process (what feeds a GPU)."""

  def __init__(self, tok_dir: str, first: int, last: int, args, positions=None):
    super().__init__()
    self.tok_dir, self.first, self.last, self.args = tok_dir, first, last, args
    self.positions = positions  # this process's part of each global batch

  def __iter__(self):
    info = torch.utils.data.get_worker_info()
    wid, count = (info.id, info.num_workers) if info else (0, 1)
    processor = build_processor(self.tok_dir)
    processor.tokenizer.padding_side = "right"
    curriculum = json.loads(self.args.curriculum) if self.args.curriculum else CURRICULUM
    codec = seg_codec(self.args)
    for step in range(self.first + wid, self.last, count):
      yield dict(make_batch(processor, self.args.step_offset + step, self.args.batch,
                            curriculum, self.args.absent, self.positions, codec))


def seg_codec(args):
  """The mask tokenizer of --seg-vae (None without one: no segment tasks)."""
  if not args.seg_vae:
    return None
  from tools.demo_model import vqvae
  return vqvae.MaskCodec(args.seg_vae)


def batch_loader(tok_dir: str, first: int, args, positions=None):
  return torch.utils.data.DataLoader(
      BatchStream(tok_dir, first, args.steps, args, positions), batch_size=None,
      num_workers=args.workers, prefetch_factor=4 if args.workers else None,
      worker_init_fn=_one_thread)


def _one_thread(_worker_id: int) -> None:
  torch.set_num_threads(1)


def loc_sigma_at(step: int, total: int, args) -> float:
  """Width (in loc bins) of the soft <loc> targets: geometric from --loc-sigma-start
  to --loc-sigma-end over the first --loc-anneal fraction of training, then constant."""
  t = min(1.0, step / max(1.0, args.loc_anneal * total))
  return args.loc_sigma_start * (args.loc_sigma_end / args.loc_sigma_start) ** t


def suffix_loss(model, batch, loc_first: int, sigma: float) -> tuple:
  """Next-token cross-entropy on the suffix only (the model's own loss with labels
  -100 on the prefix; the tied output layer runs only on the positions that predict
  a suffix token, which is most of the saving on CPU).

  <loc> targets are label-smoothed over neighbouring bins: the target distribution
  is a discretised Gaussian of width `sigma` bins around the true bin (sigma annealed
  down during training, see loc_sigma_at). A coordinate is an ordinal value: with
  one-hot targets the loss only rewards the exact bin of 1024 (~9 bins per input
  pixel), so a model that is 2 px off learns as little as one that is 50 px off and
  the loc loss sat at ln 1024 for thousands of steps. The soft target rewards being
  close first and sharpens as training goes on; greedy decoding (argmax) is unchanged.

  Returns (loss, one-hot CE of <loc> targets, CE of the other targets); the last two
  are for the log only (comparable across sigma)."""
  hidden = model.model(**batch).last_hidden_state  # [B, T, H]
  labels = batch["labels"][:, 1:]
  keep = labels != -100
  target = labels[keep]
  logp = torch.log_softmax(model.lm_head(hidden[:, :-1][keep]).float(), dim=-1)
  is_loc = (target >= loc_first) & (target < loc_first + 1024)
  hard = -logp.gather(1, target[:, None])[:, 0]
  per_token = hard.clone()
  if is_loc.any():
    bins = torch.arange(1024, dtype=torch.float32, device=logp.device)
    centre = (target[is_loc] - loc_first).float()
    q = torch.exp(-0.5 * ((bins[None, :] - centre[:, None]) / sigma) ** 2)
    q = q / q.sum(dim=1, keepdim=True)
    per_token[is_loc] = -(q * logp[is_loc, loc_first:loc_first + 1024]).sum(dim=1)
  with torch.no_grad():
    loc = hard[is_loc].mean().item() if is_loc.any() else float("nan")
    word = hard[~is_loc].mean().item() if (~is_loc).any() else float("nan")
  return per_token.mean(), loc, word


def heldout_probe_batch(processor, count: int = 96, seg_codes=None, seg_count: int = 24):
  """The first `count` held-out examples (kinds cycle caption, detect, count, color),
  and with seg_codes the first `seg_count` held-out segment examples, as one
  teacher-forcing batch for probe_metrics."""
  exs = shapes.heldout_examples(count)
  if seg_codes is not None:
    exs += shapes.heldout_segment_examples(seg_codes, seg_count)
  images = [shapes.make_scene(ex["seed"])[0] for ex in exs]
  batch = processor(text=["<image>" + ex["prefix"] for ex in exs], images=images,
                    suffix=[ex["suffix"] for ex in exs], padding="longest",
                    return_tensors="pt")
  return batch, [ex["kind"] for ex in exs]


@torch.no_grad()
def probe_metrics(model, probe, loc_first: int) -> str:
  """Teacher-forced held-out metrics for the log (cheap, no generation): mean
  |argmax - target| in bins over the <loc> targets, and next-token accuracy on
  caption and VQA answers. They track, not replace, evaluate.py's greedy figures."""
  batch, kinds = probe
  was_training = model.training
  model.eval()
  hidden = model.model(**batch).last_hidden_state[:, :-1]
  labels = batch["labels"][:, 1:]
  logits = model.lm_head(hidden).float()
  model.train(was_training)
  keep = labels != -100
  is_loc = keep & (labels >= loc_first) & (labels < loc_first + 1024)
  loc_pred = logits[..., loc_first:loc_first + 1024].argmax(-1)
  loc_err = (loc_pred - (labels - loc_first)).abs()[is_loc].float().mean().item()
  hit = logits.argmax(-1) == labels
  out = [f"tf_loc_err {loc_err:.1f}"]
  for name, ks in (("caption", ("caption",)), ("vqa", ("count", "color")),
                   ("seg", ("segment",))):
    if not any(k in ks for k in kinds):
      continue
    rows = torch.tensor([k in ks for k in kinds], device=keep.device)[:, None] & keep
    out.append(f"tf_{name}_acc {hit[rows].float().mean().item():.3f}")
  return " ".join(out)


def _sdpa_f32(q, k, v, *args, **kwargs):
  """torch's SDPA in f32 with autocast off: on CPU its bf16 backward was 6x slower than
  the f32 one at these shapes (measured: the whole step lost the bf16 matmuls' gain)."""
  with torch.autocast("cpu", enabled=False):
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.dtype.is_floating_point:
      kwargs["attn_mask"] = mask.float()
    return _SDPA(q.float(), k.float(), v.float(), *args, **kwargs)


_SDPA = torch.nn.functional.scaled_dot_product_attention


class mixed_precision:  # noqa: N801 (a context manager used like a function)
  """--bf16: the step's forward under torch.autocast(bfloat16) — the linear layers' matmuls
  in bf16 (AMX / AVX512_BF16 on CPUs that have them), weights, optimizer and attention in
  f32 (_sdpa_f32). Measured on the 2-vCPU Xeon (AMX): 0.28 s against 0.36 s per
  16-example step. Off: a no-op."""

  def __init__(self, enabled: bool, device: str):
    self.enabled, self.device = enabled, device

  def __enter__(self):
    if self.enabled:
      self.autocast = torch.autocast(self.device, dtype=torch.bfloat16)
      self.autocast.__enter__()
      torch.nn.functional.scaled_dot_product_attention = _sdpa_f32
    return self

  def __exit__(self, *exc):
    if self.enabled:
      torch.nn.functional.scaled_dot_product_attention = _SDPA
      self.autocast.__exit__(*exc)
    return False


def lr_at(step: int, total: int, warmup: int, peak: float) -> float:
  if step < warmup:
    return peak * (step + 1) / warmup
  t = (step - warmup) / max(1, total - warmup)
  return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * t)))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--workdir", required=True, help="tokenizer, checkpoints, log")
  ap.add_argument("--out", help="final HF folder (save_pretrained)")
  ap.add_argument("--steps", type=int, default=8500)
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--lr", type=float, default=1e-3)
  ap.add_argument("--warmup", type=int, default=100)
  ap.add_argument("--weight-decay", type=float, default=0.01)
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--procs", type=int, default=1,
                  help="data-parallel CPU processes, one thread each (parallel.py); "
                  "--batch is the global batch")
  ap.add_argument("--device", default="cpu", help="torch device: cpu, cuda, ...")
  ap.add_argument("--workers", type=int, default=0,
                  help="data-generation processes (0: in the training process)")
  ap.add_argument("--ckpt-every", type=int, default=100)
  ap.add_argument("--probe-every", type=int, default=250,
                  help="log teacher-forced held-out metrics every N steps")
  ap.add_argument("--init-from", help="stage 2: start from this checkpoint.pt's weights "
                  "(fresh optimizer and schedule)")
  ap.add_argument("--init-vision", help="start the SigLIP tower from weights saved by "
                  "shape_probe.py --save (a vision pre-training stage)")
  ap.add_argument("--step-offset", type=int, default=0,
                  help="stage 2: data seeds and curriculum continue from this step")
  ap.add_argument("--loc-init", default="fourier", choices=("fourier", "quad", "thermo"))
  ap.add_argument("--loc-fmax", type=float, default=32.0)
  ap.add_argument("--vision-pos-gain", type=float, default=1.0,
                  help="scale of the sin-cos position embedding init (init_vision_positions)")
  ap.add_argument("--qk-init-gain", type=float, default=1.0,
                  help="scale of the decoder q/k projections at init (init_decoder_attention)")
  ap.add_argument("--absent", type=float, default=0.0,
                  help="share of detect prompts that also name an absent shape")
  ap.add_argument("--loc-sigma-start", type=float, default=64.0,
                  help="soft <loc> target width in bins at step 0 (see suffix_loss)")
  ap.add_argument("--loc-sigma-end", type=float, default=4.0)
  ap.add_argument("--loc-anneal", type=float, default=0.7,
                  help="fraction of the steps over which sigma shrinks")
  ap.add_argument("--curriculum", help="JSON list replacing CURRICULUM (experiments); "
                  "five task weights add segment")
  ap.add_argument("--seg-vae", help="mask VQ-VAE NPZ (vqvae.py) that tokenizes the "
                  "masks of segment tasks")
  ap.add_argument("--bf16", action="store_true",
                  help="bf16 autocast for the matmuls of the forward (mixed_precision)")
  ap.add_argument("--max-minutes", type=float, default=0, help="smoke runs: stop early")
  ap.add_argument("--stop-step", type=int, default=0,
                  help="stop before this step (the schedule still spans --steps): "
                  "repeats a run that --max-minutes stopped, independent of speed")
  ap.add_argument("--vision-hidden", type=int, default=128)
  ap.add_argument("--vision-mlp", type=int, default=512)
  ap.add_argument("--vision-layers", type=int, default=4)
  ap.add_argument("--vision-heads", type=int, default=4)
  ap.add_argument("--text-hidden", type=int, default=192)
  ap.add_argument("--text-mlp", type=int, default=512)
  ap.add_argument("--text-layers", type=int, default=4)
  ap.add_argument("--text-heads", type=int, default=4)
  ap.add_argument("--text-kv-heads", type=int, default=4)
  args = ap.parse_args()
  parallel.launch(run, args, args.procs)


def run(args, rank: int, procs: int) -> None:
  """Training on process `rank` of `procs` (rank 0 logs, probes and saves)."""
  from transformers import PaliGemmaForConditionalGeneration

  torch.set_num_threads(args.threads if procs == 1 else 1)
  torch.manual_seed(0)
  random.seed(0)
  os.makedirs(args.workdir, exist_ok=True)
  tok_dir = os.path.join(args.workdir, "tokenizer")
  if rank == 0:
    shapes_tokenizer.build(tok_dir)
  parallel.barrier(procs)
  from transformers import AutoTokenizer
  tok = AutoTokenizer.from_pretrained(tok_dir)
  processor = build_processor(tok_dir)
  processor.tokenizer.padding_side = "right"
  image_token_index = tok.convert_tokens_to_ids(shapes_tokenizer.IMAGE_TOKEN)
  config = build_config(len(tok), image_token_index, args)
  model = PaliGemmaForConditionalGeneration(config)
  init_loc_embeddings(model, tok, args.loc_init, args.loc_fmax)
  init_decoder_attention(model, args.qk_init_gain)
  init_projector(model)
  init_vision_positions(model, args.vision_pos_gain)
  if args.init_vision:
    model.model.vision_tower.load_state_dict(
        torch.load(args.init_vision, weights_only=False)["vision_tower"])
  parallel.sync_parameters(model, procs)
  device = torch.device(args.device)
  model.to(device)
  nparams = sum(p.numel() for p in model.parameters())
  # Weight decay on weight matrices only (not norms, biases, embeddings).
  is_decay = lambda n, p: p.dim() >= 2 and "embed" not in n  # noqa: E731
  decay = [p for n, p in model.named_parameters() if is_decay(n, p)]
  no_decay = [p for n, p in model.named_parameters() if not is_decay(n, p)]
  opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=args.lr, betas=(0.9, 0.98), eps=1e-8, fused=True)
  loc_first = tok.convert_tokens_to_ids(shapes_tokenizer.LOC_TOKENS[0])
  if args.init_from:
    model.load_state_dict(torch.load(args.init_from, map_location=device,
                                     weights_only=False)["model"])
  start = 0
  ckpt_path = os.path.join(args.workdir, "checkpoint.pt")
  if os.path.exists(ckpt_path):
    ck = torch.load(ckpt_path, map_location=device, weights_only=False)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    start = ck["step"]
    print(f"resumed at step {start}", flush=True)
  log = (open(os.path.join(args.workdir, "train_log.txt"), "a", encoding="utf-8")
         if rank == 0 else open(os.devnull, "w", encoding="utf-8"))
  print(f"params {nparams} ({nparams * 4 / 2**20:.1f} MiB f32) args {vars(args)}",
        file=log, flush=True)
  probe_batch, probe_kinds = heldout_probe_batch(processor, seg_codes=seg_codec(args))
  probe = ({k: v.to(device) for k, v in probe_batch.items()}, probe_kinds)
  batches = iter(batch_loader(tok_dir, start, args, parallel.part(args.batch, rank, procs)))
  model.train()
  t0 = time.time()
  ema = None
  for step in range(start, args.stop_step or args.steps):
    for g in opt.param_groups:
      g["lr"] = lr_at(step, args.steps, args.warmup, args.lr)
    batch = {k: v.to(device, non_blocking=True) for k, v in next(batches).items()}
    sigma = loc_sigma_at(step, args.steps, args)
    with mixed_precision(args.bf16, device.type):
      loss_t, loc_loss, word_loss = suffix_loss(model, batch, loc_first, sigma)
    opt.zero_grad(set_to_none=True)
    loss_t.backward()
    parallel.average_gradients(model, procs)
    if step % 500 == 0:
      parallel.sync_parameters(model, procs)  # guard against any float drift
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    loss = loss_t.item()
    ema = loss if ema is None else 0.95 * ema + 0.05 * loss
    if step % 10 == 0 or step == args.steps - 1:
      el = time.time() - t0
      print(f"step {step} loss {loss:.4f} ema {ema:.4f} loc {loc_loss:.3f} "
            f"word {word_loss:.3f} sigma {sigma:.1f} lr {opt.param_groups[0]['lr']:.2e}"
            f" elapsed {el:.0f}s ({el / (step - start + 1):.2f}s/step)", file=log, flush=True)
    if rank == 0 and (step % args.probe_every == 0 or step == args.steps - 1):
      print(f"probe {step} {probe_metrics(model, probe, loc_first)}", file=log, flush=True)
    if rank == 0 and ((step + 1) % args.ckpt_every == 0 or step == args.steps - 1):
      torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1},
                 ckpt_path + ".tmp")
      os.replace(ckpt_path + ".tmp", ckpt_path)
    if parallel.any_true(args.max_minutes and time.time() - t0 > args.max_minutes * 60,
                         procs):
      print(f"stopping after {args.max_minutes} minutes", file=log, flush=True)
      break
  if args.out and rank == 0:
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    processor.save_pretrained(args.out)
    with open(os.path.join(args.out, "training_args.json"), "w") as f:
      json.dump(vars(args), f, indent=2, sort_keys=True)


if __name__ == "__main__":
  main()

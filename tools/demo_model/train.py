"""Trains the tiny shapes-world PaliGemma on CPU with transformers.

  .venv/bin/python -m tools.demo_model.train --workdir build-tasks/train \
      --out build-tasks/train/final --steps 4800

Real architecture (PaliGemmaForConditionalGeneration = SigLIP + projector + Gemma)
at a tiny config; inputs come from PaliGemmaProcessor (prefix "<image>"*36 + "<bos>"
+ prompt + "\\n", suffix + "<eos>", labels = -100 on the prefix via token_type_ids).
Data is generated on the fly from deterministic seeds (tools/demo_model/shapes.py),
following a fixed curriculum (CURRICULUM below: single-object colour/caption first,
so the vision path is learned before the decoder settles on the text prior);
all RNGs are seeded, torch runs with a fixed thread count, so a run is repeatable on
the same machine.

Initialisation detail: the 1024 <loc> embedding rows (tied with the output layer)
start as Fourier features of the normalised coordinate, so neighbouring locations
start with similar embeddings/logits. This only speeds up learning of coordinates;
the architecture is unchanged.
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

from tools.demo_model import shapes, tokenizer as shapes_tokenizer

IMAGE_SIZE = 96
PATCH_SIZE = 16
NUM_IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2  # 36


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
          num_attention_heads=args.text_heads, num_key_value_heads=1,
          head_dim=args.text_hidden // args.text_heads, vocab_size=rows,
          max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=10000.0,
          hidden_activation="gelu_pytorch_tanh", pad_token_id=0, bos_token_id=2,
          eos_token_id=1, tie_word_embeddings=True),
      image_token_index=image_token_index, vocab_size=rows,
      projection_dim=args.text_hidden, hidden_size=args.text_hidden,
      pad_token_id=0, bos_token_id=2, eos_token_id=1)


def build_processor(tok_dir: str):
  from transformers import (AutoTokenizer, PaliGemmaProcessor,
                            SiglipImageProcessor)
  image_processor = SiglipImageProcessor(
      do_resize=True, size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, resample=3,
      do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
      image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], do_convert_rgb=False)
  image_processor.image_seq_length = NUM_IMAGE_TOKENS
  tok = AutoTokenizer.from_pretrained(tok_dir)
  return PaliGemmaProcessor(image_processor=image_processor, tokenizer=tok)


def init_loc_embeddings(model, tok) -> None:
  """Fourier-feature init of the <locNNNN> rows (see module doc)."""
  emb = model.get_input_embeddings().weight
  hidden = emb.shape[1]
  ids = tok.convert_tokens_to_ids(shapes_tokenizer.LOC_TOKENS)
  u = torch.arange(1024, dtype=torch.float64) / 1023.0
  nfreq = hidden // 2
  freqs = torch.logspace(math.log10(0.5), math.log10(96.0), nfreq, dtype=torch.float64)
  ang = 2 * math.pi * u[:, None] * freqs[None, :]
  feats = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)[:, :hidden]
  feats = feats / feats.norm(dim=1, keepdim=True) * emb[4:].norm(dim=1).mean().double()
  with torch.no_grad():
    emb[ids] = feats.to(emb.dtype)


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
# with colour questions and captions only (answers the text prior cannot give, so the
# decoder has to read the image before it settles on the prior); then up to 2
# objects with all tasks; then the full world with more detection (the task with the
# most tokens to learn).
CURRICULUM = (
    (0, 1, (0.3, 0.0, 0.0, 0.7)),
    (300, 2, (0.3, 0.3, 0.15, 0.25)),
    (800, 3, (0.25, 0.5, 0.1, 0.15)),
)
# Seeds skipped by the curriculum's object-count filter are replaced by
# seed + k * SEED_STRIDE (k = 1, 2, ...), still deterministic and disjoint from the
# held-out range.
SEED_STRIDE = 10_000_019


def curriculum_at(step: int) -> tuple:
  stage = CURRICULUM[0]
  for s in CURRICULUM:
    if step >= s[0]:
      stage = s
  return stage[1], stage[2]


def make_batch(processor, step: int, batch: int):
  max_objects, weights = curriculum_at(step)
  images, prefixes, suffixes = [], [], []
  for j in range(batch):
    seed = shapes.TRAIN_SEED_BASE + step * batch + j
    img, scene = shapes.make_scene(seed)
    while len(scene.objects) > max_objects:
      seed += SEED_STRIDE
      img, scene = shapes.make_scene(seed)
    task = shapes.make_task(scene, random.Random(seed ^ 0x5EED), weights=weights)
    images.append(img)
    prefixes.append("<image>" + task["prefix"])
    suffixes.append(task["suffix"])
  return processor(text=prefixes, images=images, suffix=suffixes, padding="longest",
                   return_tensors="pt")


def suffix_loss(model, batch) -> torch.Tensor:
  """Next-token cross-entropy on the suffix only — the same value as the model's own
  loss (labels -100 on the prefix), but the tied output layer runs only on the
  positions that predict a suffix token, which is most of the saving on CPU."""
  hidden = model.model(**batch).last_hidden_state  # [B, T, H]
  labels = batch["labels"][:, 1:]
  keep = labels != -100
  logits = model.lm_head(hidden[:, :-1][keep]).float()
  return torch.nn.functional.cross_entropy(logits, labels[keep])


def lr_at(step: int, total: int, warmup: int, peak: float) -> float:
  if step < warmup:
    return peak * (step + 1) / warmup
  t = (step - warmup) / max(1, total - warmup)
  return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * t)))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--workdir", required=True, help="tokenizer, checkpoints, log")
  ap.add_argument("--out", help="final HF folder (save_pretrained)")
  ap.add_argument("--steps", type=int, default=4800)
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--lr", type=float, default=1e-3)
  ap.add_argument("--warmup", type=int, default=100)
  ap.add_argument("--weight-decay", type=float, default=0.01)
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--ckpt-every", type=int, default=100)
  ap.add_argument("--init-from", help="stage 2: start from this checkpoint.pt's weights "
                  "(fresh optimizer and schedule)")
  ap.add_argument("--step-offset", type=int, default=0,
                  help="stage 2: data seeds and curriculum continue from this step")
  ap.add_argument("--max-minutes", type=float, default=0, help="smoke runs: stop early")
  ap.add_argument("--vision-hidden", type=int, default=128)
  ap.add_argument("--vision-mlp", type=int, default=512)
  ap.add_argument("--vision-layers", type=int, default=4)
  ap.add_argument("--vision-heads", type=int, default=4)
  ap.add_argument("--text-hidden", type=int, default=192)
  ap.add_argument("--text-mlp", type=int, default=512)
  ap.add_argument("--text-layers", type=int, default=4)
  ap.add_argument("--text-heads", type=int, default=4)
  args = ap.parse_args()

  from transformers import PaliGemmaForConditionalGeneration

  torch.set_num_threads(args.threads)
  torch.manual_seed(0)
  random.seed(0)
  os.makedirs(args.workdir, exist_ok=True)
  tok_dir = os.path.join(args.workdir, "tokenizer")
  tok = shapes_tokenizer.build(tok_dir)
  processor = build_processor(tok_dir)
  processor.tokenizer.padding_side = "right"
  image_token_index = tok.convert_tokens_to_ids(shapes_tokenizer.IMAGE_TOKEN)
  config = build_config(len(tok), image_token_index, args)
  model = PaliGemmaForConditionalGeneration(config)
  init_loc_embeddings(model, tok)
  init_projector(model)
  nparams = sum(p.numel() for p in model.parameters())
  # Weight decay on weight matrices only (not norms, biases, embeddings).
  is_decay = lambda n, p: p.dim() >= 2 and "embed" not in n  # noqa: E731
  decay = [p for n, p in model.named_parameters() if is_decay(n, p)]
  no_decay = [p for n, p in model.named_parameters() if not is_decay(n, p)]
  opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
  if args.init_from:
    model.load_state_dict(torch.load(args.init_from, weights_only=False)["model"])
  start = 0
  ckpt_path = os.path.join(args.workdir, "checkpoint.pt")
  if os.path.exists(ckpt_path):
    ck = torch.load(ckpt_path, weights_only=False)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    start = ck["step"]
    print(f"resumed at step {start}", flush=True)
  log = open(os.path.join(args.workdir, "train_log.txt"), "a", encoding="utf-8")
  print(f"params {nparams} ({nparams * 4 / 2**20:.1f} MiB f32) args {vars(args)}",
        file=log, flush=True)
  model.train()
  t0 = time.time()
  ema = None
  for step in range(start, args.steps):
    for g in opt.param_groups:
      g["lr"] = lr_at(step, args.steps, args.warmup, args.lr)
    batch = make_batch(processor, args.step_offset + step, args.batch)
    loss_t = suffix_loss(model, batch)
    opt.zero_grad(set_to_none=True)
    loss_t.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    loss = loss_t.item()
    ema = loss if ema is None else 0.95 * ema + 0.05 * loss
    if step % 10 == 0 or step == args.steps - 1:
      el = time.time() - t0
      print(f"step {step} loss {loss:.4f} ema {ema:.4f} lr {opt.param_groups[0]['lr']:.2e}"
            f" elapsed {el:.0f}s ({el / (step - start + 1):.2f}s/step)", file=log, flush=True)
    if (step + 1) % args.ckpt_every == 0 or step == args.steps - 1:
      torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1},
                 ckpt_path + ".tmp")
      os.replace(ckpt_path + ".tmp", ckpt_path)
    if args.max_minutes and time.time() - t0 > args.max_minutes * 60:
      print(f"stopping after {args.max_minutes} minutes", file=log, flush=True)
      break
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    processor.save_pretrained(args.out)
    with open(os.path.join(args.out, "training_args.json"), "w") as f:
      json.dump(vars(args), f, indent=2, sort_keys=True)


if __name__ == "__main__":
  main()

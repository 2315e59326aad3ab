"""Data parallelism over CPU processes for the demo model's training scripts.

On the 2-core machines we train on, one torch process on 2 threads steps no faster
than one on 1 thread (the tiny matrices do not split well), while two 1-thread
processes side by side each keep the 1-thread speed (measured: 0.53-0.54 s/step
each, MODEL_CARD.md). So `--procs 2` runs two processes on one thread each: every
global batch is split between them by position, each computes the gradient of its
part, and the gradients are averaged (one all-reduce of a flat buffer, gloo) before
the identical optimizer step on every process. The weights stay the same on all
processes; only rank 0 logs, evaluates and saves.
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _entry(rank: int, procs: int, port: int, fn, args) -> None:
  torch.set_num_threads(1)
  dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                          world_size=procs)
  try:
    fn(args, rank, procs)
  finally:
    dist.destroy_process_group()


def launch(fn, args, procs: int) -> None:
  """Runs fn(args, rank, procs): in this process when procs == 1, else in `procs`
  spawned processes (one torch thread each)."""
  if procs <= 1:
    fn(args, 0, 1)
    return
  os.environ.setdefault("OMP_NUM_THREADS", "1")
  torch.multiprocessing.spawn(_entry, args=(procs, _free_port(), fn, args),
                              nprocs=procs, join=True)


def part(batch: int, rank: int, procs: int) -> range:
  """The positions of a global batch that process `rank` computes."""
  if batch % procs:
    raise ValueError(f"batch {batch} is not a multiple of --procs {procs}")
  size = batch // procs
  return range(rank * size, (rank + 1) * size)


def barrier(procs: int) -> None:
  if procs > 1:
    dist.barrier()


def any_true(flag: bool, procs: int) -> bool:
  """True on every process when it is true on any (stop decisions stay in step)."""
  if procs <= 1:
    return bool(flag)
  t = torch.tensor([1 if flag else 0])
  dist.all_reduce(t, op=dist.ReduceOp.MAX)
  return bool(t.item())


def sync_parameters(model: torch.nn.Module, procs: int) -> None:
  """Every process starts from rank 0's weights."""
  if procs > 1:
    for p in model.parameters():
      dist.broadcast(p.data, 0)


def average_gradients(model: torch.nn.Module, procs: int) -> None:
  """Replaces every gradient by its mean over the processes."""
  if procs <= 1:
    return
  for p in model.parameters():
    if p.grad is None:  # the flat buffers must line up on every process
      p.grad = torch.zeros_like(p)
  grads = [p.grad for p in model.parameters()]
  flat = torch.cat([g.reshape(-1) for g in grads])
  dist.all_reduce(flat)
  flat /= procs
  offset = 0
  for g in grads:
    g.copy_(flat[offset:offset + g.numel()].view_as(g))
    offset += g.numel()

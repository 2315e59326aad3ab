"""Batch inference with ocular on Ray Data: caption / detect a folder of images or a list.

    python examples/ray_batch.py -m models/shapes-paligemma --images photos/ -p "caption en" \
        --out captions.parquet --actors 2
    python examples/ray_batch.py -m DIR --list heldout.jsonl --images-dir imgs/ --out out.parquet

Each Ray actor loads the model once (ocular.load) with as many engine threads as the CPUs Ray
gave it (--cpus-per-actor), and answers its batches with Model.generate_batch (the engine's
continuous batching). ``map_batches`` spreads the rows over --actors actors; the results
(image, prompt, text, finish_reason, tokens, boxes and labels in image pixels, and when the
row's batch ran: batch_start / batch_end, Unix seconds) are written as one Parquet file. --single-process runs the same code without Ray (the reference the test
compares with). Needs: pip install ocular (this repository) ray[data]==2.60.0 (docs/scale-out.md).

A list (--list) is JSONL or Parquet with an ``image`` column (a path, relative to --images-dir)
and optionally ``prompt`` (or ``prefix``, as the demo model's heldout.jsonl) per row; rows
without one use --prompt. Paths must be readable where the actors run (one machine, or a
shared file system); pass --ship-bytes to read the files on the driver and send their bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")


def read_rows(args) -> list:
    """The work list: [{"image": path, "prompt": str}, ...]."""
    if args.list:
        if args.list.endswith(".parquet"):
            import pyarrow.parquet as pq

            rows = pq.read_table(args.list).to_pylist()
        else:
            with open(args.list) as f:
                rows = [json.loads(line) for line in f if line.strip()]
        base = os.path.abspath(args.images_dir or os.path.dirname(os.path.abspath(args.list)))
        out = []
        for i, r in enumerate(rows):
            if "image" not in r:
                sys.exit(f"ray_batch: {args.list} row {i} has no 'image' column")
            prompt = r.get("prompt") or r.get("prefix") or args.prompt
            out.append({"image": os.path.join(base, r["image"]), "prompt": prompt})
        return out
    names = sorted(n for n in os.listdir(args.images) if n.lower().endswith(IMAGE_SUFFIXES))
    if not names:
        sys.exit(f"ray_batch: no images ({', '.join(IMAGE_SUFFIXES)}) in {args.images}")
    folder = os.path.abspath(args.images)
    return [{"image": os.path.join(folder, n), "prompt": args.prompt} for n in names]


class Captioner:
    """One model per actor; __call__ answers a batch (a dict of columns, Ray's "numpy" format)."""

    def __init__(self, model: str, max_tokens: int, threads: int = 0) -> None:
        import ocular

        if threads <= 0:  # inside Ray: the CPUs this actor was given
            import ray

            threads = max(1, int(ray.get_runtime_context().get_assigned_resources().get("CPU", 1)))
        self.model = ocular.load(model, threads=threads)
        self.max_tokens = max_tokens

    def __call__(self, batch: dict) -> dict:
        images = batch["bytes"] if "bytes" in batch else batch["image"]
        requests = [
            {"prompt": str(p), "images": [i if isinstance(i, bytes) else str(i)],
             "max_tokens": self.max_tokens}
            for i, p in zip(images, batch["prompt"])
        ]
        start = time.time()
        results = self.model.generate_batch(requests, return_exceptions=True)
        end = time.time()
        out = {"image": [str(x) for x in batch["image"]], "prompt": [str(p) for p in batch["prompt"]],
               "text": [], "finish_reason": [], "tokens": [], "boxes": [], "labels": [], "error": [],
               "batch_start": [start] * len(requests), "batch_end": [end] * len(requests)}
        for r in results:
            failed = isinstance(r, Exception)
            out["text"].append("" if failed else r.text)
            out["finish_reason"].append("error" if failed else r.finish_reason)
            out["tokens"].append([] if failed else list(r.tokens))
            out["boxes"].append([] if failed else [d.box.tolist() for d in r.detections])
            out["labels"].append([] if failed else [d.label for d in r.detections])
            out["error"].append(str(r) if failed else "")
        return out


def run_single_process(rows: list, args) -> list:
    """The same Captioner over all rows in this process (no Ray)."""
    c = Captioner(args.model, args.max_tokens, threads=args.cpus_per_actor)
    out = []
    for start in range(0, len(rows), args.batch_size):
        chunk = rows[start : start + args.batch_size]
        cols = c({"image": [r["image"] for r in chunk], "prompt": [r["prompt"] for r in chunk]})
        out.extend(dict(zip(cols, vals)) for vals in zip(*cols.values()))
    return out


def start_ray(address=None, num_cpus=None) -> None:
    """A local Ray cluster (or `address`'s) whose workers can import this file and ocular."""
    import ray

    if ray.is_initialized():
        return
    path = [os.path.dirname(__file__)] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
    env = {"PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in path if p)}
    ray.init(address=address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})


def run_ray(rows: list, args) -> list:
    import ray

    if args.ship_bytes:
        for r in rows:
            with open(r["image"], "rb") as f:
                r["bytes"] = f.read()
    ds = ray.data.from_items(rows)
    ds = ds.map_batches(
        Captioner,
        fn_constructor_kwargs={"model": os.path.abspath(args.model), "max_tokens": args.max_tokens},
        batch_size=args.batch_size,
        concurrency=args.actors,
        num_cpus=args.cpus_per_actor,
        batch_format="numpy",
    )
    return ds.take_all()


def write_parquet(results: list, path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = ["image", "prompt", "text", "finish_reason", "tokens", "boxes", "labels", "error",
            "batch_start", "batch_end"]
    table = pa.table({c: [_plain(r[c]) for r in results] for c in cols})
    pq.write_table(table, path)


def _plain(v):
    """numpy values from Ray's batches → Python lists / scalars for Arrow."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True, help="model directory or GGUF file")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--images", help="a folder of images")
    src.add_argument("--list", help="a JSONL or Parquet list with an 'image' column")
    ap.add_argument("--images-dir", help="where the list's image paths are (default: its folder)")
    ap.add_argument("-p", "--prompt", default="caption en", help="prompt for rows without one")
    ap.add_argument("--out", required=True, help="the Parquet file to write")
    ap.add_argument("--actors", type=int, default=2, help="Ray actors, one model each")
    ap.add_argument("--cpus-per-actor", type=int, default=1, help="CPUs (= engine threads) per actor")
    ap.add_argument("--batch-size", type=int, default=8, help="rows per map_batches call")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--limit", type=int, default=0, help="only the first N rows (0: all)")
    ap.add_argument("--address", default=None, help="a Ray cluster to join (default: a local one)")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray cluster")
    ap.add_argument("--ship-bytes", action="store_true", help="send image bytes, not paths")
    ap.add_argument("--single-process", action="store_true", help="no Ray: the same code here")
    args = ap.parse_args(argv)

    rows = read_rows(args)
    if args.limit:
        rows = rows[: args.limit]
    if not args.single_process:
        start_ray(args.address, args.num_cpus)  # not timed: the cluster is up before the work begins
    start = time.monotonic()
    results = run_single_process(rows, args) if args.single_process else run_ray(rows, args)
    seconds = time.monotonic() - start
    results.sort(key=lambda r: (str(r["image"]), str(r["prompt"])))
    write_parquet(results, args.out)
    errors = sum(1 for r in results if r["error"])
    mode = "1 process" if args.single_process else f"{args.actors} actors x {args.cpus_per_actor} CPU"
    busy = max(r["batch_end"] for r in results) - min(r["batch_start"] for r in results)
    print(f"ray_batch: {len(results)} rows ({errors} errors) in {seconds:.1f} s, "
          f"{len(results) / busy:.2f} rows/s from the first batch's start to the last one's end "
          f"({mode}) -> {args.out}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

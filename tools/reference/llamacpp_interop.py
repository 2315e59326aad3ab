"""llama.cpp runs ocular's pair files, and ocular quantizes as llama-quantize does.

1. Tiny Gemma 3 (testdata/tiny/gemma3-lc): `ocular quantize --mmproj-out` writes the text GGUF +
   mmproj in f32, f16 and Q8_0; the converter's files of the same checkpoint are the committed
   testdata/llamacpp/gemma3-lc-{f32,f16}.gguf (+ mmproj) and, for Q8_0, llama-quantize's Q8_0 of
   the converter's f32 text file (with the converter's f16 mmproj, as ocular's Q8_0 pair has).
   For each type: the tensors compared (name, type, shape, bytes), then llama.cpp on both pairs:
   llama-mtmd-cli (one image, greedy, --temp 0) prints the same text, and llama_logits
   (bench/peers/llama_logits.cc, a text-only prompt, f32 KV cache) gives the same logits.
2. The Gemma 3 of llamacpp_quant_parity.py with a quantizable decoder (256 wide) and Gemma 3
   4B's 34 layers (every 6th global),
   converted to an f16 text file: llama-quantize's Q8_0 / Q4_K_M and `ocular quantize`'s of that
   same f16 file, tensor by tensor (type: the recipe's mix; bytes: the block quantizers), and
   llama_logits on both (the same prompt: top-1 agreement, max |logit difference|).
3. With --fullsize-text F16.gguf [--fullsize-q4 LLAMA_Q4_K_M.gguf]: the type mix of
   llama-quantize's Q4_K_M of a full-size f16 text file next to ocular's Q4_K_M of it.

Prints one JSON line per comparison and writes OUT/interop.json.

Run: .venv/bin/python -m tools.reference.llamacpp_interop --llama-bin BUILD/bin [--out DIR]
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from tools.reference import common
from tools.reference.llamacpp_quant_parity import make_gemma_checkpoint
from tools.reference.make_llamacpp_pair import CHECKPOINT, OUT, converter
from tools.reference.make_llamacpp_qwen_pair import convert

IMAGE = os.path.join("testdata", "golden", "inputs", "photo.png")
MTMD_PROMPT = "caption en"


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.stdout


def tensors(path):
    from gguf import GGUFReader

    return {t.name: t for t in GGUFReader(path).tensors}


def compare_tensors(ours, theirs):
    """Per tensor: same type, shape and bytes; the types of each file counted."""
    a, b = tensors(ours), tensors(theirs)
    out = {"tensors": len(b), "missing": sorted(set(b) - set(a)), "extra": sorted(set(a) - set(b)),
           "type_differs": [], "bytes_differ": [], "max_dequant_diff": 0.0,
           "types_ours": dict(collections.Counter(t.tensor_type.name for t in a.values())),
           "types_theirs": dict(collections.Counter(t.tensor_type.name for t in b.values()))}
    for name, t in b.items():
        o = a.get(name)
        if o is None:
            continue
        if o.tensor_type != t.tensor_type or list(o.shape) != list(t.shape):
            out["type_differs"].append(f"{name}: ours {o.tensor_type.name} {list(o.shape)}, "
                                       f"llama.cpp {t.tensor_type.name} {list(t.shape)}")
        elif not np.array_equal(np.asarray(o.data), np.asarray(t.data)):
            from gguf import quants

            da = quants.dequantize(o.data, o.tensor_type).astype(np.float64)
            db = quants.dequantize(t.data, t.tensor_type).astype(np.float64)
            out["bytes_differ"].append(name)
            out["max_dequant_diff"] = max(out["max_dequant_diff"], float(np.abs(da - db).max()))
    return out


def mtmd(bin_dir, text, mmproj, tokens, tries=3):
    """llama-mtmd-cli's greedy answer (stdout) for one image: the longest of `tries` runs, as
    its log thread may exit before it has written the last pieces (the runs seen differ only so:
    each a prefix of the longest)."""
    outs = [run([os.path.join(bin_dir, "llama-mtmd-cli"), "-m", text, "--mmproj", mmproj,
                 "--image", IMAGE, "-p", MTMD_PROMPT, "-n", str(tokens), "--temp", "0",
                 "-t", "2", "--seed", "1"]).strip() for _ in range(tries)]
    longest = max(outs, key=len)
    assert all(longest.startswith(o) for o in outs), outs
    return longest


def llama_logits(bin_dir, text, ids, out, gen):
    from safetensors.numpy import load_file

    run([os.path.join(bin_dir, "llama_logits"), text, out, "--ids", ",".join(map(str, ids)),
         "--gen", str(gen), "--ctk", "f32", "--ctv", "f32", "--fa", "off", "-t", "2"])
    t = load_file(out)
    return np.concatenate([t["logits"], t["decode_logits"]])


def logits_row(bin_dir, ours, theirs, ids, work, tag, gen=8):
    la = llama_logits(bin_dir, ours, ids, os.path.join(work, f"{tag}-ours.safetensors"), gen)
    lb = llama_logits(bin_dir, theirs, ids, os.path.join(work, f"{tag}-theirs.safetensors"), gen)
    return {"positions": int(la.shape[0]),
            "top1_agree": int((la.argmax(-1) == lb.argmax(-1)).sum()),
            "max_abs_logit_diff": float(np.abs(la - lb).max())}


def ocular_quantize(ocular, args):
    run([ocular, "quantize", *args])


def tiny_pairs(a, work, summary):
    theirs = {"f32": (os.path.join(OUT, "gemma3-lc-f32.gguf"),
                      os.path.join(OUT, "mmproj-gemma3-lc-f32.gguf")),
              "f16": (os.path.join(OUT, "gemma3-lc-f16.gguf"),
                      os.path.join(OUT, "mmproj-gemma3-lc-f16.gguf"))}
    q8 = os.path.join(work, "gemma3-lc-Q8_0.gguf")
    run([os.path.join(a.llama_bin, "llama-quantize"), theirs["f32"][0], q8, "Q8_0"])
    theirs["q8_0"] = (q8, theirs["f16"][1])
    ids = tokenize(a.llama_bin, theirs["f32"][0], "answer en what color is the square?")
    for qtype, (text, mmproj) in theirs.items():
        o_text = os.path.join(work, f"ocular-gemma3-lc-{qtype}.gguf")
        o_mmproj = os.path.join(work, f"ocular-mmproj-gemma3-lc-{qtype}.gguf")
        ocular_quantize(a.ocular, ["-m", CHECKPOINT, "-o", o_text, "--mmproj-out", o_mmproj,
                                   "--type", qtype])
        row = {"check": "tiny gemma3-lc pair: ocular's vs the converter's", "type": qtype,
               "text": compare_tensors(o_text, text), "mmproj": compare_tensors(o_mmproj, mmproj)}
        ans_o, ans_t = mtmd(a.llama_bin, o_text, o_mmproj, 8), mtmd(a.llama_bin, text, mmproj, 8)
        row["mtmd_answer_ours"], row["mtmd_answer_theirs"] = ans_o, ans_t
        row["mtmd_same"] = ans_o == ans_t
        row["llama_logits"] = logits_row(a.llama_bin, o_text, text, ids, work, f"tiny-{qtype}")
        summary.append(row)
        print(json.dumps(row), flush=True)


def tokenize(bin_dir, text, prompt):
    out = run([os.path.join(bin_dir, "llama-tokenize"), "-m", text, "-p", prompt, "--ids",
               "--log-disable"])
    return json.loads(out.strip().splitlines()[-1])


def recipe(a, work, summary):
    hf = os.path.join(work, "gemma3-q")
    layers = 34  # Gemma 3 4B's: llama.cpp's Q4_K_M picks Q6_K layers by index among them
    f16 = os.path.join(work, "gemma3-q-f16.gguf")
    mmproj = os.path.join(work, "mmproj-gemma3-q-f16.gguf")
    if not os.path.exists(mmproj):  # files of an earlier run in --out are reused
        make_gemma_checkpoint(hf, num_hidden_layers=layers, layer_types=[
            "full_attention" if i % 6 == 5 else "sliding_attention" for i in range(layers)])
        llama_cpp = converter()
        convert(llama_cpp, hf, f16, "f16", mmproj=False)
        convert(llama_cpp, hf, mmproj, "f16", mmproj=True)
    ids = tokenize(a.llama_bin, f16, "the quick brown fox jumps over the lazy dog")
    for qtype in ("Q8_0", "Q4_K_M"):
        theirs = os.path.join(work, f"gemma3-q-{qtype}.gguf")
        ours = os.path.join(work, f"ocular-gemma3-q-{qtype}.gguf")
        run([os.path.join(a.llama_bin, "llama-quantize"), f16, theirs, qtype])
        ocular_quantize(a.ocular, ["-m", f16, "--mmproj", mmproj, "-o", ours,
                                   "--type", qtype.lower()])
        row = {"check": "gemma3-q f16 text (34 layers): ocular quantize vs llama-quantize",
               "type": qtype, "text": compare_tensors(ours, theirs)}
        if os.path.exists(os.path.join(a.llama_bin, "llama_logits")):
            row["llama_logits"] = logits_row(a.llama_bin, ours, theirs, ids, work, f"q-{qtype}", 16)
        summary.append(row)
        print(json.dumps(row), flush=True)


def fullsize(a, work, summary):
    theirs = a.fullsize_q4 or os.path.join(work, "fullsize-Q4_K_M.gguf")
    if not os.path.exists(theirs):
        run([os.path.join(a.llama_bin, "llama-quantize"), a.fullsize_text, theirs, "Q4_K_M"])
    ours = a.fullsize_ocular_q4 or os.path.join(work, "ocular-fullsize-Q4_K_M.gguf")
    if not os.path.exists(ours):
        ocular_quantize(a.ocular, ["-m", a.fullsize_text, "--mmproj", a.fullsize_mmproj, "-o",
                                   ours, "--type", "q4_k_m"])
    row = {"check": "full-size f16 text: ocular quantize vs llama-quantize", "type": "Q4_K_M",
           "text": compare_tensors(ours, theirs)}
    summary.append(row)
    print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bin", required=True, help="bench/peers/build_llamacpp.sh's bin/")
    ap.add_argument("--ocular", default="build/tools/cli/ocular")
    ap.add_argument("--out", default=None, help="folder for the files (default: a temp dir)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["tiny", "recipe"])
    ap.add_argument("--fullsize-text", help="a full-size f16 text GGUF (make_llamacpp_fullsize)")
    ap.add_argument("--fullsize-mmproj", help="its mmproj")
    ap.add_argument("--fullsize-q4", help="llama-quantize's Q4_K_M of it, if already made")
    ap.add_argument("--fullsize-ocular-q4", help="ocular's Q4_K_M of it, if already made")
    a = ap.parse_args()
    common.set_determinism()
    work = a.out or tempfile.mkdtemp(prefix="llamacpp_interop_")
    os.makedirs(work, exist_ok=True)
    summary = []
    if "tiny" not in a.skip:
        tiny_pairs(a, work, summary)
    if "recipe" not in a.skip:
        recipe(a, work, summary)
    if a.fullsize_text:
        fullsize(a, work, summary)
    with open(os.path.join(work, "interop.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    print(f"files and interop.json in {work}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Tiny Qwen2-VL, Qwen2.5-VL and Qwen3-VL converted by llama.cpp's own converter into its two files.

The Qwen sibling of make_llamacpp_pair.py (same pinned converter, fetched the same way, run with
the gguf-py beside it): `convert_hf_to_gguf.py` writes the text file (architecture `qwen2vl`,
or `qwen3vl` for Qwen3-VL; a gpt2 vocabulary) and, with --mmproj, the mmproj (projector
`qwen2vl_merger`, `qwen2.5vl_merger` or `qwen3vl_merger`), in f32 and f16.

Two things the unmodified converter cannot take from a tiny checkpoint, and how they are met:
  - it names the BPE pre-tokenizer by hashing the token ids of a fixed text, a hash known only
    for the released vocabularies (get_vocab_base_pre); the tiny vocabulary has Qwen2's
    pre-tokenizer (make_qwen2vl.QWEN2_PATTERN), so an unknown hash is registered as "qwen2"
    here, what convert_hf_to_gguf_update.py would add for it;
  - the mmproj pass reads the architecture from config.json's top-level "architectures",
    which transformers 4.57 writes inside text_config only: it is copied to the top level
    (the released checkpoints have it there).

The checkpoints (testdata/golden/<name>'s, kept only in a temporary folder): make_qwen2vl.py's
tiny ones with what llama.cpp's files can carry, so that its rules for what they leave out give
back the same model:
  qwen2vl-lc   a 3-block ViT (gguf-py maps visual.merger.mlp.{bid} only for bid < depth, so a
               2-block ViT's mlp.2 cannot be converted)
  qwen25vl-lc  window_size 112 (the converter writes no clip.vision.window_size; clip.cpp then
               uses 112), fullatt_block_indexes [1] (clip.vision.n_wa_pattern 2)
  qwen3vl-lc   make_qwen3vl.py's tiny "qwen3vl" configuration (3-block ViT, 6x6 position table,
               DeepStack after blocks 0 and 2; a 3-layer Qwen3 decoder with head_dim 16, tied),
               as the converter carries it whole (conversion/qwen3vl.py)
all with the preprocessing of the released Qwen/Qwen2-VL-*-Instruct and Qwen2.5-VL-*-Instruct
(min_pixels 3136, max_pixels 12845056) or Qwen/Qwen3-VL-*-Instruct (size.shortest_edge 65536,
longest_edge 16777216), which ocular uses for a llama.cpp pair because the mmproj has no key for
it, and weights rounded to f16 values, so the f16 pair holds the same model as the f32 one and
both are compared with the same goldens at the f32 tolerance.

Writes:
  testdata/llamacpp/{qwen2vl,qwen25vl,qwen3vl}-lc-{f32,f16}.gguf          the text files
  testdata/llamacpp/mmproj-{qwen2vl,qwen25vl,qwen3vl}-lc-{f32,f16}.gguf   the mmproj files
  testdata/golden/<name>/<case>.safetensors    transformers' taps (make_qwen2vl.py's), eager f32
  testdata/golden/qwen25vl-lc/wide.png         a 168x112 image: 6x4 merged patches, windows of
                                               4x4 and 2x4

Run: .venv/bin/python -m tools.reference.make_llamacpp_qwen_pair [--only qwen3vl-lc]
With --convert DIR [--outtype bf16] [--out FOLDER]: only converts the HF checkpoint DIR (e.g.
make_fullsize_qwen.py's random-weight Qwen2.5-VL-3B / Qwen3-VL-4B shapes, for
bench/peers/run.py --qwen-pair) into FOLDER/<name>-<outtype>.gguf and
FOLDER/mmproj-<name>-<outtype>.gguf, by the same converter and pre-tokenizer rule.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

from tools.reference import common, make_qwen2vl, make_qwen3vl, taps as taps_lib
from tools.reference.make_llamacpp_pair import OUT, converter

GOLDEN = make_qwen2vl.GOLDEN
NUM_GENERATED = 8
MIN_PIXELS = 56 * 56  # Qwen/Qwen2-VL-7B-Instruct's (and Qwen2.5-VL's) preprocessor_config.json
MAX_PIXELS = 12845056
# Qwen/Qwen3-VL-4B-Instruct's preprocessor_config.json: size {shortest_edge, longest_edge}
QWEN3_PIXELS = (65536, 16777216)
TAG = make_qwen2vl.VISION_TAG
WIDE = "qwen25vl-lc/wide"
CHECKPOINTS = {  # name: (seed, qwen25 (or "qwen3"), vision overrides, cases)
    "qwen2vl-lc": (31, False, dict(depth=3), {
        "two": (["photo", "gray"], "look " + TAG + " and " + TAG + " what differs?"),
        "text_only": ([], "what color is the square?"),
    }),
    "qwen25vl-lc": (32, True, dict(window_size=112), {
        "wide": ([WIDE], TAG + "describe"),
        "text_only": ([], "what color is the square?"),
    }),
    "qwen3vl-lc": (34, "qwen3", {}, {
        "one": (["photo"], TAG + "describe this picture"),
        "text_only": ([], "what color is the square?"),
    }),
}

# Registers an unknown pre-tokenizer hash as Qwen2's, then runs the converter as its __main__.
RUNNER = """
import os, runpy, sys
llama_cpp = sys.argv[1]
sys.path[0:0] = [llama_cpp, os.path.join(llama_cpp, "gguf-py")]
import conversion.base as base
known = base.TextModel.get_vocab_base_pre
def pre(self, tokenizer):
    try:
        return known(self, tokenizer)
    except NotImplementedError:
        return "qwen2"
base.TextModel.get_vocab_base_pre = pre
sys.argv = [os.path.join(llama_cpp, "convert_hf_to_gguf.py")] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def convert(llama_cpp, hf_dir, outfile, outtype, mmproj):
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    cmd = [sys.executable, "-c", RUNNER, llama_cpp, hf_dir, "--outtype", outtype, "--outfile",
           outfile] + (["--mmproj"] if mmproj else [])
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    print(f"converted: {outfile} ({os.path.getsize(outfile)} bytes)")


def make_qwen3_checkpoint(seed, out_dir):
    from transformers import Qwen3VLForConditionalGeneration

    tokenizer = make_qwen2vl.load_tokenizer()
    config = make_qwen3vl.make_config(tokenizer, make_qwen3vl.VISION, make_qwen3vl.TEXT, True)
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).eval()
    make_qwen2vl.init_weights(model, seed, embed_std=0.1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))
    processor = make_qwen3vl.make_processor(tokenizer)
    processor.image_processor.min_pixels, processor.image_processor.max_pixels = QWEN3_PIXELS
    processor.image_processor.size = {"shortest_edge": QWEN3_PIXELS[0],
                                      "longest_edge": QWEN3_PIXELS[1]}
    make_qwen2vl.save(model, out_dir, processor)


def make_checkpoint(name, out_dir):
    seed, qwen25, vision, _ = CHECKPOINTS[name]
    if qwen25 == "qwen3":
        make_qwen3_checkpoint(seed, out_dir)
        return
    tokenizer = make_qwen2vl.load_tokenizer()
    config = make_qwen2vl.make_config(tokenizer, qwen25)
    for key, value in vision.items():
        setattr(config.vision_config, key, value)
    torch.manual_seed(seed)
    model = make_qwen2vl.model_class(name)(config).eval()
    make_qwen2vl.init_weights(model, seed, embed_std=0.1 if qwen25 else 1.0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))
    processor = make_qwen2vl.make_processor(tokenizer, min_pixels=MIN_PIXELS,
                                            max_pixels=MAX_PIXELS, qwen25=qwen25)
    make_qwen2vl.save(model, out_dir, processor)
    path = os.path.join(out_dir, "config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["architectures"] = cfg["text_config"]["architectures"]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)


def make_goldens(name, hf_dir):
    from PIL import Image
    from transformers import AutoProcessor

    from transformers import Qwen3VLForConditionalGeneration

    _, kind, _, cases = CHECKPOINTS[name]
    qwen3 = kind == "qwen3"
    model_class = Qwen3VLForConditionalGeneration if qwen3 else make_qwen2vl.model_class(name)
    model = model_class.from_pretrained(
        hf_dir, dtype=torch.float32, attn_implementation="eager").eval()
    processor = AutoProcessor.from_pretrained(hf_dir, use_fast=False)
    out_dir = os.path.join(GOLDEN, name)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    if name == "qwen25vl-lc":
        make_qwen2vl.synthetic(168, 112, 7).save(os.path.join(GOLDEN, WIDE + ".png"),
                                                  optimize=False)
    make_qwen2vl.NUM_GENERATED = NUM_GENERATED
    for case, (names, prompt) in cases.items():
        images = [Image.open(os.path.join(GOLDEN if "/" in n else make_qwen2vl.INPUTS, n + ".png"))
                  for n in names]
        kwargs = dict(images=images) if names else {}
        inputs = processor(text=[prompt], return_tensors="pt", **kwargs)
        inputs = {k: v for k, v in inputs.items()
                  if k not in ("attention_mask", "mm_token_type_ids")}
        taps = (make_qwen3vl.trace if qwen3 else make_qwen2vl.trace)(model, inputs)
        make_qwen2vl.check_generate(model, inputs, taps)
        taps_lib.save_taps(taps, os.path.join(out_dir, f"{case}.safetensors"),
                           {"checkpoint": name, "case": case, "prompt": prompt,
                            "images": ",".join(names)})
        grids = inputs["image_grid_thw"].tolist() if names else []
        print(f"golden: {name}/{case} T={taps['input_ids'].shape[0]} grids={grids} "
              f"gen={taps['generated_ids'].tolist()}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", default=None, help="also keep the HF checkpoints here")
    parser.add_argument("--only", nargs="*", choices=sorted(CHECKPOINTS),
                        help="these checkpoints only (default: all)")
    parser.add_argument("--convert", metavar="DIR", help="only convert this HF checkpoint")
    parser.add_argument("--outtype", default="bf16", help="with --convert: f32, f16, bf16")
    parser.add_argument("--out", default=None, help="with --convert: the folder (default DIR/..)")
    args = parser.parse_args(argv)
    if args.convert:
        hf_dir = args.convert.rstrip("/")
        name, out = os.path.basename(hf_dir), args.out or os.path.dirname(hf_dir)
        for mmproj in (False, True):
            convert(converter(), hf_dir, os.path.join(
                out, ("mmproj-" if mmproj else "") + f"{name}-{args.outtype}.gguf"),
                    args.outtype, mmproj)
        return
    common.set_determinism()
    taps_lib.I64_TAPS = taps_lib.I64_TAPS + ("image_grid_thw", "position_ids", "rope_deltas")
    llama_cpp = converter()
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or CHECKPOINTS:
            hf_dir = os.path.join(args.keep or tmp, name)
            make_checkpoint(name, hf_dir)
            for outtype in ("f32", "f16"):
                convert(llama_cpp, hf_dir, os.path.join(OUT, f"{name}-{outtype}.gguf"), outtype,
                        mmproj=False)
                convert(llama_cpp, hf_dir, os.path.join(OUT, f"mmproj-{name}-{outtype}.gguf"),
                        outtype, mmproj=True)
            make_goldens(name, hf_dir)


if __name__ == "__main__":
    main()

"""A tiny Gemma 3 converted by llama.cpp's own converter into its two files, with goldens.

llama.cpp users hold a text GGUF plus an mmproj GGUF (llama-mtmd-cli -m text.gguf --mmproj
mmproj.gguf). This script makes such a pair the way they are made: the `convert_hf_to_gguf.py`
of the `llama-cpp-python` sdist's vendor/llama.cpp (pinned, fetched from PyPI with pip and
unpacked under .venv/llamacpp/, never committed), once for the text model and once with
--mmproj, in f32 and f16. It runs with the gguf-py beside it (the converter's default): PyPI's
gguf 0.19.0, the version that gguf-py states, lacks architectures this converter registers
(MODEL_ARCH.DFLASH) and fails on import.

The checkpoint (testdata/tiny/gemma3-lc, committed: `ocular quantize --mmproj-out` writes the same
pair from it, tests/golden/llamacpp_write_test.cc): make_gemma3.py's
tiny Gemma3ForConditionalGeneration with the hyperparameters llama.cpp's metadata can carry,
so that llama.cpp's rules for what the file leaves out give back the same model:
  query_pre_attn_scalar = head_dim   (llama.cpp scales by 1/sqrt(head_dim), except for the
                                      62-layer 27B; make_gemma3's tiny one has 20 vs 24)
  6 layers, every 6th global         (llama.cpp's default pattern: no per-layer types are
                                      written; make_gemma3's tiny one alternates)
  sliding window 3, local RoPE base 100 and global 1000 with linear scaling 4 (all written)
and weights rounded to f16 values, so the f16 pair holds the same model as the f32 one and
both are compared with the same goldens at the f32 tolerance.

Writes:
  testdata/tiny/gemma3-lc/                            the HF checkpoint
  testdata/llamacpp/gemma3-lc-{f32,f16}.gguf          the text files (arch gemma3)
  testdata/llamacpp/mmproj-gemma3-lc-{f32,f16}.gguf   the mmproj files (projector gemma3)
  testdata/golden/gemma3-lc/<case>.safetensors        transformers' taps on the checkpoint
                                                      (eager, f32), as make_gemma3.py's

Run: .venv/bin/python -m tools.reference.make_llamacpp_pair
"""

import argparse
import os
import shutil
import subprocess
import sys
import tarfile

import torch

from tools.reference import common, make_gemma3, taps as taps_lib
from tools.reference.make_goldens import make_images

SDIST = "llama-cpp-python==0.3.36"
CACHE = os.path.join(".venv", "llamacpp")
OUT = os.path.join("testdata", "llamacpp")
GOLDEN = os.path.join("testdata", "golden", "gemma3-lc")
CHECKPOINT = os.path.join("testdata", "tiny", "gemma3-lc")
NAME = "gemma3-lc"
LAYERS = 6
CASES = {k: make_gemma3.VISION_CASES[k] for k in ("photo", "gray_question", "three", "text_only")}
NUM_GENERATED = 8


def converter():
    """vendor/llama.cpp of the pinned sdist."""
    root = os.path.join(CACHE, "src")
    script = None
    if os.path.isdir(root):
        for name in os.listdir(root):
            candidate = os.path.join(root, name, "vendor", "llama.cpp")
            if os.path.isfile(os.path.join(candidate, "convert_hf_to_gguf.py")):
                script = candidate
    if script is None:
        download = os.path.join(CACHE, "download")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", SDIST, "-d", download], check=True)
        (archive,) = [f for f in os.listdir(download) if f.endswith(".tar.gz")]
        with tarfile.open(os.path.join(download, archive)) as tar:
            members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name]
            tar.extractall(root, members=members, filter="data")
        return converter()
    return script


def convert(llama_cpp, hf_dir, outfile, outtype, mmproj):
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    cmd = [sys.executable, os.path.join(llama_cpp, "convert_hf_to_gguf.py"), hf_dir,
           "--outtype", outtype, "--outfile", outfile] + (["--mmproj"] if mmproj else [])
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    print(f"converted: {outfile} ({os.path.getsize(outfile)} bytes)")


def make_checkpoint(out_dir):
    """make_gemma3's tiny VLM with llama.cpp-expressible hyperparameters, f16-valued weights."""
    from transformers import Gemma3ForConditionalGeneration

    tokenizer = make_gemma3.load_tokenizer()
    layer_types = ["sliding_attention"] * (LAYERS - 1) + ["full_attention"]
    config = make_gemma3.vlm_config(tokenizer, make_gemma3.text_config(
        tokenizer, num_hidden_layers=LAYERS, layer_types=layer_types, sliding_window=3,
        query_pre_attn_scalar=make_gemma3.TEXT["head_dim"], final_logit_softcapping=None))
    torch.manual_seed(5)
    model = Gemma3ForConditionalGeneration(config).eval()
    make_gemma3.init_weights(model, 5)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))
    make_gemma3.save(model, out_dir, tokenizer, make_gemma3.make_processor(config, tokenizer))


def make_goldens(hf_dir):
    from transformers import AutoProcessor, Gemma3ForConditionalGeneration

    images = make_images()
    model = Gemma3ForConditionalGeneration.from_pretrained(
        hf_dir, dtype=torch.float32, attn_implementation="eager").eval()
    processor = AutoProcessor.from_pretrained(hf_dir, use_fast=False)
    if os.path.isdir(GOLDEN):
        shutil.rmtree(GOLDEN)
    os.makedirs(GOLDEN)
    make_gemma3.NUM_GENERATED = NUM_GENERATED
    for case, (names, prompt) in CASES.items():
        kwargs = dict(images=[[images[n] for n in names]]) if names else {}
        inputs = processor(text=[prompt], return_tensors="pt", **kwargs)
        inputs = {k: v for k, v in inputs.items() if k != "attention_mask"}
        taps = make_gemma3.trace(model, inputs)
        make_gemma3.check_generate(model, inputs, taps)
        meta = {"checkpoint": NAME, "case": case, "prompt": prompt, "images": ",".join(names)}
        taps_lib.save_taps(taps, os.path.join(GOLDEN, f"{case}.safetensors"), meta)
        print(f"golden: {NAME}/{case} T={taps['input_ids'].shape[0]} "
              f"gen={taps['generated_ids'].tolist()}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=CHECKPOINT, help="where the HF checkpoint goes")
    args = parser.parse_args(argv)
    common.set_determinism()
    llama_cpp = converter()
    hf_dir = args.checkpoint
    if os.path.isdir(hf_dir):
        shutil.rmtree(hf_dir)
    make_checkpoint(hf_dir)
    os.makedirs(OUT, exist_ok=True)
    for outtype in ("f32", "f16"):
        convert(llama_cpp, hf_dir, os.path.join(OUT, f"{NAME}-{outtype}.gguf"),
                outtype, mmproj=False)
        convert(llama_cpp, hf_dir, os.path.join(OUT, f"mmproj-{NAME}-{outtype}.gguf"),
                outtype, mmproj=True)
    make_goldens(hf_dir)


if __name__ == "__main__":
    main()

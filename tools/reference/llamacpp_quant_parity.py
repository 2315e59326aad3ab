"""Quantized llama.cpp pairs: ocular's top-1 against transformers on the dequantized weights.

For Gemma 3, Qwen2-VL and Qwen2.5-VL checkpoints of make_llamacpp_pair.py's /
make_llamacpp_qwen_pair.py's shape but with a text decoder llama-quantize can quantize (hidden
256, MLP 512: whole 256-value Q4_K super-blocks; the tiny ones' 48 would fall back to F16):
  1. convert_hf_to_gguf.py (make_llamacpp_qwen_pair.py's runner): the text file in f32, the
     mmproj in f32;
  2. llama-quantize (bench/peers/build_llamacpp.sh) the text file to Q8_0 and Q4_K_M;
  3. transformers (float32, eager) with the text decoder's weights replaced by the quantized
     file's, dequantized with the gguf package: the reference on the very values in the file;
  4. per prompt (images and text-only), `ocular trace` on the quantized pair (--max-tokens N),
     then transformers on ocular's sequence (the prompt plus ocular's greedy tokens, one pass):
     top-1 agreement at every position (gemma3_gguf_parity.top1's metric), with ocular's default int8 activations and with
     OCULAR_GGUF_DEQUANTIZE=1 (the quantized values in f32: the model itself);
  5. with --llama-bin (a build with llama_logits): llama.cpp's own top-1 on the same sequences
     for the text-only prompts (llama_logits takes token ids; images need mtmd).
Prints one table (and OUT/summary.json). --fixture also writes the committed test files
(write_fixture).

Run: .venv/bin/python -m tools.reference.llamacpp_quant_parity --llama-bin BUILD/bin
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file

from tools.reference import common, gemma3_gguf, make_gemma3, make_qwen2vl
from tools.reference.make_llamacpp_pair import converter
from tools.reference.make_llamacpp_qwen_pair import MAX_PIXELS, MIN_PIXELS, convert

TEXT = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2,
            rope_scaling={"type": "mrope", "mrope_section": [8, 12, 12]})
TAG = make_qwen2vl.VISION_TAG
PROMPTS = [  # (images, prompt)
    (["photo"], TAG + "describe this picture"),
    (["photo", "gray"], "look " + TAG + " and " + TAG + " what differs?"),
    (["qwen2vl-pixels/120x90s23P"], TAG + "describe"),
    ([], "what color is the square?"),
    ([], "the quick brown fox jumps over the lazy dog"),
    ([], "a small red square on a white background"),
]
# llama.cpp's names in the text file -> transformers 4.57's (gguf-py MODEL_ARCH.QWEN2VL).
LAYER = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
         "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
         "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


GEMMA_TEXT = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  query_pre_attn_scalar=64, intermediate_size=512, num_hidden_layers=6,
                  layer_types=["sliding_attention"] * 5 + ["full_attention"], sliding_window=3,
                  final_logit_softcapping=None)
GEMMA_PROMPTS = [(images, prompt) for images, prompt in make_gemma3.VISION_CASES.values()] + [
    ([], "caption en"), ([], "detect circle ; square ; triangle and a red circle")]


def run(cmd, env=None):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL).stdout


def hf_text_name(name):
    if name == "token_embd.weight":
        return "model.language_model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.language_model.norm.weight"
    if name == "output.weight":
        return "lm_head.weight"
    _, i, kind, suffix = name.split(".")
    return f"model.language_model.layers.{i}.{LAYER[kind]}.{suffix}"


def gemma_text_name(name):
    """gemma3_gguf's decoder names under Gemma3ForConditionalGeneration's language_model."""
    return gemma3_gguf.hf_name(name).replace("model.", "model.language_model.", 1)


def make_gemma_checkpoint(out_dir, **text):
    """make_llamacpp_pair.py's Gemma 3 with a decoder of quantizable width (GEMMA_TEXT, updated
    by `text`)."""
    from transformers import Gemma3ForConditionalGeneration

    tokenizer = make_gemma3.load_tokenizer()
    config = make_gemma3.vlm_config(tokenizer,
                                    make_gemma3.text_config(tokenizer, **dict(GEMMA_TEXT, **text)))
    torch.manual_seed(43)
    model = Gemma3ForConditionalGeneration(config).eval()
    make_gemma3.init_weights(model, 43)
    make_gemma3.save(model, out_dir, tokenizer, make_gemma3.make_processor(config, tokenizer))


def make_checkpoint(name, qwen25, out_dir):
    tokenizer = make_qwen2vl.load_tokenizer()
    saved = {k: getattr(make_qwen2vl, k) for k in ("TEXT", "TEXT_25", "VISION", "VISION_25")}
    try:  # make_config reads these module-level dicts
        make_qwen2vl.TEXT = dict(saved["TEXT"], **TEXT)
        make_qwen2vl.TEXT_25 = dict(saved["TEXT_25"], **TEXT)
        make_qwen2vl.VISION = dict(saved["VISION"], depth=3, hidden_size=TEXT["hidden_size"])
        make_qwen2vl.VISION_25 = dict(saved["VISION_25"], window_size=112,
                                      out_hidden_size=TEXT["hidden_size"])
        config = make_qwen2vl.make_config(tokenizer, qwen25)
    finally:
        for k, v in saved.items():
            setattr(make_qwen2vl, k, v)
    torch.manual_seed(41)
    model = make_qwen2vl.model_class(name)(config).eval()
    make_qwen2vl.init_weights(model, 41, embed_std=0.1 if qwen25 else 1.0)
    with torch.no_grad():  # f16 values: an f16 mmproj holds the vision tower exactly
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


def dequantized_model(name, hf_dir, gguf_path):
    """transformers' model with the text decoder's weights as the GGUF file holds them (Gemma's
    norms stored as 1 + w by the converter: read back as stored - 1, as gemma3_gguf does)."""
    from gguf import GGUFReader, quants
    from transformers import Gemma3ForConditionalGeneration

    gemma = name.startswith("gemma3")
    cls = Gemma3ForConditionalGeneration if gemma else make_qwen2vl.model_class(name)
    model = cls.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager").eval()
    state = model.state_dict()
    with torch.no_grad():
        for t in GGUFReader(gguf_path).tensors:
            values = quants.dequantize(t.data, t.tensor_type)
            if gemma and t.name.endswith("norm.weight"):
                values = values - 1.0
            target = state[gemma_text_name(t.name) if gemma else hf_text_name(t.name)]
            target.copy_(torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
                         .reshape(target.shape))
        model.tie_weights()
    return model


def image_args(names):
    out = []
    for n in names:
        out += ["-i", os.path.join(make_qwen2vl.GOLDEN if "/" in n else make_qwen2vl.INPUTS,
                                   n + ".png")]
    return out


def processor_inputs(processor, names, prompt):
    from PIL import Image

    images = [Image.open(a) for a in image_args(names)[1::2]]
    kwargs = {}
    if names:  # Gemma 3's processor takes one list of images per text
        kwargs["images"] = [images] if "Gemma3" in type(processor).__name__ else images
    return processor(text=[prompt], return_tensors="pt", **kwargs)


def reference_top1(model, processor, names, prompt, ours):
    """transformers' argmax on ocular's sequence against ocular's, at every position: the
    prompt in one pass, then ocular's greedy tokens one at a time with the KV cache (as
    taps.greedy_decode, forced; one pass over everything would fail transformers' image
    placeholder check when a generated token is an image pad)."""
    from tools.reference import taps as taps_lib

    inputs = processor_inputs(processor, names, prompt)
    ids = inputs["input_ids"][0]
    assert torch.equal(ids, ours["input_ids"].to(torch.int64)), "prompt ids differ from ocular's"
    t = ids.numel()
    cache = taps_lib.make_cache(model)
    with torch.no_grad():
        out = model(**inputs, past_key_values=cache, use_cache=True)
        rows = [out.logits[0]]
        for k, token in enumerate(ours["generated_ids"].tolist()[:-1]):
            step = model(input_ids=torch.tensor([[token]]),
                         attention_mask=torch.ones(1, t + k + 1, dtype=torch.long),
                         cache_position=torch.tensor([t + k]), past_key_values=cache,
                         use_cache=True)
            rows.append(step.logits[0])
    ref = torch.cat(rows).argmax(-1)
    mine = torch.cat([ours["logits"][: t - 1], ours["decode_logits"]]).argmax(-1)
    return int((mine == ref).sum()), int(ref.numel()), ref


def llama_top1(llama_bin, gguf_path, ours, ref, out_path):
    tool = os.path.join(llama_bin or "", "llama_logits")
    if not llama_bin or not os.path.exists(tool):
        return None
    gen = ours["generated_ids"].tolist()
    run([tool, gguf_path, out_path, "--ids", ",".join(map(str, ours["input_ids"].tolist())),
         "--gen", str(len(gen)), "--force", ",".join(map(str, gen)), "--ctk", "f32", "--ctv",
         "f32", "--fa", "off", "-t", "2"])
    theirs = load_file(out_path)
    t = ours["input_ids"].numel()
    rows = torch.cat([theirs["logits"][: t - 1], theirs["decode_logits"]])
    return int((rows.argmax(-1) == ref).sum())


def measure(args, name, work, llama_cpp, summary):
    from transformers import AutoProcessor

    hf_dir = os.path.join(work, name)
    if name.startswith("gemma3"):
        make_gemma_checkpoint(hf_dir)
    else:
        make_checkpoint(name, name.startswith("qwen25"), hf_dir)
    prompts = GEMMA_PROMPTS if name.startswith("gemma3") else PROMPTS
    text32 = os.path.join(work, f"{name}-f32.gguf")
    mmproj = os.path.join(work, f"mmproj-{name}-f32.gguf")
    convert(llama_cpp, hf_dir, text32, "f32", mmproj=False)
    convert(llama_cpp, hf_dir, mmproj, "f32", mmproj=True)
    processor = AutoProcessor.from_pretrained(hf_dir, use_fast=False)
    for qtype in ("Q8_0", "Q4_K_M"):
        gguf_path = os.path.join(work, f"{name}-{qtype}.gguf")
        run([os.path.join(args.llama_bin, "llama-quantize"), text32, gguf_path, qtype])
        model = dequantized_model(name, hf_dir, gguf_path)
        row = {"model": name, "text": qtype}
        for mode in ("int8", "dequantized"):
            env = dict(os.environ, OCULAR_GGUF_DEQUANTIZE="1" if mode == "dequantized" else "0")
            agree = total = l_agree = l_total = 0
            for k, (names, prompt) in enumerate(prompts):
                path = os.path.join(work, f"{name}-{qtype}-{mode}-{k}.safetensors")
                run([args.ocular, "trace", "-m", gguf_path, "--mmproj", mmproj, *image_args(names),
                     "-p", prompt, "--max-tokens", str(args.tokens), "-o", path], env=env)
                ours = load_file(path)
                a, t, ref = reference_top1(model, processor, names, prompt, ours)
                agree, total = agree + a, total + t
                if mode == "int8" and not names:
                    b = llama_top1(args.llama_bin, gguf_path, ours, ref, path + ".llama")
                    if b is not None:
                        l_agree, l_total = l_agree + b, l_total + t
                        row.setdefault("ocular_text_only", [0, 0])
                        row["ocular_text_only"][0] += a
                        row["ocular_text_only"][1] += t
            row[f"ocular_{mode}"] = [agree, total]
            if l_total:
                row["llama_text_only"] = [l_agree, l_total]
        summary.append(row)
        print(json.dumps(row), flush=True)


def write_fixture(work, llama_cpp):
    """The Q4_K_M Qwen2.5-VL pair (f16 mmproj) and transformers' taps on its dequantized
    weights, for qwen2vl_llamacpp_test.cc: testdata/llamacpp/qwen25vl-q-Q4_K_M.gguf,
    mmproj-qwen25vl-q-f16.gguf, testdata/golden/qwen25vl-q4km/<case>.safetensors."""
    import shutil

    from transformers import AutoProcessor

    from tools.reference import taps as taps_lib

    name, hf_dir = "qwen25vl-q", os.path.join(work, "qwen25vl-q")
    out = os.path.join("testdata", "llamacpp")
    shutil.copyfile(os.path.join(work, f"{name}-Q4_K_M.gguf"),
                    os.path.join(out, f"{name}-Q4_K_M.gguf"))
    convert(llama_cpp, hf_dir, os.path.join(out, f"mmproj-{name}-f16.gguf"), "f16", mmproj=True)
    model = dequantized_model(name, hf_dir, os.path.join(work, f"{name}-Q4_K_M.gguf"))
    processor = AutoProcessor.from_pretrained(hf_dir, use_fast=False)
    golden = os.path.join(make_qwen2vl.GOLDEN, "qwen25vl-q4km")
    if os.path.isdir(golden):
        shutil.rmtree(golden)
    os.makedirs(golden)
    taps_lib.I64_TAPS = taps_lib.I64_TAPS + ("image_grid_thw", "position_ids", "rope_deltas")
    make_qwen2vl.NUM_GENERATED = 8
    for case, k in (("palette", 2), ("text_only", 3)):
        names, prompt = PROMPTS[k]
        inputs = processor_inputs(processor, names, prompt)
        inputs = {key: v for key, v in inputs.items() if key != "attention_mask"}
        taps = make_qwen2vl.trace(model, inputs)
        make_qwen2vl.check_generate(model, inputs, taps)
        taps_lib.save_taps(taps, os.path.join(golden, f"{case}.safetensors"),
                           {"checkpoint": name, "case": case, "prompt": prompt,
                            "images": ",".join(names)})
        print(f"golden: qwen25vl-q4km/{case} gen={taps['generated_ids'].tolist()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-bin", required=True,
                        help="llama.cpp build's bin/ with llama-quantize (and llama_logits)")
    parser.add_argument("--ocular", default="build/tools/cli/ocular")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--models", nargs="+", default=["gemma3-q", "qwen2vl-q", "qwen25vl-q"])
    parser.add_argument("--out", default=None, help="folder for the files (default: a temp dir)")
    parser.add_argument("--fixture", action="store_true",
                        help="also write the committed Q4_K_M Qwen2.5-VL pair and its goldens")
    args = parser.parse_args()
    common.set_determinism()
    work = args.out or tempfile.mkdtemp(prefix="llamacpp_quant_")
    os.makedirs(work, exist_ok=True)
    llama_cpp = converter()
    summary = []
    for name in args.models:
        measure(args, name, work, llama_cpp, summary)
    if args.fixture:
        write_fixture(work, llama_cpp)
    with open(os.path.join(work, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    print(f"files and summary.json in {work}", file=sys.stderr)


if __name__ == "__main__":
    main()

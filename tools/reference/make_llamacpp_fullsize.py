"""A random-weight Gemma 3 4B as llama.cpp users hold it: a Q4_K_M text GGUF and an f16 mmproj.

For benchmarking only (bench/peers/run.py --pair): the config of google/gemma-3-4b-it (the
keys the model reads), transformers 4.57's tensor names and shapes (meta device, under the
hub's names), bf16, random N(0, 0.02) weights (norms N(0, 0.1): Gemma scales by 1 + w).
Never downloaded, never committed. The tokenizer is the tiny Gemma 3 one
(testdata/tiny/gemma3-lc; bench feeds synthetic ids), so the image token ids are the tiny
tokenizer's; the vocabulary is padded to the released 262208 rows by the converter.

Then, as a llama.cpp user's files are made: llama.cpp's own convert_hf_to_gguf.py (the pinned
llama-cpp-python sdist's, make_llamacpp_pair.converter()) writes the text GGUF in f16 and, with
--mmproj, the mmproj in f16; llama-quantize (bench/peers/build_llamacpp.sh's build) makes the
Q4_K_M (and, with --q8, Q8_0) text file.

Run: .venv/bin/python -m tools.reference.make_llamacpp_fullsize --llama-bin BIN [--out fullsize]
Writes OUT/gemma3-4b/ (the HF checkpoint, 8.6 GB; removed with --drop-hf),
OUT/gemma-3-4b-it-f16.gguf (7.8 GB), OUT/mmproj-gemma-3-4b-it-f16.gguf (0.85 GB),
OUT/gemma-3-4b-it-Q4_K_M.gguf (2.5 GB). Run it with nice: it streams, RAM stays ~2 GB.
"""

import argparse
import json
import os
import shutil
import subprocess

import torch

from tools.reference import make_llamacpp_pair
from tools.reference.make_fullsize import hub_shapes, write_random_safetensors

TINY = os.path.join("testdata", "tiny", "gemma3-lc")
TOKENIZER_FILES = ("tokenizer.model", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "added_tokens.json", "chat_template.jinja")

GEMMA3_4B = {  # google/gemma-3-4b-it config.json (the keys the model reads)
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "mm_tokens_per_image": 256, "torch_dtype": "bfloat16",
    "text_config": {
        "model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
        "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "vocab_size": 262208, "max_position_embeddings": 131072,
        "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024, "final_logit_softcapping": None,
        "attn_logit_softcapping": None, "hidden_activation": "gelu_pytorch_tanh"},
    "vision_config": {
        "model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
        "num_hidden_layers": 27, "num_attention_heads": 16, "patch_size": 14, "image_size": 896,
        "layer_norm_eps": 1e-06, "hidden_act": "gelu_pytorch_tanh", "vision_use_head": False},
}


def config():
    with open(os.path.join(TINY, "config.json")) as f:
        tiny = json.load(f)
    cfg = json.loads(json.dumps(GEMMA3_4B))
    for key in ("boi_token_index", "eoi_token_index", "image_token_index", "bos_token_id",
                "eos_token_id", "pad_token_id"):
        cfg[key] = tiny[key]
    cfg["text_config"].update(
        {k: tiny["text_config"][k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")
         if k in tiny["text_config"]})
    layers = cfg["text_config"]["num_hidden_layers"]
    cfg["text_config"]["layer_types"] = [
        "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(layers)]
    return cfg


def tensor_shapes(cfg):
    """(hub name, shape) for every tensor, from transformers' module tree (meta device)."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration
    with torch.device("meta"):
        model = Gemma3ForConditionalGeneration(Gemma3Config(**cfg))
    return hub_shapes(model)


def make_checkpoint(d):
    os.makedirs(d, exist_ok=True)
    cfg = config()
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    for name in TOKENIZER_FILES:
        shutil.copy(os.path.join(TINY, name), d)
    size = cfg["vision_config"]["image_size"]
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump({"image_processor_type": "Gemma3ImageProcessor", "processor_class":
                   "Gemma3Processor", "do_resize": True, "size": {"height": size, "width": size},
                   "resample": 2, "do_rescale": True, "rescale_factor": 1 / 255,
                   "do_normalize": True, "image_mean": [0.5, 0.5, 0.5],
                   "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True,
                   "do_pan_and_scan": False, "image_seq_length": cfg["mm_tokens_per_image"]},
                  f, indent=2)
    write_random_safetensors(os.path.join(d, "model.safetensors"), tensor_shapes(cfg), seed=4)
    print(f"wrote {d}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="fullsize")
    ap.add_argument("--llama-bin", help="bin/ of bench/peers/build_llamacpp.sh (llama-quantize)")
    ap.add_argument("--q8", action="store_true", help="also a Q8_0 text file")
    ap.add_argument("--drop-hf", action="store_true", help="remove the HF checkpoint at the end")
    args = ap.parse_args()
    hf = os.path.join(args.out, "gemma3-4b")
    text = os.path.join(args.out, "gemma-3-4b-it-f16.gguf")
    mmproj = os.path.join(args.out, "mmproj-gemma-3-4b-it-f16.gguf")
    if not os.path.exists(os.path.join(hf, "model.safetensors")):
        make_checkpoint(hf)
    llama_cpp = make_llamacpp_pair.converter()
    for out, is_mmproj in ((text, False), (mmproj, True)):
        if not os.path.exists(out):
            make_llamacpp_pair.convert(llama_cpp, hf, out, "f16", mmproj=is_mmproj)
    if args.llama_bin:
        for qtype in ("Q4_K_M", "Q8_0") if args.q8 else ("Q4_K_M",):
            out = os.path.join(args.out, f"gemma-3-4b-it-{qtype}.gguf")
            if not os.path.exists(out):
                subprocess.run([os.path.join(args.llama_bin, "llama-quantize"), text, out, qtype],
                               check=True, stdout=subprocess.DEVNULL)
                print(f"quantized: {out} ({os.path.getsize(out)} bytes)", flush=True)
    if args.drop_hf:
        shutil.rmtree(hf)


if __name__ == "__main__":
    main()

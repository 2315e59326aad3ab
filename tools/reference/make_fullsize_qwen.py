"""Random-weight checkpoints with the shapes of Qwen2.5-VL-3B-Instruct and Qwen3-VL-4B-Instruct.

For benchmarking only (`ocular bench`, bench/peers/run.py): the config.json of each released
checkpoint (as quoted in tests/golden/qwen2vl_golden_test.cc and qwen3vl_golden_test.cc), the
tensor names and shapes of transformers 4.57's module tree (meta device, as save_pretrained
writes them), bf16, random N(0, 0.02) weights (norms N(1, 0.1)). Never downloaded, never
committed. The tokenizer is the tiny Qwen one (testdata/tiny/qwen2vl; bench feeds synthetic
ids), so the config's special-token ids are the tiny tokenizer's, not 151652..151656.

The preprocessor states the resolution `ocular bench` encodes: max_pixels = SIZE x SIZE
(default 448: bench's square image resizes to 448x448, 1024 patches / 256 tokens of 14 px for
Qwen2.5-VL, 784 patches / 196 tokens of 16 px for Qwen3-VL); the released preprocessors allow
up to 12.8 M (Qwen2.5-VL) and 16.8 M (Qwen3-VL) pixels.

Run: .venv/bin/python -m tools.reference.make_fullsize_qwen [--out fullsize]
       [--which qwen25vl-3b qwen3vl-4b] [--size 448]
Writes ~7.5 GB (qwen25vl-3b) and ~8.9 GB (qwen3vl-4b) into OUT/<which>; streams tensor by
tensor, so RAM stays ~1 GB.
"""

import argparse
import json
import os
import shutil
import struct

import numpy as np
import torch

TINY = "testdata/tiny/qwen2vl"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "added_tokens.json", "special_tokens_map.json", "chat_template.jinja")

QWEN25_3B = {  # Qwen/Qwen2.5-VL-3B-Instruct config.json (the keys the model reads)
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
    "hidden_size": 2048, "intermediate_size": 11008, "num_attention_heads": 16,
    "num_hidden_layers": 36, "num_key_value_heads": 2, "max_position_embeddings": 128000,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": True,
    "vocab_size": 151936, "hidden_act": "silu", "use_sliding_window": False,
    "sliding_window": 32768, "max_window_layers": 70, "torch_dtype": "bfloat16",
    "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default", "type": "default"},
    "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280,
                      "intermediate_size": 3420, "num_heads": 16, "in_chans": 3,
                      "out_hidden_size": 2048, "patch_size": 14, "spatial_merge_size": 2,
                      "spatial_patch_size": 14, "window_size": 112,
                      "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2,
                      "temporal_patch_size": 2},
}
QWEN3_4B = {  # Qwen/Qwen3-VL-4B-Instruct config.json
    "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
    "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "text_config": {"attention_bias": False, "head_dim": 128, "hidden_act": "silu",
                    "hidden_size": 2560, "intermediate_size": 9728,
                    "max_position_embeddings": 262144, "model_type": "qwen3_vl_text",
                    "num_attention_heads": 32, "num_hidden_layers": 36,
                    "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
                    "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20],
                                     "rope_type": "default"},
                    "rope_theta": 5000000, "tie_word_embeddings": True, "vocab_size": 151936},
    "vision_config": {"deepstack_visual_indexes": [5, 11, 17], "depth": 24,
                      "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1024, "in_channels": 3,
                      "intermediate_size": 4096, "model_type": "qwen3_vl", "num_heads": 16,
                      "num_position_embeddings": 2304, "out_hidden_size": 2560,
                      "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2},
}
# name: (config, preprocessor mean/std, patch size)
CHECKPOINTS = {
    "qwen25vl-3b": (QWEN25_3B, [0.48145466, 0.4578275, 0.40821073],
                    [0.26862954, 0.26130258, 0.27577711], 14),
    "qwen3vl-4b": (QWEN3_4B, [0.5, 0.5, 0.5], [0.5, 0.5, 0.5], 16),
}


def token_ids():
    with open(os.path.join(TINY, "config.json")) as f:
        tiny = json.load(f)
    keys = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    ids = {k: tiny[k] for k in keys}
    text = tiny.get("text_config", tiny)
    ids.update(bos_token_id=text["bos_token_id"], eos_token_id=text["eos_token_id"])
    return ids


def tensor_shapes(cfg):
    """(name, shape) for every tensor, from transformers' module tree (meta device)."""
    from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration,
                              Qwen3VLConfig, Qwen3VLForConditionalGeneration)
    qwen3 = cfg["model_type"] == "qwen3_vl"
    conf = (Qwen3VLConfig if qwen3 else Qwen2_5_VLConfig)(**cfg)
    with torch.device("meta"):
        model = (Qwen3VLForConditionalGeneration if qwen3
                 else Qwen2_5_VLForConditionalGeneration)(conf)
    return [(released_name(name, qwen3), tuple(t.shape)) for name, t in model.state_dict().items()
            if not (name == "lm_head.weight" and cfg["tie_word_embeddings"])]


def released_name(name, qwen3):
    """The name the released checkpoint stores: Qwen2.5-VL's legacy visual.* / model.layers.*
    (transformers 4.57's save_pretrained writes them too; llama.cpp's converter reads only
    visual.* for the mmproj), Qwen3-VL's module-tree names."""
    if qwen3:
        return name
    for new, old in (("model.visual.", "visual."), ("model.language_model.", "model.")):
        if name.startswith(new):
            return old + name[len(new):]
    return name


def write_random_safetensors(path, shapes, seed):
    rng = np.random.default_rng(seed)
    header, offset = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, shape in shapes:
            norm = "norm" in name or "ln_q" in name
            x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32)
            x = x * 0.1 + 1.0 if norm and name.endswith("weight") else x * 0.02
            f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())  # truncate to bf16


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="fullsize")
    ap.add_argument("--which", nargs="+", default=sorted(CHECKPOINTS), choices=sorted(CHECKPOINTS))
    ap.add_argument("--size", type=int, default=448, help="max_pixels = SIZE x SIZE")
    args = ap.parse_args()
    ids = token_ids()
    for i, which in enumerate(args.which):
        cfg, mean, std, patch = CHECKPOINTS[which]
        special = {k: v for k, v in ids.items() if k not in ("bos_token_id", "eos_token_id")}
        cfg = dict(cfg, **special)
        if "text_config" in cfg:
            cfg["text_config"] = dict(cfg["text_config"], bos_token_id=ids["bos_token_id"],
                                      eos_token_id=ids["eos_token_id"])
        else:
            cfg.update(bos_token_id=ids["bos_token_id"], eos_token_id=ids["eos_token_id"])
        d = os.path.join(args.out, which)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
        for name in TOKENIZER_FILES:
            shutil.copy(os.path.join(TINY, name), d)
        with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
            json.dump({"do_resize": True, "resample": 3, "do_rescale": True,
                       "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": mean,
                       "image_std": std, "do_convert_rgb": True, "min_pixels": 3136,
                       "max_pixels": args.size * args.size, "patch_size": patch,
                       "temporal_patch_size": 2, "merge_size": 2,
                       "image_processor_type": "Qwen2VLImageProcessor"}, f, indent=2)
        write_random_safetensors(os.path.join(d, "model.safetensors"), tensor_shapes(cfg), seed=i)
        print(f"wrote {d}")


if __name__ == "__main__":
    main()

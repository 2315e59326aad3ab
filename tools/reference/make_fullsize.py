"""Random-weight checkpoints with the real PaliGemma 1 and PaliGemma 2 3B configs (224, 448 or 896 px).

For benchmarking only (`ocular bench`): the shapes, dtypes and file layout of the released
checkpoints (bf16, hub tensor names), random N(0, 0.02) weights. Never committed. The
tokenizer is the tiny one (bench feeds synthetic ids); the preprocessor is PaliGemma's.

Run: .venv/bin/python -m tools.reference.make_fullsize --out fullsize [--which pg1 pg2]
       [--image-size 224|448|896]
Writes ~5.9 GB (pg1) and ~6.1 GB (pg2) into OUT/pg1, OUT/pg2 (OUT/pg2-448, ... at other
sizes); streams tensor by tensor, so RAM stays ~1.5 GB. At 448 and 896 px only the SigLIP
position table (and the image token count) grows, as in the released -448/-896 checkpoints.
"""

import argparse
import json
import os
import shutil
import struct

import numpy as np
import torch

# config.json of google/paligemma-3b-pt-224 and google/paligemma2-3b-pt-224 (model facts:
# docs/models.md §1.1).
VISION = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
          "num_hidden_layers": 27, "num_attention_heads": 16, "patch_size": 14,
          "image_size": 224, "projection_dim": None, "vision_use_head": False}
CONFIGS = {
    "pg1": {"text": {"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384,
                     "num_hidden_layers": 18, "num_attention_heads": 8,
                     "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 257216}},
    "pg2": {"text": {"model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216,
                     "num_hidden_layers": 26, "num_attention_heads": 8,
                     "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 257216,
                     "query_pre_attn_scalar": 256, "sliding_window": 4096,
                     "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}},
}


def config_json(which, image_size=224):
    text = dict(CONFIGS[which]["text"])
    hidden = text["hidden_size"]
    vision = dict(VISION, projection_dim=hidden, image_size=image_size)
    return {"architectures": ["PaliGemmaForConditionalGeneration"], "model_type": "paligemma",
            "torch_dtype": "bfloat16", "image_token_index": 257152, "vocab_size": 257216,
            "projection_dim": hidden, "hidden_size": hidden, "bos_token_id": 2,
            "eos_token_id": 1, "pad_token_id": 0, "text_config": text,
            "vision_config": vision}


def tensor_shapes(cfg):
    """(hub name, shape) for every tensor, from transformers' own module tree (meta device)."""
    from transformers import PaliGemmaConfig, PaliGemmaForConditionalGeneration
    with torch.device("meta"):
        model = PaliGemmaForConditionalGeneration(PaliGemmaConfig(**cfg))
    return hub_shapes(model)


def hub_shapes(model):
    """(hub name, shape) of every tensor of a PaliGemma / Gemma 3 model but the tied lm_head."""
    out = []
    for name, t in model.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied to the embedding, as released
        # transformers >= 4.52 module names -> the hub's checkpoint names.
        name = name.replace("model.language_model.", "language_model.model.")
        name = name.replace("model.vision_tower.", "vision_tower.")
        name = name.replace("model.multi_modal_projector.", "multi_modal_projector.")
        out.append((name, tuple(t.shape)))
    return out


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
            norm = name.endswith("norm.weight") or "layernorm" in name or "layer_norm" in name
            x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * (0.1 if norm else 0.02)
            f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())  # truncate to bf16


def write_bench_tokenizer(d):
    """The tiny tokenizer without its <image> token: its id (2048) would contradict the 3B
    config's image_token_index (257152), which ocular refuses; bench feeds image tokens by id."""
    src = "testdata/tiny/tokenizer"
    with open(os.path.join(src, "tokenizer.json")) as f:
        tok = json.load(f)
    tok["added_tokens"] = [t for t in tok["added_tokens"] if t["content"] != "<image>"]
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(src, "tokenizer_config.json")) as f:
        cfg = json.load(f)
    cfg["added_tokens_decoder"] = {k: v for k, v in cfg.get("added_tokens_decoder", {}).items()
                                   if v["content"] != "<image>"}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="fullsize")
    ap.add_argument("--which", nargs="+", default=["pg1", "pg2"], choices=sorted(CONFIGS))
    ap.add_argument("--image-size", type=int, default=224, choices=[224, 448, 896])
    args = ap.parse_args()
    size = args.image_size
    for i, which in enumerate(args.which):
        d = os.path.join(args.out, which if size == 224 else f"{which}-{size}")
        os.makedirs(d, exist_ok=True)
        cfg = config_json(which, size)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
        for name in ("tokenizer.model", "special_tokens_map.json"):
            shutil.copy(os.path.join("testdata/tiny/tokenizer", name), d)
        write_bench_tokenizer(d)
        with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
            json.dump({"do_resize": True, "size": {"height": size, "width": size}, "resample": 3,
                       "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
                       "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                       "image_processor_type": "SiglipImageProcessor"}, f, indent=2)
        write_random_safetensors(os.path.join(d, "model.safetensors"), tensor_shapes(cfg), seed=i)
        print(f"wrote {d}")


if __name__ == "__main__":
    main()

"""A random-weight Llama 3.2 11B Vision, written straight into a quantized GGUF file.

For benchmarking only (`ocular bench`): the shapes of meta-llama/Llama-3.2-11B-Vision (text: 40
layers, 8 of them cross-attention at 3, 8, ..., 38, hidden 4096, MLP 14336, GQA 32/8, vocab
128256 + 8; vision: 32 local + 8 gated global layers, 1280 wide, 560-px tiles of 14-px
patches, up to 4 tiles), in ocular's GGUF naming (models/mllama/gguf_names.h) and with the
formats `ocular quantize --type TYPE` gives that checkpoint (docs/quantization.md): the image
path (vision tower, projector, cross-attention K/V projections) and the norms in bf16 as
released; the text matrices in q8_0, or llama.cpp's q4_k_m recipe (Q6_K for the output
projection and for attn_v / ffn_down in the layers use_more_bits picks, Q4_K elsewhere).

The bf16 checkpoint is 21 GB, more than this machine's disk and RAM hold next to its quantized
copy, so the file is written tensor by tensor (RAM stays ~1.5 GB) without the bf16 step: float
tensors are N(0, 0.02) values (as make_fullsize.py), quantized matrices are random blocks with
scales that give weights of about that size (random weights either way; speed does not depend
on the values). Never committed. The tokenizer is the tiny mllama one with its special tokens
moved to Llama 3's ids (bench feeds synthetic ids); the preprocessor is the 11B's.

Run: .venv/bin/python -m tools.reference.make_fullsize_mllama --type q8_0 --out F.gguf
Writes ~12.3 GB (q8_0) or ~7.4 GB (q4_k_m).
"""

import argparse
import json
import os

import numpy as np
import torch

import gguf

TINY = "testdata/tiny/mllama"
# Llama 3's special-token ids (tokenizer.json of meta-llama/Llama-3.2-11B-Vision).
SPECIAL_IDS = {"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001,
               "<|start_header_id|>": 128006, "<|end_header_id|>": 128007,
               "<|eot_id|>": 128009, "<|image|>": 128256}
VISION = dict(hidden_size=1280, hidden_act="gelu", num_hidden_layers=32, num_global_layers=8,
              attention_heads=16, num_channels=3, intermediate_size=5120, vision_output_dim=7680,
              image_size=560, patch_size=14, norm_eps=1e-5, max_num_tiles=4,
              intermediate_layers_indices=[3, 7, 15, 23, 30],
              supported_aspect_ratios=[[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1],
                                       [4, 1]])
TEXT = dict(vocab_size=128256, num_hidden_layers=40, hidden_size=4096, intermediate_size=14336,
            num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
            cross_attention_layers=[3, 8, 13, 18, 23, 28, 33, 38], rope_theta=500000.0,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
            max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=False,
            bos_token_id=128000, eos_token_id=128001, pad_token_id=128004)

# HF (legacy) -> GGUF names: the table of models/mllama/gguf_names.cc.
WHOLE = [
    ("language_model.model.embed_tokens.weight", "token_embd.weight"),
    ("language_model.model.norm.weight", "output_norm.weight"),
    ("language_model.lm_head.weight", "output.weight"),
    ("vision_model.patch_embedding.weight", "v.patch_embd.weight"),
    ("vision_model.class_embedding", "v.class_embd"),
    ("vision_model.gated_positional_embedding.tile_embedding.weight", "v.tile_position_embd.weight"),
    ("vision_model.gated_positional_embedding.embedding", "v.position_embd.weight"),
    ("vision_model.gated_positional_embedding.gate", "v.position_embd.gate"),
    ("vision_model.pre_tile_positional_embedding.embedding.weight", "v.pre_tile_position_embd.weight"),
    ("vision_model.pre_tile_positional_embedding.gate", "v.pre_tile_position_embd.gate"),
    ("vision_model.post_tile_positional_embedding.embedding.weight", "v.post_tile_position_embd.weight"),
    ("vision_model.post_tile_positional_embedding.gate", "v.post_tile_position_embd.gate"),
    ("vision_model.layernorm_pre.", "v.pre_ln."),
    ("vision_model.layernorm_post.", "v.post_ln."),
    ("multi_modal_projector.", "mm.0."),
]
TEXT_LAYER = [
    ("input_layernorm.weight", "attn_norm.weight"),
    ("post_attention_layernorm.weight", "ffn_norm.weight"),
    ("self_attn.q_proj.weight", "attn_q.weight"), ("self_attn.k_proj.weight", "attn_k.weight"),
    ("self_attn.v_proj.weight", "attn_v.weight"), ("self_attn.o_proj.weight", "attn_output.weight"),
    ("cross_attn.q_proj.weight", "cross_attn_q_proj.weight"),
    ("cross_attn.k_proj.weight", "cross_attn_k_proj.weight"),
    ("cross_attn.v_proj.weight", "cross_attn_v_proj.weight"),
    ("cross_attn.o_proj.weight", "cross_attn_o_proj.weight"),
    ("cross_attn.q_norm.weight", "cross_attn_q_norm.weight"),
    ("cross_attn.k_norm.weight", "cross_attn_k_norm.weight"),
    ("cross_attn_attn_gate", "cross_attn_attn_gate"), ("cross_attn_mlp_gate", "cross_attn_mlp_gate"),
    ("mlp.gate_proj.weight", "ffn_gate.weight"), ("mlp.up_proj.weight", "ffn_up.weight"),
    ("mlp.down_proj.weight", "ffn_down.weight"),
]
VISION_LAYER = [
    ("input_layernorm.", "attn_norm."), ("post_attention_layernorm.", "ffn_norm."),
    ("self_attn.q_proj.", "attn_q."), ("self_attn.k_proj.", "attn_k."),
    ("self_attn.v_proj.", "attn_v."), ("self_attn.o_proj.", "attn_output."),
    ("mlp.fc1.", "ffn_up."), ("mlp.fc2.", "ffn_down."), ("gate_attn", "attn_gate"),
    ("gate_ffn", "ffn_gate"),
]


def gguf_name(hf):
    for a, b in WHOLE:
        if hf.startswith(a):
            return b + hf[len(a):]
    for prefix, out, table in (("language_model.model.layers.", "blk.", TEXT_LAYER),
                               ("vision_model.global_transformer.layers.", "v.global.blk.", VISION_LAYER),
                               ("vision_model.transformer.layers.", "v.blk.", VISION_LAYER)):
        if hf.startswith(prefix):
            index, rest = hf[len(prefix):].split(".", 1)
            for a, b in table:
                if rest.startswith(a):
                    return f"{out}{index}.{b}{rest[len(a):]}"
    raise KeyError(hf)


def config():
    from transformers import MllamaConfig
    cfg = MllamaConfig(vision_config=VISION, text_config=TEXT, image_token_index=128256)
    d = cfg.to_dict()
    d["architectures"] = ["MllamaForConditionalGeneration"]
    d["torch_dtype"] = "bfloat16"
    return d


def tensor_shapes(cfg_dict):
    """(legacy HF name, shape) for every tensor, from transformers' module tree (meta device)."""
    from transformers import MllamaConfig, MllamaForConditionalGeneration
    with torch.device("meta"):
        model = MllamaForConditionalGeneration(MllamaConfig(**{
            k: v for k, v in cfg_dict.items() if k not in ("architectures", "torch_dtype")}))
    out = []
    for name, t in model.state_dict().items():
        name = name.replace("model.language_model.", "language_model.model.")
        name = name.replace("model.vision_model.", "vision_model.")
        name = name.replace("model.multi_modal_projector.", "multi_modal_projector.")
        name = name.replace("lm_head.", "language_model.lm_head.")
        out.append((name, tuple(t.shape)))
    return out


def use_more_bits(layer, n):  # llama.cpp llama-quant.cpp
    return layer < n // 8 or layer >= 7 * n // 8 or (layer - n // 8) % 3 == 2


def fmt(name, shape, qtype, n_layers):
    """The GGML type `ocular quantize --type qtype` writes for this tensor of the bf16 model."""
    Q = gguf.GGMLQuantizationType
    image_path = (name.startswith(("v.", "mm.")) or ".cross_attn_k_proj." in name
                  or ".cross_attn_v_proj." in name)
    if image_path or len(shape) != 2:  # outside the text matrices: stored as released
        return Q.BF16
    if qtype == "q8_0":
        return Q.Q8_0
    if name == "output.weight":
        return Q.Q6_K
    if (".attn_v." in name or ".ffn_down." in name) and use_more_bits(int(name.split(".")[1]), n_layers):
        return Q.Q6_K
    return Q.Q4_K


def random_blocks(rng, qt, rows, cols):
    """Random blocks of type qt for a [rows, cols] matrix, scaled to weights of std ~0.02."""
    Q = gguf.GGMLQuantizationType
    block, size = gguf.GGML_QUANT_SIZES[qt]
    nb = rows * cols // block
    b = np.frombuffer(bytearray(rng.bytes(nb * size)), dtype=np.uint8).reshape(nb, size)
    f16 = lambda x: np.frombuffer(np.float16(x).tobytes(), dtype=np.uint8)
    if qt == Q.Q8_0:      # d * q, q int8 (std ~74)
        b[:, 0:2] = f16(0.02 / 74)
    elif qt == Q.Q4_K:    # d * sc * q - dmin * m; sc, m 6-bit, q 4-bit
        b[:, 0:2] = f16(1.4e-4)
        b[:, 2:4] = f16(1.0e-3)
    elif qt == Q.Q6_K:    # d * sc * (q - 32); sc int8, q 6-bit
        b[:, 208:210] = f16(1.5e-5)
    else:
        raise ValueError(qt)
    return b.reshape(rows, cols // block * size)


def random_bf16(rng, shape, std):
    x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * std
    return (x.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(*shape[:-1], shape[-1] * 2)


def tokenizer_files():
    """The tiny mllama tokenizer with the special tokens at Llama 3's ids."""
    with open(os.path.join(TINY, "tokenizer.json")) as f:
        tok = json.load(f)
    for t in tok["added_tokens"]:
        t["id"] = SPECIAL_IDS[t["content"]]
    with open(os.path.join(TINY, "tokenizer_config.json")) as f:
        tc = json.load(f)
    tc["added_tokens_decoder"] = {str(SPECIAL_IDS[v["content"]]): v
                                  for v in tc["added_tokens_decoder"].values()}
    return {"tokenizer.json": json.dumps(tok, ensure_ascii=False),
            "tokenizer_config.json": json.dumps(tc, ensure_ascii=False, indent=2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--type", choices=["q8_0", "q4_k_m"], required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cfg = config()
    with open(os.path.join(TINY, "preprocessor_config.json")) as f:
        pre = json.load(f)
    pre["size"] = {"height": 560, "width": 560}
    files = {"config.json": json.dumps(cfg, indent=2, sort_keys=True),
             "preprocessor_config.json": json.dumps(pre, indent=2)}
    files.update(tokenizer_files())
    for name in ("special_tokens_map.json", "chat_template.jinja", "generation_config.json"):
        with open(os.path.join(TINY, name)) as f:
            files[name] = f.read()

    n_layers = TEXT["num_hidden_layers"]
    plan = []
    for hf, shape in tensor_shapes(cfg):
        name = gguf_name(hf)
        plan.append((name, shape, fmt(name, shape, args.type, n_layers)))

    w = gguf.GGUFWriter(args.out + ".partial", "mllama")
    w.add_name("llama-3.2-11b-vision-random")
    w.add_quantization_version(2)
    w.add_string("ocular.quantize.type", args.type)
    w.add_string("ocular.quantize.vision", "keep")
    for name, text in files.items():
        w.add_string("ocular.file." + name, text)
    Q = gguf.GGMLQuantizationType
    for name, shape, qt in plan:
        block, size = gguf.GGML_QUANT_SIZES[qt]
        row_bytes = shape[-1] // block * size
        nbytes = int(np.prod(shape[:-1], dtype=np.int64)) * row_bytes
        w.add_tensor_info(name, (*shape[:-1], row_bytes), np.dtype(np.uint8), nbytes, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(0)
    total = 0
    for i, (name, shape, qt) in enumerate(plan):
        if qt == Q.BF16:
            norm = name.endswith("norm.weight") or "_ln." in name
            data = random_bf16(rng, shape, 0.1 if norm else 0.02)
        else:
            data = random_blocks(rng, qt, shape[0], shape[1])
        w.write_tensor_data(data)
        total += data.nbytes
        if i % 50 == 0:
            print(f"{i}/{len(plan)} tensors, {total / 1e9:.2f} GB", flush=True)
    w.close()
    os.replace(args.out + ".partial", args.out)
    print(f"wrote {args.out}: {len(plan)} tensors, {total / 1e9:.2f} GB")


if __name__ == "__main__":
    main()

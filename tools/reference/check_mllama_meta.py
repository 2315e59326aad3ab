"""Checks the corrected reference against Meta's: the tiny mllama vision tower, run by
transformers with make_mllama.py's patch, equals llama-models' VisionEncoder
(llama3/multimodal/model.py, the code the checkpoints were trained with) on the same weights.

llama-models' multimodal code imports fairscale for tensor parallelism (and torchvision for its
own preprocessing); with one process the encoder needs none of it, so minimal stand-ins (plain
Linear layers, identity collectives, empty modules) are installed before the import. Weights are copied from the HF tiny checkpoint into Meta's
layout per image: Meta indexes tile embeddings by (tiles high, tiles wide), HF by aspect
ratio id, so the rows of the image's own arrangement are copied.

Run: .venv/bin/python -m tools.reference.check_mllama_meta   (make_mllama.py runs it too)
"""

import sys
import types

import torch
from torch import nn

TINY = "testdata/tiny/mllama"


def install_fairscale_stand_ins():
    if "fairscale" in sys.modules:
        return

    class Linear(nn.Module):
        def __init__(self, in_features, out_features, bias=True, **_):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(out_features, in_features))
            self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    init = types.ModuleType("fairscale.nn.model_parallel.initialize")
    init.get_model_parallel_world_size = lambda: 1
    init.get_model_parallel_rank = lambda: 0
    layers = types.ModuleType("fairscale.nn.model_parallel.layers")
    layers.ColumnParallelLinear = layers.RowParallelLinear = Linear
    layers.VocabParallelEmbedding = nn.Embedding
    names = ["fairscale", "fairscale.nn", "fairscale.nn.model_parallel"]
    for name in names:
        sys.modules[name] = types.ModuleType(name)
    sys.modules["fairscale.nn.model_parallel.initialize"] = init
    sys.modules["fairscale.nn.model_parallel.layers"] = layers
    sys.modules["fairscale.nn.model_parallel"].initialize = init
    sys.modules["fairscale.nn.model_parallel"].layers = layers
    # image_transform.py (Meta's preprocessing, not used here) imports torchvision.
    if "torchvision" not in sys.modules:
        tv = types.ModuleType("torchvision")
        tv.transforms = types.ModuleType("torchvision.transforms")
        tv.transforms.functional = types.ModuleType("torchvision.transforms.functional")
        sys.modules["torchvision"] = tv
        sys.modules["torchvision.transforms"] = tv.transforms
        sys.modules["torchvision.transforms.functional"] = tv.transforms.functional


def meta_encoder(hf_vision, cfg, ratio):
    """llama-models' VisionEncoder with the HF tower's weights, for images of `ratio`."""
    install_fairscale_stand_ins()
    from llama_models.llama3.multimodal import model as meta

    meta.reduce_from_tensor_model_parallel_region = lambda x: x
    meta.gather_from_tensor_model_parallel_region = lambda x: x
    v = cfg.vision_config
    enc = meta.VisionEncoder(
        max_num_tiles=v.max_num_tiles, image_size=v.image_size, patch_size=v.patch_size,
        width=v.hidden_size, layers=v.num_hidden_layers, heads=v.attention_heads,
        mlp_ratio=v.intermediate_size / v.hidden_size, n_global_layers=v.num_global_layers,
        global_model=True, return_intermediate=v.intermediate_layers_indices).eval()
    h, w = ratio
    rid = v.supported_aspect_ratios.index([h, w]) + 1
    T, D = v.max_num_tiles, v.hidden_size
    P = (v.image_size // v.patch_size) ** 2 + 1
    hf = hf_vision
    with torch.no_grad():
        enc.conv1._linear.weight.copy_(hf.patch_embedding.weight.reshape(D, -1))
        enc.class_embedding.copy_(hf.class_embedding)
        enc.positional_embedding.copy_(hf.gated_positional_embedding.embedding)
        enc.gated_positional_embedding_gate.copy_(hf.gated_positional_embedding.gate)
        tiles = hf.gated_positional_embedding.tile_embedding.weight[rid].reshape(T, P, D)
        enc.gated_positional_embedding[:h, :w].copy_(tiles[: h * w].reshape(h, w, P, D))
        for ours, theirs in ((enc.pre_tile_pos_embed, hf.pre_tile_positional_embedding),
                             (enc.post_tile_pos_embed, hf.post_tile_positional_embedding)):
            rows = theirs.embedding.weight[rid].reshape(T, 1, D)
            ours.embedding[:h, :w].copy_(rows[: h * w].reshape(h, w, 1, D))
            ours.gate.copy_(theirs.gate)
        for ours, theirs in ((enc.ln_pre, hf.layernorm_pre), (enc.ln_post, hf.layernorm_post)):
            ours.weight.copy_(theirs.weight)
            ours.bias.copy_(theirs.bias)
        for ours, theirs in ((enc.transformer, hf.transformer),
                             (enc.global_transformer, hf.global_transformer)):
            for a, b in zip(ours.resblocks, theirs.layers):
                for x, y in ((a.attn.wq, b.self_attn.q_proj), (a.attn.wk, b.self_attn.k_proj),
                             (a.attn.wv, b.self_attn.v_proj), (a.attn.wo, b.self_attn.o_proj)):
                    x.weight.copy_(y.weight)
                for x, y in ((a.ln_1, b.input_layernorm), (a.ln_2, b.post_attention_layernorm),
                             (a.mlp.c_fc, b.mlp.fc1), (a.mlp.c_proj, b.mlp.fc2)):
                    x.weight.copy_(y.weight)
                    x.bias.copy_(y.bias)
                if a.gated:
                    a.gate_attn.copy_(b.gate_attn)
                    a.gate_ffn.copy_(b.gate_ffn)
    return enc


@torch.no_grad()
def check(images=None):
    """Asserts Meta's encoder == the patched HF tower on each image (1-4 tiles); returns the
    largest relative difference. Patches transformers first (make_mllama.patch_reference)."""
    from transformers import AutoProcessor, MllamaForConditionalGeneration

    from tools.reference import make_mllama

    make_mllama.patch_reference()
    model = MllamaForConditionalGeneration.from_pretrained(
        TINY, dtype=torch.float32, attn_implementation="eager").eval()
    processor = AutoProcessor.from_pretrained(TINY)
    cfg = model.config
    worst = 0.0
    for name, image in (images or make_mllama.make_images()).items():
        px = processor.image_processor(images=[[image]], return_tensors="pt")
        hf = model.model.vision_model(pixel_values=px["pixel_values"],
                                      aspect_ratio_ids=px["aspect_ratio_ids"],
                                      aspect_ratio_mask=px["aspect_ratio_mask"]).last_hidden_state
        rid = int(px["aspect_ratio_ids"][0, 0])
        ratio = tuple(cfg.vision_config.supported_aspect_ratios[rid - 1])
        enc = meta_encoder(model.model.vision_model, cfg, ratio)
        ours = enc(px["pixel_values"], torch.tensor([list(ratio)]))
        tiles = ratio[0] * ratio[1]  # Meta leaves the padding tiles' rows unmasked otherwise
        a, b = ours[0, 0, :tiles], hf[0, 0, :tiles]
        rel = float((a - b).norm() / b.norm())
        print(f"llama-models: {name} ({ratio[0]}x{ratio[1]} tiles) rel diff {rel:.2e}")
        assert rel < 1e-5, f"{name}: the patched transformers tower differs from Meta's ({rel})"
        worst = max(worst, rel)
    return worst


if __name__ == "__main__":
    torch.set_num_threads(1)
    check()

"""Tiny random-init PaliGemma checkpoints in the exact Hugging Face layout.

Writes testdata/tiny/<name>/ with config.json, generation_config.json, model.safetensors,
the tiny tokenizer files and preprocessor_config.json (PaliGemmaProcessor.save_pretrained):
  pg1       PaliGemma 1: SigLIP 42px/14 (9 patches) + Gemma (MQA, 1 KV head)
  pg2       PaliGemma 2: SigLIP 56px/14 (16 patches) + Gemma 2 (GQA, sliding window 8,
            attention softcap 50, final softcap 30 in the config)
  pg2-bf16  the pg2 weights cast to bfloat16 (dtype bfloat16 in config.json)

Weights are random but scaled so every activation is O(1) and every detail matters:
zero-centred Gemma RMSNorm weights are N(0, 0.1) (a missing "1 +" is obvious), biases and
LayerNorm offsets are nonzero, Gemma 2 query/key weights are large enough that attention
scores reach the softcap, embeddings large enough that logits exceed 30 (so applying or not
applying the final softcap is visible). The sensitivity is measured in make_goldens.py.

Run: .venv/bin/python -m tools.reference.make_tiny [--out testdata/tiny]
"""

import argparse
import math
import os
import shutil
import tempfile

import torch

from tools.reference import common
from tools.reference.make_tokenizer import DEFAULT_OUT as TOKENIZER_DIR

TOKENIZER_FILES = ("tokenizer.model", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json")

# name -> (seed, vision overrides, text overrides). HF config field names throughout.
TINY = {
    "pg1": dict(
        seed=1,
        vision=dict(image_size=42, patch_size=14, hidden_size=48, num_attention_heads=4,
                    intermediate_size=72, num_hidden_layers=2),
        text=dict(model_type="gemma", hidden_size=40, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=20, intermediate_size=96,
                  num_hidden_layers=2),
        qk_gain=1.0,
    ),
    "pg2": dict(
        seed=2,
        vision=dict(image_size=56, patch_size=14, hidden_size=48, num_attention_heads=4,
                    intermediate_size=72, num_hidden_layers=2),
        text=dict(model_type="gemma2", hidden_size=48, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=24, query_pre_attn_scalar=20,
                  intermediate_size=96, num_hidden_layers=3, sliding_window=8,
                  attn_logit_softcapping=50.0, final_logit_softcapping=30.0),
        # q·k/sqrt(20) has std ~ (gain^2)*1.1: gain 2.5 puts the top scores near the cap.
        qk_gain=2.5,
    ),
}
BF16_VARIANTS = {"pg2-bf16": "pg2"}
# Tied embeddings make random models parrot their last input token (h ≈ E[t]·√H, logits =
# h·Eᵀ, and E[t]·E[t] is √H times larger than E[t]·E[j]). So text embeddings are small
# (inputs ≈ 0.2 rms, well below the ~1-per-sublayer layer contributions) and the final norm
# scale is large, like real Gemma's: logits have std ≈ √H·EMBED_STD·(1+w) ≈ 6 with maxima
# above 30, and greedy continuations vary.
EMBED_STD = 0.03
FINAL_NORM_MEAN = 30.0  # final RMSNorm weight w: y = x̂·(1 + w) ≈ 31·x̂


def load_tokenizer(tokenizer_dir=TOKENIZER_DIR):
    from transformers import GemmaTokenizerFast

    return GemmaTokenizerFast.from_pretrained(tokenizer_dir)


def build_config(spec, tokenizer):
    from transformers import PaliGemmaConfig

    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    vocab_size = (len(tokenizer) + 63) // 64 * 64  # HF pads the embedding table to 64 rows
    text = dict(spec["text"], vocab_size=vocab_size, rms_norm_eps=1e-6, rope_theta=10000.0,
                max_position_embeddings=8192, hidden_activation="gelu_pytorch_tanh",
                pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id)
    vision = dict(spec["vision"], model_type="siglip_vision_model", layer_norm_eps=1e-6,
                  hidden_act="gelu_pytorch_tanh", vision_use_head=False, num_channels=3)
    config = PaliGemmaConfig(
        vision_config=vision, text_config=text, image_token_index=image_token_id,
        vocab_size=vocab_size, projection_dim=text["hidden_size"],
        hidden_size=text["hidden_size"], pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    config._attn_implementation = "eager"
    return config


def init_weights(model, seed, qk_gain):
    """Deterministic O(1)-activation init, by parameter name (sorted for stable RNG order)."""
    gen = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=gen, dtype=torch.float32) * std + mean

    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "embed_tokens" in name:
                value = normal(p.shape, EMBED_STD)
            elif "position_embedding" in name:
                value = normal(p.shape, 0.5)
            elif name.endswith("language_model.norm.weight"):
                value = normal(p.shape, 0.1, mean=FINAL_NORM_MEAN)
            elif "language_model" in name and "norm" in name:
                value = normal(p.shape, 0.1)  # Gemma RMSNorm: y = x̂ · (1 + w)
            elif "layer_norm" in name or "post_layernorm" in name:
                # SigLIP LayerNorm: y = x̂ · w + b with w around 1.
                value = normal(p.shape, 0.1, mean=1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                value = normal(p.shape, 0.1)
            elif p.dim() >= 2:  # linear [out, in] and patch conv [out, 3, 14, 14]
                fan_in = p[0].numel()
                gain = qk_gain if ("language_model" in name and
                                   ("q_proj" in name or "k_proj" in name)) else 1.0
                value = normal(p.shape, gain / math.sqrt(fan_in))
            else:
                raise ValueError(f"no init rule for {name} {tuple(p.shape)}")
            p.copy_(value)
    model.tie_weights()


def make_processor(config, tokenizer):
    from transformers import PaliGemmaProcessor, SiglipImageProcessor

    size = config.vision_config.image_size
    image_processor = SiglipImageProcessor(
        do_resize=True, size={"height": size, "width": size}, resample=3,  # PIL BICUBIC
        do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    image_processor.image_seq_length = config.text_config.num_image_tokens
    return PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer)


def save_checkpoint(model, processor, out_dir):
    """save_pretrained into a temp dir, then copy the files (no stale files survive)."""
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        processor.save_pretrained(tmp)
        for name in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, name), "rb") as f:
                common.write_bytes(os.path.join(out_dir, name), f.read())
    # The tokenizer files are the committed tiny tokenizer, byte for byte.
    for name in TOKENIZER_FILES:
        shutil.copyfile(os.path.join(TOKENIZER_DIR, name), os.path.join(out_dir, name))


def make_tiny(out_root="testdata/tiny"):
    from transformers import PaliGemmaForConditionalGeneration

    tokenizer = load_tokenizer()
    models = {}
    for name, spec in TINY.items():
        config = build_config(spec, tokenizer)
        torch.manual_seed(spec["seed"])
        model = PaliGemmaForConditionalGeneration(config).eval()
        init_weights(model, spec["seed"], spec["qk_gain"])
        processor = make_processor(config, tokenizer)
        save_checkpoint(model, processor, os.path.join(out_root, name))
        models[name] = (model, processor)
        print(f"tiny: {name} {sum(p.numel() for p in model.parameters())} params")
    for name, src in BF16_VARIANTS.items():
        model, processor = models[src]
        bf16 = PaliGemmaForConditionalGeneration(model.config).eval()
        bf16.load_state_dict(model.state_dict())
        bf16 = bf16.to(torch.bfloat16)
        save_checkpoint(bf16, processor, os.path.join(out_root, name))
        print(f"tiny: {name} (bf16 of {src})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="testdata/tiny")
    args = parser.parse_args()
    common.set_determinism()
    make_tiny(args.out)


if __name__ == "__main__":
    main()

"""Golden activation dumps of the tiny checkpoints, from Hugging Face transformers.

For each tiny checkpoint (testdata/tiny/<ckpt>) × 3 images × 3 prompts, runs the HF
processor and model (eager attention, eval, no_grad; f32 checkpoints in f32, the bf16 one in
bf16 as a user would) and writes testdata/golden/<ckpt>/<case>.safetensors with the taps of
tools/reference/taps.py, plus testdata/golden/manifest.json. Self-checks, per case:
  * the manual KV-cache loop's tokens and logits equal model.generate(do_sample=False);
  * (f32) cached decode logits equal one full recomputation of prompt + generated tokens
    under the mask HF applies (rel err < 1e-5);
and, per checkpoint, sensitivities (how far a typical port bug moves the logits) are
measured and recorded in the manifest, so a reviewer can see the goldens catch them.
No text-only case: PaliGemmaProcessor raises without images (processing_paligemma.py).

Run: .venv/bin/python -m tools.reference.make_goldens
"""

import argparse
import json
import os
import shutil

import torch
from PIL import Image, ImageDraw

from tools.reference import common, taps as taps_lib

GOLDEN = "testdata/golden"
TINY = "testdata/tiny"
CHECKPOINTS = ("pg1", "pg2", "pg2-bf16")
NUM_GENERATED = 16
PROMPTS = {"caption": "caption en", "detect": "detect circle",
           "answer": "answer en what color is the square?"}


def make_images():
    """Three deterministic PIL images: RGB 60x40 scene, L 33x47, RGBA 50x50."""
    photo = Image.new("RGB", (60, 40))
    photo.putdata([(4 * x, 6 * y, 255 - 3 * x - 2 * y) for y in range(40) for x in range(60)])
    draw = ImageDraw.Draw(photo)
    draw.ellipse((6, 8, 24, 26), fill=(220, 30, 40))
    draw.rectangle((32, 6, 50, 22), fill=(30, 60, 210))
    draw.polygon([(30, 36), (44, 26), (56, 37)], fill=(40, 190, 60))

    gray = Image.new("L", (33, 47))
    gray.putdata([(7 * x + 3 * y) % 256 for y in range(47) for x in range(33)])
    ImageDraw.Draw(gray).ellipse((5, 10, 27, 36), fill=240, outline=10)

    rgba = Image.new("RGBA", (50, 50), (250, 250, 240, 0))
    draw = ImageDraw.Draw(rgba)
    draw.rectangle((5, 5, 30, 30), fill=(200, 20, 20, 255))
    draw.ellipse((20, 20, 45, 45), fill=(20, 20, 200, 128))
    draw.line((0, 49, 49, 0), fill=(0, 160, 0, 64), width=3)
    return {"photo": photo, "gray": gray, "rgba": rgba}


def prefix_lm_masks(config, prompt_len, total_len, dtype):
    """Additive masks HF applies to prompt + generated tokens, per attention type.

    Prompt block: bidirectional in every layer (PaliGemmaModel._update_causal_mask passes a
    4D mask, which Gemma 2 uses as is: no sliding window inside the prefill). Generated
    token i: sees the whole prompt and tokens <= i; in sliding layers only keys j > i - W
    (DynamicSlidingWindowLayer keeps the last W-1 keys, plus the current one).
    """
    i = torch.arange(total_len)[:, None]
    j = torch.arange(total_len)[None, :]
    allowed = (j < prompt_len) | (j <= i)
    allowed &= ~((i < prompt_len) & (j >= prompt_len))
    masks = {"full_attention": allowed}
    window = getattr(config, "sliding_window", None)
    if window is not None:
        masks["sliding_attention"] = allowed & ((i < prompt_len) | (j > i - window))
    neg = torch.finfo(dtype).min
    return {k: torch.where(v, 0.0, neg).to(dtype)[None, None] for k, v in masks.items()}


@torch.no_grad()
def full_recompute_logits(model, taps, mask_fn=prefix_lm_masks, position_offset=1):
    """Logits for prompt + generated[:-1] in one pass (no cache) under mask_fn's masks."""
    lm = model.model.language_model
    generated = taps["generated_ids"][:-1]
    embeds = torch.cat([taps["decoder.inputs_embeds"],
                        lm.embed_tokens(generated).to(torch.float32)])[None]
    prompt_len, total = taps["input_ids"].shape[0], embeds.shape[1]
    text_config = model.config.text_config
    masks = mask_fn(text_config, prompt_len, total, torch.float32)
    mask = masks if getattr(text_config, "layer_types", None) else masks["full_attention"]
    hidden = lm(inputs_embeds=embeds, attention_mask=mask, use_cache=False,
                position_ids=torch.arange(total)[None] + position_offset).last_hidden_state
    return model.lm_head(hidden)[0, prompt_len - 1:]


def rel_err(actual, expected):
    return float((actual - expected).norm() / expected.norm())


def check_case(model, inputs, taps, is_f32):
    """The self-checks of the module docstring; raises AssertionError on failure."""
    gen = model.generate(**inputs, max_new_tokens=NUM_GENERATED, do_sample=False,
                         output_logits=True, return_dict_in_generate=True)
    prompt_len = inputs["input_ids"].shape[1]
    hf_ids = gen.sequences[0, prompt_len:]
    ours = taps["generated_ids"][: hf_ids.shape[0]]
    assert torch.equal(hf_ids, ours), f"generate {hf_ids.tolist()} != manual {ours.tolist()}"
    # generate() computes the prefill lm_head for the last position only (logits_to_keep=1),
    # a different matmul shape: row 0 may differ in the last bits, later rows are identical.
    hf_logits = torch.stack([l[0] for l in gen.logits]).to(torch.float32)
    ours = taps["decode_logits"][: hf_logits.shape[0]]
    assert torch.equal(hf_logits[1:], ours[1:]), "generate's decode logits differ"
    err = rel_err(ours[0], hf_logits[0])
    assert err < (1e-6 if is_f32 else 1e-2), f"generate's first logits differ: {err:.3g}"
    if is_f32:
        err = rel_err(taps["decode_logits"], full_recompute_logits(model, taps))
        assert err < 1e-5, f"cached decode vs full recomputation: rel err {err:.3g}"
        return err
    return None


@torch.no_grad()
def sensitivities(model, inputs, taps):
    """Relative logit change caused by typical port bugs (recorded in the manifest)."""
    text_config = model.config.text_config
    golden = taps["decode_logits"]
    out = {"final_softcap_30_applied": rel_err(30 * torch.tanh(golden / 30), golden),
           "positions_0_indexed": rel_err(full_recompute_logits(model, taps,
                                                                position_offset=0), golden)}
    if getattr(text_config, "sliding_window", None):
        def no_window(config, p, t, dtype):
            m = prefix_lm_masks(config, p, t, dtype)
            return {k: m["full_attention"] for k in m}

        def window_in_prefill(config, p, t, dtype):
            m = prefix_lm_masks(config, p, t, dtype)
            i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
            m["sliding_attention"] = m["sliding_attention"].masked_fill(
                (j <= i - config.sliding_window)[None, None], torch.finfo(dtype).min)
            return m

        out["sliding_window_ignored"] = rel_err(
            full_recompute_logits(model, taps, mask_fn=no_window), golden)
        out["sliding_window_in_prefill"] = rel_err(
            full_recompute_logits(model, taps, mask_fn=window_in_prefill), golden)
    if getattr(text_config, "attn_logit_softcapping", None):
        layers = model.model.language_model.layers
        saved = text_config.attn_logit_softcapping
        for layer in layers:
            layer.self_attn.attn_logit_softcapping = None
        _, _, no_cap = taps_lib.greedy_decode(model, inputs, 1)
        for layer in layers:
            layer.self_attn.attn_logit_softcapping = saved
        out["attn_softcap_ignored"] = rel_err(no_cap[0], golden[0])
    return {k: float(f"{v:.4g}") for k, v in sorted(out.items())}


def config_summary(config):
    v, t = config.vision_config, config.text_config
    keys_t = ["model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
              "query_pre_attn_scalar", "sliding_window", "attn_logit_softcapping",
              "final_logit_softcapping"]
    keys_v = ["image_size", "patch_size", "hidden_size", "num_attention_heads",
              "intermediate_size", "num_hidden_layers"]
    return {"image_token_index": config.image_token_index,
            "num_image_tokens": t.num_image_tokens,
            "text": {k: getattr(t, k) for k in keys_t if getattr(t, k, None) is not None},
            "vision": {k: getattr(v, k) for k in keys_v}}


def make_goldens(out_root=GOLDEN):
    import safetensors
    import transformers

    if os.path.isdir(out_root):
        shutil.rmtree(out_root)
    images = make_images()
    manifest = {"versions": {"torch": torch.__version__.split("+")[0],
                             "transformers": transformers.__version__,
                             "safetensors": safetensors.__version__},
                "generated_tokens": NUM_GENERATED,
                "taps": taps_lib.TAP_MEANING, "checkpoints": {}, "images": {}}
    for name, image in images.items():
        path = os.path.join(out_root, "inputs", f"{name}.png")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        image.save(path, format="PNG")
        manifest["images"][name] = {"file": os.path.relpath(path, out_root), "mode": image.mode,
                                    "width": image.width, "height": image.height}

    for ckpt in CHECKPOINTS:
        model, processor, dtype = taps_lib.load_model(os.path.join(TINY, ckpt))
        is_f32 = dtype == torch.float32
        entry = {"dir": f"{TINY}/{ckpt}", "dtype": str(dtype).replace("torch.", ""),
                 "model_sha256": common.sha256_file(os.path.join(TINY, ckpt,
                                                                 "model.safetensors")),
                 "config": config_summary(model.config), "cases": {}}
        for image_name, image in images.items():
            for prompt_name, prompt in PROMPTS.items():
                case = f"{image_name}_{prompt_name}"
                inputs = taps_lib.make_inputs(processor, image, prompt)
                taps = taps_lib.trace(model, inputs, NUM_GENERATED)
                recompute_err = check_case(model, inputs, taps, is_f32)
                if is_f32 and case == "photo_answer":
                    entry["sensitivity"] = sensitivities(model, inputs, taps)
                file = os.path.join(out_root, ckpt, f"{case}.safetensors")
                os.makedirs(os.path.dirname(file), exist_ok=True)
                taps_lib.save_taps(taps, file, {"checkpoint": ckpt, "case": case,
                                                "prompt": prompt, "image": image_name})
                entry["cases"][case] = {
                    "file": os.path.relpath(file, out_root), "image": image_name,
                    "prompt": prompt,
                    "taps": {k: list(taps[k].shape) for k in taps_lib.tap_names(model.config)},
                    "generated_ids": taps["generated_ids"].tolist(),
                    "recompute_rel_err_below_1e-5": recompute_err is not None}
                print(f"golden: {ckpt}/{case} T={taps['input_ids'].shape[0]} "
                      f"gen={taps['generated_ids'].tolist()}")
        manifest["checkpoints"][ckpt] = entry
    with open(os.path.join(out_root, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=GOLDEN)
    args = parser.parse_args()
    common.set_determinism()
    make_goldens(args.out)


if __name__ == "__main__":
    main()

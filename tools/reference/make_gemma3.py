"""Tiny random-init Gemma 3 checkpoints and their goldens, from Hugging Face transformers.

Writes, in the exact HF layout (save_pretrained):
  testdata/tiny/gemma3-text       Gemma3ForCausalLM (model_type gemma3_text): 4 layers
                                  (sliding, full, sliding, full), sliding window 4 (shorter
                                  than every prompt), local RoPE base 100, global RoPE base
                                  1000 with linear rope_scaling (factor 4), q/k RMSNorm,
                                  query_pre_attn_scalar 20, final softcap 30, tied embedding
  testdata/tiny/gemma3-text-bf16  the same weights in bfloat16 (dtype bfloat16)
  testdata/tiny/gemma3            Gemma3ForConditionalGeneration (model_type gemma3):
                                  SigLIP 56px/14 (16 patches) avg-pooled to 4 tokens per image,
                                  mm_soft_emb_norm, mm_input_projection, a 4-layer text model
                                  with sliding window 3 (shorter than an image block)
and testdata/golden/gemma3*/<case>.safetensors with the taps of taps.py (eager attention; the
f32 checkpoints in f32, the bf16 one in bf16), each case self-checked against
model.generate(do_sample=False). The tokenizer is the tiny one (make_tokenizer.py) plus Gemma
3's special tokens (<start_of_turn>, <end_of_turn>, <start_of_image>, <end_of_image>,
<image_soft_token>) registered as boi/eoi/image tokens as Gemma 3's tokenizer_config does.
The pan-and-scan cases (pas_*) run the processor with do_pan_and_scan=True, and
testdata/golden/gemma3_pan_and_scan_grids.json holds transformers' crop grids for many sizes.
testdata/golden/{gemma3-text,gemma3}-softcap/ hold a config.json (the tiny one with both
softcaps set, SOFTCAP) and transformers' taps with it on the tiny weights: Gemma3Attention passes
no softcap to attention and Gemma3ForConditionalGeneration applies no final softcap (4.57.1);
the script asserts that applying the attention softcap would change the logits.

Run: .venv/bin/python -m tools.reference.make_gemma3
"""

import argparse
import contextlib
import json
import math
import os
import shutil
import tempfile

import torch

from tools.reference import common, taps as taps_lib
from tools.reference.make_goldens import make_images
from tools.reference.make_tokenizer import DEFAULT_OUT as TOKENIZER_DIR

TINY = "testdata/tiny"
GOLDEN = "testdata/golden"
NUM_GENERATED = 16
EMBED_STD = 0.03        # as make_tiny.py: small inputs, large final norm
FINAL_NORM_MEAN = 30.0
GEMMA3_SPECIAL = ["<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
                  "<image_soft_token>"]

TEXT = dict(hidden_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
            query_pre_attn_scalar=20, intermediate_size=96, num_hidden_layers=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention",
                         "full_attention"],
            sliding_window=4, rope_theta=1000.0, rope_local_base_freq=100.0,
            rope_scaling={"rope_type": "linear", "factor": 4.0},
            max_position_embeddings=512, rms_norm_eps=1e-6,
            hidden_activation="gelu_pytorch_tanh", attn_logit_softcapping=None,
            final_logit_softcapping=30.0)
VISION = dict(model_type="siglip_vision_model", image_size=56, patch_size=14, hidden_size=48,
              num_attention_heads=4, intermediate_size=72, num_hidden_layers=2,
              layer_norm_eps=1e-6, hidden_act="gelu_pytorch_tanh", vision_use_head=False,
              num_channels=3)
MM_TOKENS = 4

TEXT_PROMPTS = {"short": "caption en", "question": "answer en what color is the square?",
                "long": "detect circle ; square ; triangle and a red circle"}
# (images, prompt) per multimodal case: 1 and 3 images, text before/between/after them.
VISION_CASES = {
    "photo": (["photo"], "<start_of_image> caption en"),
    "gray_question": (["gray"], "what is this? <start_of_image> answer en"),
    "three": (["photo", "gray", "rgba"],
              "<start_of_image> <start_of_image> compare <start_of_image> them"),
    "text_only": ([], "answer en what color is the square?"),
}
# Pan-and-scan: the tiny checkpoint's preprocessor_config.json parameters (small crops, so the
# 60x40 photo gets 2 crops side by side, the 33x47 gray 2 stacked, the square rgba none), passed
# to the processor call with do_pan_and_scan=True (Gemma3Processor does not read them from the
# config; ocular does, docs/models.md §9).
PAN_AND_SCAN = dict(pan_and_scan_min_crop_size=16, pan_and_scan_max_num_crops=3,
                    pan_and_scan_min_ratio_to_activate=1.2)
PAN_AND_SCAN_CASES = {
    "pas_photo": (["photo"], "<start_of_image> caption en"),
    "pas_three": (["photo", "gray", "rgba"],
                  "<start_of_image> <start_of_image> compare <start_of_image> them"),
}
# Crop grids: (width, height, min_crop_size, max_num_crops, min_ratio) -> crops as
# transformers cuts them (make_pan_and_scan_crops): landscape, portrait, square, below the
# ratio, the max_num_crops clamp, the min_crop_size clamp, too small, a last crop cut short,
# half-up rounding, and a grid whose last crop would start past the edge (transformers slices
# an empty array; ocular refuses).
PAN_AND_SCAN_GRIDS = [
    (60, 40, 16, 3, 1.2), (33, 47, 16, 3, 1.2), (50, 50, 16, 3, 1.2), (59, 50, 16, 3, 1.2),
    (100, 20, 16, 3, 1.2), (1400, 280, 256, 4, 1.2), (900, 300, 256, 4, 1.2),
    (600, 240, 256, 4, 1.2), (1001, 400, 256, 4, 1.2), (400, 1001, 256, 4, 1.2),
    (896, 512, 256, 4, 1.2), (768, 300, 256, 4, 1.2), (1200, 480, 256, 4, 1.5),
    (25, 10, 5, 4, 1.2), (9, 2, 2, 4, 1.2), (640, 2000, 256, 4, 1.2), (300, 1200, 256, 8, 1.0),
]
PAN_AND_SCAN_GRID_FILE = os.path.join("testdata", "golden", "gemma3_pan_and_scan_grids.json")


def load_tokenizer():
    from transformers import GemmaTokenizerFast

    # add_bos_token as Gemma 3's tokenizer_config.json (the PaliGemma tiny one adds none).
    tok = GemmaTokenizerFast.from_pretrained(
        TOKENIZER_DIR, add_bos_token=True, extra_special_tokens={"boi_token": "<start_of_image>",
                                             "eoi_token": "<end_of_image>",
                                             "image_token": "<image_soft_token>"})
    tok.add_special_tokens({"additional_special_tokens": GEMMA3_SPECIAL},
                           replace_additional_special_tokens=False)
    # The official template of google/gemma-3-*-it (testdata/chat/README.md).
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "chat",
                           "gemma3-it.jinja"), newline="") as f:
        tok.chat_template = f.read()
    return tok


def text_config(tokenizer, **overrides):
    from transformers import Gemma3TextConfig

    vocab = (len(tokenizer) + 63) // 64 * 64
    cfg = Gemma3TextConfig(**dict(TEXT, **overrides), vocab_size=vocab,
                           pad_token_id=tokenizer.pad_token_id,
                           bos_token_id=tokenizer.bos_token_id,
                           eos_token_id=tokenizer.eos_token_id)
    cfg._attn_implementation = "eager"
    return cfg


def init_weights(model, seed):
    """O(1)-activation init by parameter name (sorted for a stable RNG order)."""
    gen = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=gen, dtype=torch.float32) * std + mean

    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "embed_tokens" in name:
                value = normal(p.shape, EMBED_STD)
            elif "position_embedding" in name:
                value = normal(p.shape, 0.5)
            elif name.endswith(("model.norm.weight", "language_model.norm.weight")):
                value = normal(p.shape, 0.1, mean=FINAL_NORM_MEAN)
            elif "layer_norm" in name or "post_layernorm" in name:  # SigLIP LayerNorm
                value = normal(p.shape, 0.1, mean=1.0 if name.endswith("weight") else 0.0)
            elif "norm" in name:  # Gemma RMSNorm (1 + w), q/k norms, mm_soft_emb_norm
                value = normal(p.shape, 0.1)
            elif name.endswith("bias"):
                value = normal(p.shape, 0.1)
            elif name.endswith("mm_input_projection_weight"):  # [D, H], used as x @ W
                value = normal(p.shape, 1 / math.sqrt(p.shape[0]))
            elif p.dim() >= 2:
                value = normal(p.shape, 1 / math.sqrt(p[0].numel()))
            else:
                raise ValueError(f"no init rule for {name} {tuple(p.shape)}")
            p.copy_(value)
    model.tie_weights()


def save(model, out_dir, tokenizer, processor=None):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        (processor or tokenizer).save_pretrained(tmp)
        for name in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, name), "rb") as f:
                common.write_bytes(os.path.join(out_dir, name), f.read())


def make_processor(config, tokenizer):
    from transformers import Gemma3ImageProcessor, Gemma3Processor

    size = config.vision_config.image_size
    image_processor = Gemma3ImageProcessor(
        do_resize=True, size={"height": size, "width": size}, resample=2,  # PIL BILINEAR
        do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], do_convert_rgb=True,
        do_pan_and_scan=False, **PAN_AND_SCAN)
    return Gemma3Processor(image_processor=image_processor, tokenizer=tokenizer,
                           image_seq_length=config.mm_tokens_per_image,
                           chat_template=tokenizer.chat_template)


def vlm_config(tokenizer, text):
    """Gemma3Config of the tiny VLM around the text config `text`."""
    from transformers import Gemma3Config

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in GEMMA3_SPECIAL}
    config = Gemma3Config(
        text_config=text.to_dict(), vision_config=VISION, mm_tokens_per_image=MM_TOKENS,
        boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"], pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    config._attn_implementation = "eager"
    return config


def make_tiny():
    from transformers import Gemma3ForCausalLM, Gemma3ForConditionalGeneration

    tokenizer = load_tokenizer()
    models = {}
    torch.manual_seed(3)
    text = Gemma3ForCausalLM(text_config(tokenizer)).eval()
    init_weights(text, 3)
    save(text, os.path.join(TINY, "gemma3-text"), tokenizer)
    models["gemma3-text"] = text
    bf16 = Gemma3ForCausalLM(text.config).eval()
    bf16.load_state_dict(text.state_dict())
    bf16 = bf16.to(torch.bfloat16)
    save(bf16, os.path.join(TINY, "gemma3-text-bf16"), tokenizer)

    config = vlm_config(tokenizer, text_config(tokenizer, sliding_window=3,
                                               final_logit_softcapping=None, rope_scaling=None))
    torch.manual_seed(4)
    vlm = Gemma3ForConditionalGeneration(config).eval()
    init_weights(vlm, 4)
    save(vlm, os.path.join(TINY, "gemma3"), tokenizer, make_processor(config, tokenizer))
    print("tiny: gemma3-text, gemma3-text-bf16, gemma3")


# ---- goldens -------------------------------------------------------------------------------

class Recorder(taps_lib.TapRecorder):
    """taps.py's recorder on Gemma 3's module tree (vision taps only for the VLM)."""

    def __init__(self, model):  # pylint: disable=super-init-not-called
        self.taps, self._active, self._handles = {}, False, []
        if hasattr(model.model, "vision_tower"):
            vision = model.model.vision_tower.vision_model
            self._hook(vision.embeddings, "vision.embeddings")
            for i, layer in enumerate(vision.encoder.layers):
                self._hook(layer, f"vision.layers.{i}")
            self._hook(vision.post_layernorm, "vision.post_layernorm")
            self._hook(model.model.multi_modal_projector, "projector")
            decoder = model.model.language_model
        else:
            decoder = model.model
        self._pre_hook(decoder.layers[0], "decoder.embed_scaled", kwarg="hidden_states")
        for i, layer in enumerate(decoder.layers):
            self._hook(layer, f"decoder.layers.{i}")
        self._hook(decoder.norm, "decoder.norm")


def tap_names(model):
    names = ["input_ids"]
    if hasattr(model.model, "vision_tower"):
        n = model.config.vision_config.num_hidden_layers
        names += ["vision.embeddings"] + [f"vision.layers.{i}" for i in range(n)]
        names += ["vision.post_layernorm", "projector"]
    n = model.config.get_text_config().num_hidden_layers
    names += ["decoder.embed_scaled"] + [f"decoder.layers.{i}" for i in range(n)]
    return names + ["decoder.norm", "logits", "generated_ids", "decode_logits"]


@torch.no_grad()
def trace(model, inputs):
    recorder = Recorder(model)
    try:
        out, generated, decode_logits = taps_lib.greedy_decode(model, inputs, NUM_GENERATED,
                                                               recorder)
        taps = dict(recorder.taps)
    finally:
        recorder.remove()
    if "pixel_values" in inputs:
        taps["pixel_values"] = inputs["pixel_values"].to(torch.float32).clone()
    else:  # text-only: no vision pass happened
        for k in [k for k in taps if k.startswith(("vision.", "projector"))]:
            del taps[k]
    taps["input_ids"] = inputs["input_ids"][0].to(torch.int64).clone()
    taps["logits"] = out.logits[0].to(torch.float32).clone()
    taps["generated_ids"] = generated
    taps["decode_logits"] = decode_logits.to(torch.float32).clone()
    return taps


def check_generate(model, inputs, taps):
    gen = model.generate(**inputs, max_new_tokens=NUM_GENERATED, do_sample=False,
                         return_dict_in_generate=True)
    hf_ids = gen.sequences[0, inputs["input_ids"].shape[1]:]
    ours = taps["generated_ids"][: hf_ids.shape[0]]
    assert torch.equal(hf_ids, ours), f"generate {hf_ids.tolist()} != manual {ours.tolist()}"


def golden_cases(name, model, tokenizer, processor, images):
    if processor is None:
        for case, prompt in TEXT_PROMPTS.items():
            yield case, prompt, [], tokenizer(prompt, return_tensors="pt")
        return
    for case, (names, prompt) in VISION_CASES.items():
        kwargs = dict(images=[[images[n] for n in names]]) if names else {}
        yield case, prompt, names, processor(text=[prompt], return_tensors="pt", **kwargs)
    for case, (names, prompt) in PAN_AND_SCAN_CASES.items():
        yield case, prompt, names, processor(text=[prompt], images=[[images[n] for n in names]],
                                             return_tensors="pt", do_pan_and_scan=True,
                                             **PAN_AND_SCAN)


def make_pan_and_scan_grids():
    """Gemma3ImageProcessor.pan_and_scan on images whose pixels are their own coordinates, so
    each crop's first pixel gives its position: [[x, y, width, height], ...] per grid, or
    "empty" where transformers slices an empty crop."""
    import numpy as np
    from transformers import Gemma3ImageProcessor
    from transformers.image_utils import ChannelDimension

    out = []
    for w, h, min_crop, max_crops, ratio in PAN_AND_SCAN_GRIDS:
        y, x = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        yx = np.stack([y, x, np.zeros_like(y)], axis=-1)  # 3 channels: get_image_size infers
        crops = Gemma3ImageProcessor().pan_and_scan(
            yx.astype(np.int32), pan_and_scan_min_crop_size=min_crop,
            pan_and_scan_max_num_crops=max_crops, pan_and_scan_min_ratio_to_activate=ratio,
            input_data_format=ChannelDimension.LAST)
        rects = ("empty" if any(c.size == 0 for c in crops) else
                 [[int(c[0, 0, 1]), int(c[0, 0, 0]), c.shape[1], c.shape[0]] for c in crops])
        out.append({"width": w, "height": h, "min_crop_size": min_crop,
                    "max_num_crops": max_crops, "min_ratio_to_activate": ratio, "crops": rects})
    common.write_bytes(PAN_AND_SCAN_GRID_FILE,
                       (json.dumps(out, indent=1) + "\n").encode())
    print(f"pan-and-scan grids: {len(out)} -> {PAN_AND_SCAN_GRID_FILE}")


def make_goldens():
    from transformers import AutoProcessor, Gemma3ForCausalLM, Gemma3ForConditionalGeneration

    images = make_images()
    for name, cls, dtype in (("gemma3-text", Gemma3ForCausalLM, torch.float32),
                             ("gemma3-text-bf16", Gemma3ForCausalLM, torch.bfloat16),
                             ("gemma3", Gemma3ForConditionalGeneration, torch.float32)):
        path = os.path.join(TINY, name)
        model = cls.from_pretrained(path, dtype=dtype, attn_implementation="eager").eval()
        tokenizer = load_tokenizer()
        processor = (AutoProcessor.from_pretrained(path, use_fast=False)
                     if cls is Gemma3ForConditionalGeneration else None)
        out_dir = os.path.join(GOLDEN, name)
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        for case, prompt, image_names, inputs in golden_cases(name, model, tokenizer, processor,
                                                              images):
            inputs = {k: v for k, v in inputs.items() if k != "attention_mask"}
            taps = trace(model, inputs)
            check_generate(model, inputs, taps)
            missing = set(tap_names(model)) - set(taps)
            if not image_names:
                missing -= {n for n in missing if n.startswith(("vision.", "projector"))}
            assert not missing, f"taps not recorded: {sorted(missing)}"
            file = os.path.join(out_dir, f"{case}.safetensors")
            os.makedirs(out_dir, exist_ok=True)
            meta = {"checkpoint": name, "case": case, "prompt": prompt,
                    "images": ",".join(image_names)}
            if case in PAN_AND_SCAN_CASES:
                meta["pan_and_scan"] = "1"
            taps_lib.save_taps(taps, file, meta)
            print(f"golden: {name}/{case} T={taps['input_ids'].shape[0]} "
                  f"gen={taps['generated_ids'].tolist()}")


# A small attention cap, so that applying it would change every logit; the VLM's final cap too
# (transformers ignores it). gemma3-text keeps its final cap of 30, which Gemma3ForCausalLM
# applies: a cap of 2 saturates tanh, and greedy decoding then turns on float ties.
SOFTCAP = {"gemma3-text": {"attn_logit_softcapping": 1.0, "final_logit_softcapping": 30.0},
           "gemma3": {"attn_logit_softcapping": 1.0, "final_logit_softcapping": 2.0}}
SOFTCAP_CASES = {"gemma3-text": ["short"], "gemma3": ["photo", "text_only"]}


def make_softcap_goldens():
    """The tiny weights under a config.json with both softcaps set (SOFTCAP)."""
    from transformers import AutoConfig, Gemma3ForCausalLM, Gemma3ForConditionalGeneration

    images = make_images()
    for name, cls in (("gemma3-text", Gemma3ForCausalLM),
                      ("gemma3", Gemma3ForConditionalGeneration)):
        path = os.path.join(TINY, name)
        config = AutoConfig.from_pretrained(path)
        for key, value in SOFTCAP[name].items():
            setattr(config.get_text_config(), key, value)
        model = cls.from_pretrained(path, config=config, dtype=torch.float32,
                                    attn_implementation="eager").eval()
        processor = None
        if cls is Gemma3ForConditionalGeneration:
            from transformers import AutoProcessor
            processor = AutoProcessor.from_pretrained(path, use_fast=False)
        out_dir = os.path.join(GOLDEN, f"{name}-softcap")
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.makedirs(out_dir)
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json"), "rb") as f:
                common.write_bytes(os.path.join(out_dir, "config.json"), f.read())
        for case, prompt, image_names, inputs in golden_cases(name, model, load_tokenizer(),
                                                              processor, images):
            if case not in SOFTCAP_CASES[name]:
                continue
            inputs = {k: v for k, v in inputs.items() if k != "attention_mask"}
            taps = trace(model, inputs)
            check_generate(model, inputs, taps)
            with torch.no_grad():  # the kwarg reaches eager_attention_forward
                capped = model(**inputs, softcap=SOFTCAP[name]["attn_logit_softcapping"]).logits[0]
            change = ((capped - taps["logits"]).abs().max() / taps["logits"].abs().max()).item()
            assert change > 1e-2, f"{name}/{case}: the attention softcap changes logits {change}"
            taps_lib.save_taps(taps, os.path.join(out_dir, f"{case}.safetensors"),
                               {"checkpoint": f"{name}-softcap", "case": case, "prompt": prompt,
                                "images": ",".join(image_names)})
            print(f"golden: {name}-softcap/{case} (an attention softcap would change the "
                  f"logits by {change:.2f} relative)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-tiny", action="store_true", help="goldens only")
    args = parser.parse_args(argv)
    common.set_determinism()
    if not args.no_tiny:
        make_tiny()
    make_goldens()
    make_softcap_goldens()
    make_pan_and_scan_grids()


if __name__ == "__main__":
    main()

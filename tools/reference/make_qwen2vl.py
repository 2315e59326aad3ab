"""Tiny random-init Qwen2-VL and Qwen2.5-VL checkpoints, their goldens and a pixel fixture.

Writes, in the HF layout of Qwen/Qwen2-VL-7B-Instruct (save_pretrained):
  testdata/tiny/qwen2vl     Qwen2VLForConditionalGeneration: a 2-block ViT (embed_dim 48,
                            4 heads of 12, QuickGELU MLP 96, 14-px patches, temporal patch 2,
                            2x2 merge) and a 3-layer Qwen2 decoder (hidden 48, GQA 4/2, head_dim
                            12, q/k/v biases, SwiGLU 80) with M-RoPE mrope_section [1, 2, 3]
                            (uneven, so every axis owns a different number of frequencies), an
                            untied lm_head and vocab_size past the tokenizer's last id;
                            preprocessor min_pixels 56*56, max_pixels 28*28*12 (small images
                            scale up, larger ones down)
  testdata/tiny/qwen25vl    Qwen2_5_VLForConditionalGeneration: a 3-block ViT (hidden 48,
                            4 heads, RMSNorm + SwiGLU MLP 64 with biases, RMSNorm merger) with
                            window attention (window_size 56: windows of 2x2 merged patches,
                            which the 3-wide and 5-wide merged grids split unevenly; block 1
                            full attention), the same decoder with tied embeddings; max_pixels
                            28*28*20 so the images have several windows
  testdata/tiny/qwen2vl-bf16, qwen25vl-bf16   the same weights in bfloat16 (goldens run in
                            bfloat16, as a user runs the released checkpoints)
  testdata/golden/qwen2vl*/<case>.safetensors  the taps below, self-checked against
                            model.generate(do_sample=False)
  testdata/golden/qwen2vl-pixels.safetensors   Qwen2VLImageProcessor (the PIL one) on the
                            synthetic PNGs of testdata/golden/qwen2vl-pixels/ (odd sizes; RGB,
                            grey and palette files), with 4-px patches so the file stays small:
                            pixel_values and image_grid_thw of each

Taps (batch dimension dropped; N = patches of all images, M = N / merge^2 feature rows):
  input_ids [T] (I64)      pixel_values [N, 3*2*14*14]      image_grid_thw [n, 3] (I64)
  position_ids [3, T] (I64)  rope_deltas [1] (I64)          get_rope_index
  vision.embeddings [N, D]   visual.patch_embed (patch rows in the processor's order)
  vision.layers.{i} [N, D]   visual.blocks[i] (Qwen2.5-VL: rows in window order)
  projector [M, H]           visual.merger (Qwen2.5-VL: before the inverse window permutation)
  (the stage names ocular's parity report orders, runtime/parity.cc)
  decoder.inputs_embeds [T, H] (image rows replaced)        decoder.layers.{i} [T, H]
  decoder.norm [T, H]  logits [T, V]  generated_ids [G] (I64)  decode_logits [G, V]

Reference: transformers 4.57.1 models/qwen2_vl/modeling_qwen2_vl.py, image_processing_qwen2_vl.py,
processing_qwen2_vl.py (eager attention, float32).

Run: .venv/bin/python -m tools.reference.make_qwen2vl
"""

import argparse
import math
import os
import shutil
import tempfile

import numpy as np
import torch
from PIL import Image

from tools.reference import common, taps as taps_lib

TINY = "testdata/tiny"
GOLDEN = "testdata/golden"
INPUTS = os.path.join(GOLDEN, "inputs")
NUM_GENERATED = 32
CORPUS = os.path.join(os.path.dirname(__file__), "corpus.txt")
# Qwen2's pre-tokenizer split (tokenizer.json of Qwen/Qwen2-VL-7B-Instruct): single digits.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                 r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|image_pad|>", "<|video_pad|>"]
MEAN = [0.48145466, 0.4578275, 0.40821073]  # OPENAI_CLIP_MEAN, as Qwen2-VL's preprocessor_config
STD = [0.26862954, 0.26130258, 0.27577711]
MIN_PIXELS = 56 * 56
MAX_PIXELS = 28 * 28 * 12

VISION = dict(depth=2, embed_dim=48, hidden_size=48, hidden_act="quick_gelu", mlp_ratio=2,
              num_heads=4, in_channels=3, patch_size=14, spatial_merge_size=2,
              temporal_patch_size=2)
TEXT = dict(hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, hidden_act="silu", max_position_embeddings=512,
            rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
            use_sliding_window=False, rope_scaling={"type": "mrope", "mrope_section": [1, 2, 3]})

VISION_25 = dict(depth=3, hidden_size=48, intermediate_size=64, hidden_act="silu", num_heads=4,
                 in_channels=3, patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
                 window_size=56, out_hidden_size=48, fullatt_block_indexes=[1])
TEXT_25 = dict(TEXT, tie_word_embeddings=True)
MAX_PIXELS_25 = 28 * 28 * 20

# (images, prompt) per case: an image whose sides are not multiples of 28 (60x40 -> 84x56),
# two images with text before, between and after them, a grey image, text only.
VISION_TAG = "<|vision_start|><|image_pad|><|vision_end|>"
CASES = {
    "one": (["photo"], VISION_TAG + "describe this picture"),
    "two": (["photo", "gray"], "look " + VISION_TAG + " and " + VISION_TAG + " what differs?"),
    "gray": (["gray"], "what is this? " + VISION_TAG),
    "text_only": ([], "what color is the square?"),
    # A palette PNG (the pixel fixture's) of 120x90 -> 112x84: a merged grid of 3x4, windows of
    # 2x2 and 1x2 in Qwen2.5-VL.
    "palette": (["qwen2vl-pixels/120x90s23P"], VISION_TAG + "describe"),
    # A chat turn (`ocular run --chat`): one user message of the image then this text, rendered
    # with the checkpoint's chat template (chat_prompt).
    "chat": (["photo"], "describe this picture"),
    # Transparent inputs (make_alpha_fixtures.py): an RGBA PNG with alpha from 0 to 255 and
    # colour under its transparent pixels, and a palette PNG with one transparent index.
    # convert_to_rgb is image.convert("RGB"): alpha and tRNS are dropped, never composited.
    "rgba": (["alpha/rgba"], VISION_TAG + "what is drawn here?"),
    "palette_trns": (["alpha/p_index"], "what is this? " + VISION_TAG),
}
CHAT_CASES = ("chat",)
# `ocular run --min-pixels 6272 --max-pixels 9408` (vLLM's mm_processor_kwargs): the processor
# called with min_pixels= / max_pixels=; photo (60x40) is scaled up to 112x84. Qwen2.5-VL only
# (its boxes are in pixels of the resized image): case -> (images, prompt, min, max).
RESIZE_CASES = {"resized": (["photo"], VISION_TAG + "describe this picture", 28 * 28 * 8,
                            28 * 28 * 12)}
# The released chat templates (testdata/chat/README.md says where each comes from): Qwen2-VL-
# and Qwen2.5-VL-Instruct carry the same one.
CHAT = os.path.join("testdata", "chat")
CHAT_TEMPLATES = {"qwen2vl": "qwen2-vl-instruct.jinja", "qwen25vl": "qwen2-vl-instruct.jinja",
                  "qwen3vl": "qwen3-vl-instruct.jinja"}

# Sizes for the pixel fixture (width, height): up- and downscaled, sides around multiples of
# the factor, extreme aspect ratios, grey and palette modes. No side of 1 or 3 pixels: transformers
# then guesses the array channels-first (infer_channel_dimension_format) and fails.
PIXEL_PATCH = 4
PIXEL_MIN = 8 * 8 * 4
PIXEL_MAX = 8 * 8 * 24
PIXEL_SIZES = [(2, 2), (5, 7), (8, 8), (9, 9), (15, 17), (16, 16), (17, 15), (20, 20), (23, 41),
               (24, 40), (25, 39), (31, 33), (33, 31), (40, 60), (60, 40), (47, 33), (33, 47),
               (64, 64), (65, 63), (80, 10), (10, 80), (100, 7), (7, 100), (120, 90), (90, 120),
               (50, 4), (4, 50), (39, 39), (41, 41), (55, 29), (29, 55), (72, 18), (18, 72),
               (130, 98), (13, 200), (96, 96)]
PIXEL_MODES = ["RGB", "L", "P"]
PIXEL_DIR = os.path.join(GOLDEN, "qwen2vl-pixels")
# More sources after those (key <w>x<h>s<k><kind>, k counting on): alpha (RGBA, LA, a palette
# with tRNS), CMYK JPEG, 16-bit grey ("I;16") and 16-bit RGB PNGs, 1-bit, and EXIF orientation 6
# in a PNG and a JPEG (Image.open does not apply it, nor does the processor).
PIXEL_EXTRA = [(33, 21, "RGBA"), (50, 70, "RGBA"), (27, 45, "LA"), (61, 38, "PA"),
               (44, 30, "CMYK"), (36, 52, "I16"), (29, 40, "RGB16"), (41, 25, "BW"),
               (38, 26, "EXIFPNG"), (46, 34, "EXIFJPG")]
# `ocular run --min-pixels / --max-pixels` (vLLM's mm_processor_kwargs): the processor called
# with min_pixels= / max_pixels= on some of those images (taps <key>/<resize>/...). Each pair:
# both bounds set (a narrow band), max only (below the default), both above the defaults.
PIXEL_RESIZES = [(8 * 8 * 10, 8 * 8 * 16), (None, 8 * 8 * 6), (8 * 8 * 30, 8 * 8 * 60)]
PIXEL_RESIZE_KEYS = ["2x2s0RGB", "23x41s8P", "130x98s33RGB", "13x200s34L", "50x70s37RGBA"]


def synthetic(width, height, seed, mode="RGB"):
    """make_mllama.py's pattern, in a mode (saved as PNG files for the C++ test)."""
    a = np.zeros((height, width, 3), dtype=np.uint8)
    for y in range(height):
        for x in range(width):
            for c in range(3):
                a[y, x, c] = (x * (7 + c) + y * (13 + 2 * c) + seed * 31 + (x * y) % (17 + c)) % 256
    image = Image.fromarray(a)
    if mode == "L":
        return image.convert("L")
    if mode == "P":  # a palette image: quantized colours, a palette PNG when saved
        return image.quantize(colors=16, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    return image


def load_tokenizer():
    """A tiny byte-level BPE with Qwen2's pre-tokenizer and Qwen2-VL's special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2TokenizerFast

    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([CORPUS], trainer)
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    with tempfile.TemporaryDirectory() as tmp:  # Qwen2VLProcessor wants a Qwen2 tokenizer class
        fast.save_pretrained(tmp)
        return Qwen2TokenizerFast.from_pretrained(tmp, eos_token="<|im_end|>",
                                                  pad_token="<|endoftext|>", bos_token=None,
                                                  unk_token=None)


def make_processor(tokenizer, patch_size=14, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS,
                   qwen25=False):
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    image_processor = Qwen2VLImageProcessor(
        do_resize=True, resample=3, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
        image_mean=MEAN, image_std=STD, do_convert_rgb=True, min_pixels=min_pixels,
        max_pixels=max_pixels, patch_size=patch_size, temporal_patch_size=2, merge_size=2)
    cls = Qwen2_5_VLProcessor if qwen25 else Qwen2VLProcessor
    return cls(image_processor=image_processor, tokenizer=tokenizer,
               video_processor=Qwen2VLVideoProcessor())


def make_config(tokenizer, qwen25=False):
    from transformers import Qwen2_5_VLConfig, Qwen2VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    vocab = (len(tokenizer) + 63) // 64 * 64 + 16  # past the tokenizer, as the real 151936
    text = dict(TEXT_25 if qwen25 else TEXT, vocab_size=vocab, bos_token_id=ids["<|endoftext|>"],
                eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    cls = Qwen2_5_VLConfig if qwen25 else Qwen2VLConfig
    cfg = cls(text_config=text, vision_config=VISION_25 if qwen25 else VISION,
              image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
              vision_start_token_id=ids["<|vision_start|>"],
              vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=qwen25)
    cfg._attn_implementation = "eager"
    return cfg


def init_weights(model, seed, embed_std=1.0):
    """O(1)-activation init by parameter name (sorted for a stable RNG order). A tied checkpoint
    gets smaller embeddings: else each token's own row dominates its logits (it repeats)."""
    gen = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=gen, dtype=torch.float32) * std + mean

    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "embed_tokens" in name:
                value = normal(p.shape, embed_std)
            elif name.endswith("language_model.norm.weight"):
                value = normal(p.shape, 0.1, mean=4.0)
            elif ("norm" in name or "ln_q" in name) and name.endswith("bias"):
                value = normal(p.shape, 0.1)
            elif "norm" in name or "ln_q" in name:  # LayerNorm and RMSNorm weights
                value = normal(p.shape, 0.1, mean=1.0)
            elif name.endswith("bias"):
                value = normal(p.shape, 0.1)
            elif p.dim() >= 2:
                value = normal(p.shape, 1 / math.sqrt(p[0].numel()))
            else:
                raise ValueError(f"no init rule for {name} {tuple(p.shape)}")
            p.copy_(value)


def write_chat_template(out_dir):
    """The released template of the checkpoint's family as chat_template.jinja (where
    transformers 4.57's processors read it, ProcessorMixin.from_pretrained)."""
    family = os.path.basename(out_dir).split("-")[0]
    with open(os.path.join(CHAT, CHAT_TEMPLATES[family]), "rb") as f:
        common.write_bytes(os.path.join(out_dir, "chat_template.jinja"), f.read())


def chat_prompt(processor, n_images, text):
    """processor.apply_chat_template as ocular's --chat builds the turn: the images, then the
    text, in one user message, with the generation prompt."""
    content = [{"type": "image"} for _ in range(n_images)] + [{"type": "text", "text": text}]
    return processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                         add_generation_prompt=True)


def save(model, out_dir, processor):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        processor.save_pretrained(tmp)
        for name in sorted(os.listdir(tmp)):
            if name in ("video_preprocessor_config.json", "chat_template.jinja"):
                continue  # videos are not ocular's; the chat template is written below
            with open(os.path.join(tmp, name), "rb") as f:
                common.write_bytes(os.path.join(out_dir, name), f.read())
    write_chat_template(out_dir)


def model_class(name):
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen2VLForConditionalGeneration

    return (Qwen2_5_VLForConditionalGeneration if name.startswith("qwen25vl")
            else Qwen2VLForConditionalGeneration)


def make_tiny():
    tokenizer = load_tokenizer()
    for seed, name in ((21, "qwen2vl"), (22, "qwen25vl")):
        qwen25 = name == "qwen25vl"
        torch.manual_seed(seed)
        model = model_class(name)(make_config(tokenizer, qwen25)).eval()
        init_weights(model, seed, embed_std=0.1 if qwen25 else 1.0)
        processor = make_processor(tokenizer, max_pixels=MAX_PIXELS_25 if qwen25 else MAX_PIXELS,
                                   qwen25=qwen25)
        save(model, os.path.join(TINY, name), processor)
        print(f"tiny: {name}")
        save(model.to(torch.bfloat16), os.path.join(TINY, name + "-bf16"), processor)
        print(f"tiny: {name}-bf16")


# ---- goldens --------------------------------------------------------------------------------

class Recorder(taps_lib.TapRecorder):
    """Hooks on the Qwen2-VL module tree; records the first call of each module only."""

    def __init__(self, model):  # pylint: disable=super-init-not-called
        self.taps, self._active, self._handles = {}, False, []
        visual = model.model.visual
        self._hook(visual.patch_embed, "vision.embeddings")
        for i, block in enumerate(visual.blocks):
            self._hook(block, f"vision.layers.{i}")
        self._hook(visual.merger, "projector")
        decoder = model.model.language_model
        self._pre_hook(decoder.layers[0], "decoder.inputs_embeds", kwarg="hidden_states")
        for i, layer in enumerate(decoder.layers):
            self._hook(layer, f"decoder.layers.{i}")
        self._hook(decoder.norm, "decoder.norm")

    def _store(self, name, tensor):
        if not self._active or name in self.taps:
            return
        t = tensor.detach()
        if name.startswith("decoder."):
            t = t[0]  # the (single) prompt
        self.taps[name] = t.to(torch.float32).clone()


@torch.no_grad()
def trace(model, inputs):
    recorder = Recorder(model)
    try:
        out, generated, decode_logits = taps_lib.greedy_decode(model, inputs, NUM_GENERATED,
                                                               recorder)
        taps = dict(recorder.taps)
    finally:
        recorder.remove()
    position_ids, deltas = model.model.get_rope_index(inputs["input_ids"],
                                                      inputs.get("image_grid_thw"), None, None)
    if "pixel_values" in inputs:
        taps["pixel_values"] = inputs["pixel_values"].to(torch.float32).clone()
        taps["image_grid_thw"] = inputs["image_grid_thw"].to(torch.int64).clone()
    taps["input_ids"] = inputs["input_ids"][0].to(torch.int64).clone()
    taps["position_ids"] = position_ids[:, 0].to(torch.int64).clone()
    taps["rope_deltas"] = deltas[0].to(torch.int64).clone()
    taps["logits"] = out.logits[0].to(torch.float32).clone()
    taps["generated_ids"] = generated
    taps["decode_logits"] = decode_logits.to(torch.float32).clone()
    return taps


def check_generate(model, inputs, taps):
    model.generation_config.eos_token_id = None  # never stop early: NUM_GENERATED tokens
    gen = model.generate(**inputs, max_new_tokens=NUM_GENERATED, do_sample=False,
                         return_dict_in_generate=True, pad_token_id=0)
    hf_ids = gen.sequences[0, inputs["input_ids"].shape[1]:]
    assert torch.equal(hf_ids, taps["generated_ids"]), (
        f"generate {hf_ids.tolist()} != manual {taps['generated_ids'].tolist()}")


def input_images():
    """Case images by name: inputs/<name>.png, or <name>.png under testdata/golden for a path."""
    names = {n for images, _ in CASES.values() for n in images}
    return {n: Image.open(os.path.join(GOLDEN if "/" in n else INPUTS, n + ".png")) for n in names}


def make_goldens(only=None):
    taps_lib.I64_TAPS = taps_lib.I64_TAPS + ("image_grid_thw", "position_ids", "rope_deltas")
    for name in ("qwen2vl", "qwen25vl", "qwen2vl-bf16", "qwen25vl-bf16"):
        make_checkpoint_goldens(name, only)


def make_checkpoint_goldens(name, only=None):
    """Every case of CASES (only: those named, the other files kept)."""
    from transformers import AutoProcessor

    images = input_images()
    path = os.path.join(TINY, name)
    dtype = torch.bfloat16 if name.endswith("bf16") else torch.float32
    model = model_class(name).from_pretrained(path, dtype=dtype, attn_implementation="eager").eval()
    processor = AutoProcessor.from_pretrained(path, use_fast=False)
    out_dir = os.path.join(GOLDEN, name)
    if os.path.isdir(out_dir) and not only:
        shutil.rmtree(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    cases = {c: (names, prompt, None, None) for c, (names, prompt) in CASES.items()}
    if name == "qwen25vl":
        cases.update(RESIZE_CASES)
    for case, (names, prompt, min_pixels, max_pixels) in cases.items():
        if dtype == torch.bfloat16 and case not in ("two", "text_only"):
            continue
        if only and case not in only:
            continue
        kwargs = dict(images=[images[n] for n in names]) if names else {}
        if min_pixels is not None:
            kwargs.update(min_pixels=min_pixels, max_pixels=max_pixels)
        text = chat_prompt(processor, len(names), prompt) if case in CHAT_CASES else prompt
        inputs = processor(text=[text], return_tensors="pt", **kwargs)
        inputs = {k: v for k, v in inputs.items() if k != "attention_mask"}
        taps = trace(model, inputs)
        check_generate(model, inputs, taps)
        file = os.path.join(out_dir, f"{case}.safetensors")
        meta = {"checkpoint": name, "case": case, "prompt": prompt, "images": ",".join(names)}
        if case in CHAT_CASES:
            meta["chat"] = "user turn"  # prompt: the user's text of the chat turn
        if min_pixels is not None:
            meta.update(min_pixels=str(min_pixels), max_pixels=str(max_pixels))
        taps_lib.save_taps(taps, file, meta)
        grids = inputs["image_grid_thw"].tolist() if names else []
        print(f"golden: {name}/{case} T={taps['input_ids'].shape[0]} grids={grids} "
              f"deltas={taps['rope_deltas'].tolist()} gen={taps['generated_ids'].tolist()}")


def extra_source(w, h, k, kind):
    """(bytes, extension) of one PIXEL_EXTRA source."""
    import io

    from tools.reference import make_alpha_fixtures as alpha
    from tools.reference.make_image_fixtures import exif_bytes

    rgb = np.asarray(synthetic(w, h, k))
    ramp = (alpha.alpha_ramp(w, h) if w >= 33 and h >= 20
            else (rgb[..., 2].astype(np.int32) * 3 % 256).astype(np.uint8))
    b = io.BytesIO()
    if kind == "RGBA":
        Image.fromarray(np.dstack([rgb, ramp]), "RGBA").save(b, "PNG", optimize=False)
    elif kind == "LA":
        Image.fromarray(np.dstack([rgb[..., 0], ramp]), "LA").save(b, "PNG", optimize=False)
    elif kind == "PA":  # a palette whose tRNS gives each entry its own alpha
        synthetic(w, h, k, "P").save(b, "PNG", optimize=False,
                                     transparency=bytes((i * 53) % 256 for i in range(16)))
    elif kind == "CMYK":
        synthetic(w, h, k).convert("CMYK").save(b, "JPEG", quality=90)
    elif kind == "I16":  # values up to 4000: "I;16" clips them to 255 in convert("RGB")
        grey = (rgb[..., 0].astype(np.uint16) * 16) + rgb[..., 1] % 16
        return alpha.encode_png16(grey[..., None], colour_type=0), "png"
    elif kind == "RGB16":
        wide = rgb.astype(np.uint16) * 256 + (rgb[..., ::-1] % 251)
        return alpha.encode_png16(wide, colour_type=2), "png"
    elif kind == "BW":
        synthetic(w, h, k).convert("1").save(b, "PNG", optimize=False)
    elif kind == "EXIFPNG":
        synthetic(w, h, k).save(b, "PNG", optimize=False, exif=exif_bytes(6))
    elif kind == "EXIFJPG":
        synthetic(w, h, k).save(b, "JPEG", quality=90, exif=exif_bytes(6))
    return b.getvalue(), "jpg" if kind in ("CMYK", "EXIFJPG") else "png"


def pixel_sources():
    """(key, file) of every pixel-fixture image, written under PIXEL_DIR."""
    if os.path.isdir(PIXEL_DIR):
        shutil.rmtree(PIXEL_DIR)
    os.makedirs(PIXEL_DIR)
    for k, (w, h) in enumerate(PIXEL_SIZES):
        mode = PIXEL_MODES[k % len(PIXEL_MODES)]
        key = f"{w}x{h}s{k}{mode}"
        file = os.path.join(PIXEL_DIR, key + ".png")
        synthetic(w, h, k, mode).save(file, optimize=False)
        yield key, file
    for k, (w, h, kind) in enumerate(PIXEL_EXTRA, start=len(PIXEL_SIZES)):
        data, ext = extra_source(w, h, k, kind)
        key = f"{w}x{h}s{k}{kind}"
        file = os.path.join(PIXEL_DIR, f"{key}.{ext}")
        common.write_bytes(file, data)
        yield key, file


def make_pixel_fixture():
    """Qwen2VLImageProcessor on synthetic images: pixel_values and image_grid_thw of each."""
    processor = make_processor(load_tokenizer(), PIXEL_PATCH, PIXEL_MIN, PIXEL_MAX).image_processor
    taps, grids = {}, []
    for key, file in pixel_sources():
        out = processor(images=[Image.open(file)], return_tensors="pt")
        taps[f"{key}/pixel_values"] = out["pixel_values"].to(torch.float32)
        taps[f"{key}/image_grid_thw"] = out["image_grid_thw"][0].to(torch.int64)
        grids.append(tuple(out["image_grid_thw"][0].tolist()))
    for key in PIXEL_RESIZE_KEYS:
        file = next(os.path.join(PIXEL_DIR, f) for f in os.listdir(PIXEL_DIR)
                    if os.path.splitext(f)[0] == key)
        for lo, hi in PIXEL_RESIZES:
            kwargs = {k: v for k, v in (("min_pixels", lo), ("max_pixels", hi)) if v is not None}
            out = processor(images=[Image.open(file)], return_tensors="pt", **kwargs)
            # The same bounds given to the constructor (as a checkpoint's config) agree.
            built = make_processor(load_tokenizer(), PIXEL_PATCH, lo or PIXEL_MIN,
                                   hi or PIXEL_MAX).image_processor
            assert torch.equal(built(images=[Image.open(file)], return_tensors="pt")[
                "pixel_values"], out["pixel_values"]), (key, lo, hi)
            name = f"{key}/min{lo or 0}_max{hi or 0}"
            taps[f"{name}/pixel_values"] = out["pixel_values"].to(torch.float32)
            taps[f"{name}/image_grid_thw"] = out["image_grid_thw"][0].to(torch.int64)
            grids.append(tuple(out["image_grid_thw"][0].tolist()))
    taps_lib.I64_TAPS = tuple(set(taps_lib.I64_TAPS) | {n for n in taps if n.endswith("_thw")})
    taps_lib.save_taps(taps, os.path.join(GOLDEN, "qwen2vl-pixels.safetensors"),
                       {"patch_size": PIXEL_PATCH, "min_pixels": PIXEL_MIN,
                        "max_pixels": PIXEL_MAX, "seed": "image index"})
    print(f"pixels: {len(grids)} images, grids {sorted(set(grids))}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-tiny", action="store_true", help="goldens only")
    parser.add_argument("--pixels-only", action="store_true", help="the pixel fixture only")
    parser.add_argument("--cases", nargs="*", help="goldens of these cases only (with --no-tiny)")
    parser.add_argument("--chat-templates-only", action="store_true",
                        help="write the tiny checkpoints' chat_template.jinja only")
    args = parser.parse_args(argv)
    common.set_determinism()
    if args.chat_templates_only:
        for name in ("qwen2vl", "qwen25vl", "qwen2vl-bf16", "qwen25vl-bf16"):
            write_chat_template(os.path.join(TINY, name))
        return
    if args.pixels_only:
        make_pixel_fixture()
        return
    if not args.no_tiny:
        make_tiny()
    make_goldens(args.cases)
    if args.cases:
        return
    make_pixel_fixture()


if __name__ == "__main__":
    main()

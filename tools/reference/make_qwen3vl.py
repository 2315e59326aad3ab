"""Tiny random-init Qwen3-VL (qwen3_vl, dense) checkpoints and their goldens.

Writes, in the HF layout of Qwen/Qwen3-VL-4B-Instruct (save_pretrained):
  testdata/tiny/qwen3vl     Qwen3VLForConditionalGeneration: a 3-block ViT (hidden 32, 4 heads
                            of 8, gelu_pytorch_tanh MLP 64, 16-px patches, temporal patch 2, 2x2
                            merge) with a learned 6x6 position table (num_position_embeddings
                            36, interpolated to every grid) and DeepStack mergers after blocks 0
                            and 2; a 3-layer Qwen3 decoder (hidden 48, GQA 4/2, head_dim 16 — not
                            hidden / heads —, q/k norms, SwiGLU 80) with interleaved M-RoPE
                            mrope_section [2, 3, 3], tied embeddings (text_config's
                            tie_word_embeddings, as the released 2B/4B) and vocab_size past the
                            tokenizer; Qwen2VLImageProcessor (the PIL one) with Qwen3-VL's mean /
                            std 0.5 and min_pixels 64*64, max_pixels 32*32*12
  testdata/tiny/qwen3vl-bf16  the same weights in bfloat16 (goldens run in bfloat16)
  testdata/tiny/qwen3vl-b   another configuration: a 2-block ViT with a 4x4 table and DeepStack
                            after block 1 only; q/k/v/o biases (attention_bias), MHA (4/4),
                            head_dim 12 = hidden / heads, mrope_section [3, 1, 2] under the
                            legacy "type": "mrope" (no rope_type, no mrope_interleaved), an
                            untied lm_head (f32 goldens)
  testdata/golden/qwen3vl*/<case>.safetensors  the taps below, self-checked against
                            model.generate(do_sample=False)
  testdata/golden/qwen3vl-linspace.safetensors  torch.linspace(0, n - 1, h) in float32 for the
                            position tables of the released checkpoints and the tiny one (n 48,
                            6, 97) and every h in [1, 160]: the interpolation points of
                            fast_pos_embed_interpolate at real image sizes, concatenated per n

Taps (batch dimension dropped; N = patches of all images, M = N / merge^2 feature rows):
  input_ids [T] (I64)  pixel_values [N, 3*2*16*16]  image_grid_thw [n, 3] (I64)
  position_ids [3, T] (I64)  rope_deltas [1] (I64)              get_rope_index
  vision.embeddings [N, D]   visual.patch_embed (before the position table is added)
  vision.layers.{i} [N, D]   visual.blocks[i]
  vision.deepstack.{k} [M, H] visual.deepstack_merger_list[k]
  projector [M, H]           visual.merger
  decoder.inputs_embeds [T, H]  decoder.layers.{i} [T, H] (the layer's output, before DeepStack's
  addition)  decoder.norm [T, H]  logits [T, V]  generated_ids [G] (I64)  decode_logits [G, V]

Reference: transformers 4.57.1 models/qwen3_vl/modeling_qwen3_vl.py, processing_qwen3_vl.py,
models/qwen2_vl/image_processing_qwen2_vl.py (eager attention).

Run: .venv/bin/python -m tools.reference.make_qwen3vl
"""

import argparse
import os
import shutil

import torch

from tools.reference import common, make_qwen2vl as q2, taps as taps_lib

TINY = q2.TINY
GOLDEN = q2.GOLDEN
NUM_GENERATED = 32
MEAN = [0.5, 0.5, 0.5]  # Qwen/Qwen3-VL-4B-Instruct preprocessor_config.json
STD = [0.5, 0.5, 0.5]
MIN_PIXELS = 64 * 64
MAX_PIXELS = 32 * 32 * 12

VISION = dict(depth=3, hidden_size=32, hidden_act="gelu_pytorch_tanh", intermediate_size=64,
              num_heads=4, in_channels=3, patch_size=16, spatial_merge_size=2,
              temporal_patch_size=2, out_hidden_size=48, num_position_embeddings=36,
              deepstack_visual_indexes=[0, 2])
TEXT = dict(hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=512,
            rms_norm_eps=1e-6, rope_theta=10000.0, attention_bias=False,
            tie_word_embeddings=True,
            rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3],
                          "mrope_interleaved": True})

VISION_B = dict(VISION, depth=2, num_position_embeddings=16, deepstack_visual_indexes=[1])
TEXT_B = dict(TEXT, num_key_value_heads=4, head_dim=12, attention_bias=True,
              tie_word_embeddings=False, rope_scaling={"type": "mrope", "mrope_section": [3, 1, 2]})
# name: (vision, text, seed, tied, with a bf16 copy)
CHECKPOINTS = {
    # seed 25: its greedy runs also sample <|image_pad|> (embedded as a plain token)
    "qwen3vl": (VISION, TEXT, 25, True, True),
    "qwen3vl-b": (VISION_B, TEXT_B, 31, False, False),
}

# (images, prompt) per case: a 60x40 image (sides not multiples of 32 -> 96x64, a 4x6 patch grid
# the 6x6 table interpolates to), two images with text before, between and after them, a grey
# image, a palette PNG of 120x90 (-> 128x96), text only, transparent RGBA and palette PNGs.
TAG = q2.VISION_TAG
CASES = {
    "one": (["photo"], TAG + "describe this picture"),
    "two": (["photo", "gray"], "look " + TAG + " and " + TAG + " what differs?"),
    "gray": (["gray"], "what is this? " + TAG),
    "text_only": ([], "what color is the square?"),
    "palette": (["qwen2vl-pixels/120x90s23P"], TAG + "describe"),
    "chat": (["photo"], "describe this picture"),  # a --chat turn (q2.chat_prompt)
    # An RGBA PNG and a palette PNG with a transparent index (make_alpha_fixtures.py): alpha
    # and tRNS dropped by convert_to_rgb (q2.CASES).
    "rgba": q2.CASES["rgba"],
    "palette_trns": q2.CASES["palette_trns"],
}


def make_processor(tokenizer):
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    image_processor = Qwen2VLImageProcessor(
        do_resize=True, resample=3, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
        image_mean=MEAN, image_std=STD, do_convert_rgb=True, min_pixels=MIN_PIXELS,
        max_pixels=MAX_PIXELS, patch_size=16, temporal_patch_size=2, merge_size=2)
    return Qwen3VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                            video_processor=Qwen3VLVideoProcessor())


def make_config(tokenizer, vision, text_fields, tied):
    from transformers import Qwen3VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in q2.SPECIALS}
    vocab = (len(tokenizer) + 63) // 64 * 64 + 16  # past the tokenizer, as the real 151936
    text = dict(text_fields, vocab_size=vocab, bos_token_id=ids["<|endoftext|>"],
                eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision,
                        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                        vision_start_token_id=ids["<|vision_start|>"],
                        vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=tied)
    cfg._attn_implementation = "eager"
    return cfg


def make_tiny():
    from transformers import Qwen3VLForConditionalGeneration

    tokenizer = q2.load_tokenizer()
    processor = make_processor(tokenizer)
    for name, (vision, text, seed, tied, bf16) in CHECKPOINTS.items():
        torch.manual_seed(seed)
        model = Qwen3VLForConditionalGeneration(make_config(tokenizer, vision, text, tied)).eval()
        q2.init_weights(model, seed, embed_std=0.1 if tied else 1.0)
        embed = model.model.language_model.embed_tokens.weight
        # tied exactly when text_config says so
        assert (model.lm_head.weight.data_ptr() == embed.data_ptr()) == tied
        q2.save(model, os.path.join(TINY, name), processor)
        print(f"tiny: {name}")
        if bf16:
            q2.save(model.to(torch.bfloat16), os.path.join(TINY, name + "-bf16"), processor)
            print(f"tiny: {name}-bf16")


class Recorder(q2.Recorder):
    """Qwen2-VL's hooks plus the DeepStack mergers."""

    def __init__(self, model):  # pylint: disable=super-init-not-called
        self.taps, self._active, self._handles = {}, False, []
        visual = model.model.visual
        self._hook(visual.patch_embed, "vision.embeddings")
        for i, block in enumerate(visual.blocks):
            self._hook(block, f"vision.layers.{i}")
        for k, merger in enumerate(visual.deepstack_merger_list):
            self._hook(merger, f"vision.deepstack.{k}")
        self._hook(visual.merger, "projector")
        decoder = model.model.language_model
        self._pre_hook(decoder.layers[0], "decoder.inputs_embeds", kwarg="hidden_states")
        for i, layer in enumerate(decoder.layers):
            self._hook(layer, f"decoder.layers.{i}")
        self._hook(decoder.norm, "decoder.norm")


@torch.no_grad()
def trace(model, inputs):
    q2.Recorder = Recorder  # q2.trace builds its recorder by this name
    return q2.trace(model, inputs)


def make_goldens(only=None):
    from transformers import AutoProcessor, Qwen3VLForConditionalGeneration

    taps_lib.I64_TAPS = tuple(set(taps_lib.I64_TAPS) |
                              {"image_grid_thw", "position_ids", "rope_deltas"})
    images = q2.input_images()
    for name in ("qwen3vl", "qwen3vl-bf16", "qwen3vl-b"):
        path = os.path.join(TINY, name)
        dtype = torch.bfloat16 if name.endswith("bf16") else torch.float32
        model = Qwen3VLForConditionalGeneration.from_pretrained(
            path, dtype=dtype, attn_implementation="eager").eval()
        processor = AutoProcessor.from_pretrained(path, use_fast=False)
        out_dir = os.path.join(GOLDEN, name)
        if os.path.isdir(out_dir) and not only:
            shutil.rmtree(out_dir)
        os.makedirs(out_dir, exist_ok=True)
        for case, (names, prompt) in CASES.items():
            if name != "qwen3vl" and case not in ("two", "text_only"):
                continue  # bf16 and the other configuration: two cases
            if only and case not in only:
                continue
            kwargs = dict(images=[images[n] for n in names]) if names else {}
            chat = case in q2.CHAT_CASES
            text = q2.chat_prompt(processor, len(names), prompt) if chat else prompt
            inputs = processor(text=[text], return_tensors="pt", **kwargs)
            inputs = {k: v for k, v in inputs.items() if k not in ("attention_mask",
                                                                   "mm_token_type_ids")}
            taps = trace(model, inputs)
            q2.check_generate(model, inputs, taps)
            file = os.path.join(out_dir, f"{case}.safetensors")
            meta = {"checkpoint": name, "case": case, "prompt": prompt,
                    "images": ",".join(names)}
            if chat:
                meta["chat"] = "user turn"  # prompt: the user's text of the chat turn
            taps_lib.save_taps(taps, file, meta)
            grids = inputs["image_grid_thw"].tolist() if names else []
            print(f"golden: {name}/{case} T={taps['input_ids'].shape[0]} grids={grids} "
                  f"deltas={taps['rope_deltas'].tolist()} gen={taps['generated_ids'].tolist()}")


def make_linspace_fixture():
    taps = {}
    for n in (6, 48, 97):
        taps[f"n{n}"] = torch.cat([torch.linspace(0, n - 1, h) for h in range(1, 161)])
    taps_lib.save_taps(taps, os.path.join(GOLDEN, "qwen3vl-linspace.safetensors"),
                       {"steps": "1..160", "dtype": "float32"})
    print("linspace: n 6, 48, 97; steps 1..160")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-tiny", action="store_true", help="goldens only")
    parser.add_argument("--cases", nargs="*", help="goldens of these cases only (with --no-tiny)")
    parser.add_argument("--chat-templates-only", action="store_true",
                        help="write the tiny checkpoints' chat_template.jinja only")
    args = parser.parse_args(argv)
    common.set_determinism()
    if args.chat_templates_only:
        for name in ("qwen3vl", "qwen3vl-bf16", "qwen3vl-b"):
            q2.write_chat_template(os.path.join(TINY, name))
        return
    if not args.no_tiny:
        make_tiny()
    make_goldens(args.cases)
    if args.cases:
        return
    make_linspace_fixture()


if __name__ == "__main__":
    main()

"""Tiny random-init Llama 3.2 Vision (mllama) checkpoints, their goldens and pixel fixtures.

Writes, in the HF layout of meta-llama/Llama-3.2-11B-Vision (save_pretrained):
  testdata/tiny/mllama      MllamaForConditionalGeneration: vision tower with 28-px tiles of
                            14-px patches (4 patches + class = 5 rows, padded to 8), 3 local +
                            2 gated global layers, intermediate features [0, 2], max 4 tiles;
                            a 5-layer text model with cross-attention layers [1, 3], GQA 4/2,
                            llama3 RoPE scaling whose three frequency bands are all populated
  testdata/tiny/mllama-1x   the same family with 1 cross-attention layer [2], odd sizes
                            (hidden 36, 3 heads / 1 KV head, MLP 70, 4 layers)
  testdata/golden/mllama*/<case>.safetensors   the taps below for 1-3 images, 1-4 tiles and a
                            text-only prompt, self-checked against model.generate(do_sample=False)
  testdata/golden/mllama-pixels.safetensors    MllamaImageProcessor on 36 synthetic images
                            (sizes 1x1 .. 200x150, 10-px tiles, every canvas of max_image_tiles 4)
  testdata/golden/mllama-bos/  tokenizer.json: the tiny one with the hub's TemplateProcessing
                            post_processor that prepends <|begin_of_text|>, and goldens of
                            testdata/tiny/mllama's weights with that tokenizer

Raw prompts follow Meta's format (llama-models llama3_2/vision_prompt_format.md:
"<|begin_of_text|><|image|>If I had to write a haiku..."): BOS first, then the prompt, no other
special token. transformers' MllamaProcessor puts BOS after the leading <|image|> tokens, and a
tokenizer whose post_processor prepends BOS (the hub's) gives [BOS, <|image|>, BOS, ...]. The
goldens run transformers' model on the Meta-format ids (meta_inputs: the processor on
"<|begin_of_text|>" + prompt with add_special_tokens=False, so pixels and cross_attention_mask
are its own). Chat cases are tokenized as apply_chat_template does.

The reference is corrected in one place. Meta's llama-models (llama3/multimodal/model.py,
ImageTransformer.forward appends x *before* running layer i) and transformers <= 4.54 take the
*input* of local vision layer i as intermediate feature i; transformers 4.55 took the final
state and 4.56+ take the *output* of layer i. The released checkpoints were trained with Meta's
definition, so MllamaVisionEncoder.forward is patched here (patched_encoder_forward) before any
golden is made, and ocular follows Meta.

Taps (batch dimension dropped; n images, T = max_num_tiles, P = patches + 1, Pp = P padded to 8):
  pixel_values [n, T, 3, t, t]   aspect_ratio_ids [n] (I64)   input_ids [T] (I64)
  vision.layernorm_pre [n, T, P, D]       after class + gated position/tile embeddings
  vision.layers.{i} [n, T*Pp, D]         output of local layer i
  vision.layernorm_post [n, T*Pp, D]
  vision.global_layers.{i} [n, T*Pp, D]  output of gated global layer i
  vision.output [n, T, P, D*(1+k)]       final state ++ intermediate features (interleaved as
                                         torch.stack(dim=-1) leaves them)
  projector [n, T, P, H]                 multi_modal_projector output
  cross.{l}.k / cross.{l}.v [n*T*P, Hkv*d]  cross-attention K (after k_norm) and V of layer l
  decoder.layers.{i} [T, H], decoder.norm [T, H], logits [T, V]
  generated_ids [G] (I64), decode_logits [G, V]

Run: .venv/bin/python -m tools.reference.make_mllama
     .venv/bin/python -m tools.reference.make_mllama --trace DIR --image A [--image B] \
         --prompt "<|image|>..." --out F [--transformers-features]   (one run, for ocular diff)
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
from tools.reference.make_goldens import make_images as shared_images

TINY = "testdata/tiny"
GOLDEN = "testdata/golden"
NUM_GENERATED = 12
CORPUS = os.path.join(os.path.dirname(__file__), "corpus.txt")
# Llama 3's pre-tokenizer split (tokenizer.json of meta-llama/Llama-3.2-11B-Vision).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}"
                  r"\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eot_id|>", "<|image|>"]  # <|image|> last: its id is vocab_size, as in 11B
# The official template of meta-llama/Llama-3.2-11B-Vision-Instruct (testdata/chat/README.md).
with open(os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "chat",
                       "llama-3.2-vision-instruct.jinja"), newline="") as _f:
    CHAT_TEMPLATE = _f.read()
TILE = 28
PIXEL_TILE = 10  # the pixel fixture's tile size
MEAN = [0.48145466, 0.4578275, 0.40821073]  # OpenAI CLIP, as the 11B preprocessor_config
STD = [0.26862954, 0.26130258, 0.27577711]

VISION = dict(hidden_size=32, hidden_act="gelu", num_hidden_layers=3, num_global_layers=2,
              num_attention_heads=4, num_channels=3, intermediate_size=48, vision_output_dim=96,
              image_size=TILE, patch_size=14, norm_eps=1e-5, max_num_tiles=4,
              intermediate_layers_indices=[0, 2])
TEXT = {
    "mllama": dict(hidden_size=48, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=80, num_hidden_layers=5, cross_attention_layers=[1, 3]),
    "mllama-1x": dict(hidden_size=36, num_attention_heads=3, num_key_value_heads=1,
                      intermediate_size=70, num_hidden_layers=4, cross_attention_layers=[2]),
}
# head_dim 12: wavelengths 6.3, 56, 500, ... against original_max_position_embeddings 64 put
# one frequency in each band (kept, smoothed, divided by factor).
ROPE = dict(rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 64},
            max_position_embeddings=512, rms_norm_eps=1e-5, hidden_act="silu")

# (images, prompt) per case: 1-4 tiles, 1-3 images, consecutive and separated image tokens,
# text before the first image (rows with no image), text-only.
CASES = {
    "mllama": {
        "one": (["wide"], "<|image|>describe this picture"),
        "two": (["photo", "small"], "<|image|><|image|>What differs?"),
        "three": (["strip", "photo", "small"], "look <|image|> here <|image|> and <|image|> end"),
        "text_only": ([], "what color is the square?"),
        # One user turn through the checkpoint's chat_template (apply_chat_template); the
        # metadata keeps the turn's text for the C++ processor's chat mode.
        "chat": (["photo", "gray"], {"chat": "What differs?"}),
        # An RGBA PNG with alpha from 0 to 255 (make_alpha_fixtures.py): convert_to_rgb
        # composites it onto white (its own convert_to_rgb, not image_transforms').
        "rgba": (["alpha/rgba"], "<|image|>what is drawn here?"),
    },
    "mllama-bf16": {  # run in bfloat16, as a user runs the released checkpoints
        "two": (["photo", "small"], "<|image|><|image|>What differs?"),
        "text_only": ([], "what color is the square?"),
    },
    "mllama-1x": {
        "one": (["gray"], "<|image|> caption en"),
        "two": (["small", "wide"], "a <|image|> b <|image|> c"),
        "text_only": ([], "answer en what color is the circle?"),
    },
}


def make_images():
    """Images with 1 to 4 tiles at TILE 28 and max_image_tiles 4: make_goldens.py's photo
    (60x40) and gray (L, 33x47; testdata/golden/inputs/*.png), both 2x2 canvases, and
    synthetic ones the C++ test rebuilds: small (1 tile), strip (1x2), wide (1x3); a
    transparent RGBA PNG (37x23: 1x2)."""
    shared = shared_images()
    return {"photo": shared["photo"], "gray": shared["gray"], "small": synthetic(20, 20, 1),
            "strip": synthetic(50, 28, 2), "wide": synthetic(60, 25, 3),
            "alpha/rgba": Image.open(os.path.join(GOLDEN, "alpha", "rgba.png"))}


def synthetic(width, height, seed):
    """The pattern tests/golden/mllama_processor_test.cc rebuilds: no image file needed."""
    a = np.zeros((height, width, 3), dtype=np.uint8)
    for y in range(height):
        for x in range(width):
            for c in range(3):
                a[y, x, c] = (x * (7 + c) + y * (13 + 2 * c) + seed * 31 + (x * y) % (17 + c)) % 256
    return Image.fromarray(a)


# Sizes for the pixel fixture: every canvas of max_image_tiles 4, up- and downscaling, ties.
PIXEL_SIZES = [(1, 1), (5, 7), (14, 14), (20, 20), (27, 29), (28, 28), (29, 27), (40, 60),
               (60, 40), (50, 28), (28, 50), (60, 25), (25, 60), (100, 20), (20, 100), (130, 20),
               (20, 130), (56, 56), (57, 55), (84, 28), (28, 84), (112, 28), (28, 112),
               (90, 45), (45, 90), (33, 47), (47, 33), (70, 70), (3, 50), (50, 3), (200, 150),
               (150, 200), (31, 62), (62, 31), (64, 17), (17, 64), (8, 8), (10, 10),
               (9, 4), (4, 9), (15, 9), (9, 15), (19, 11), (11, 19)]


def load_tokenizer_dir(out_dir):
    """Trains the tiny byte-level BPE (Llama 3's pre-tokenizer and decoder) into out_dir."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=420, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([CORPUS], trainer)
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                   eos_token="<|eot_id|>", pad_token="<|end_of_text|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def make_processor(tokenizer):
    from transformers import MllamaImageProcessor, MllamaProcessor

    image_processor = MllamaImageProcessor(
        do_convert_rgb=True, do_resize=True, size={"height": TILE, "width": TILE}, resample=2,
        do_rescale=True, rescale_factor=1 / 255, do_normalize=True, image_mean=MEAN,
        image_std=STD, do_pad=True, max_image_tiles=4)
    return MllamaProcessor(image_processor=image_processor, tokenizer=tokenizer,
                           chat_template=CHAT_TEMPLATE)


def make_config(name, tokenizer):
    from transformers import MllamaConfig

    image_id = tokenizer.convert_tokens_to_ids("<|image|>")
    assert image_id == len(tokenizer) - 1
    text = dict(TEXT[name], **ROPE, vocab_size=image_id,
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id)
    cfg = MllamaConfig(vision_config=VISION, text_config=text, image_token_index=image_id)
    cfg._attn_implementation = "eager"
    return cfg


def init_weights(model, seed):
    """O(1)-activation init by parameter name (sorted for a stable RNG order); every tanh gate
    non-zero so that each gated path matters."""
    gen = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=gen, dtype=torch.float32) * std + mean

    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "gate" in name and p.dim() == 1 and p.numel() == 1:  # tanh gates
                value = normal(p.shape, 0.3, mean=0.6)
            elif "embed_tokens" in name:
                value = normal(p.shape, 1.0)
            elif "tile_embedding" in name or "embedding.embedding" in name:
                value = normal(p.shape, 0.5)
            elif name.endswith(("class_embedding", "gated_positional_embedding.embedding")):
                value = normal(p.shape, 0.5)
            elif name.endswith("language_model.norm.weight"):
                value = normal(p.shape, 0.1, mean=4.0)
            elif "norm" in name and name.endswith("bias"):
                value = normal(p.shape, 0.1)
            elif "norm" in name:  # LayerNorm weights, Llama RMSNorm weights
                value = normal(p.shape, 0.1, mean=1.0)
            elif name.endswith("bias"):
                value = normal(p.shape, 0.1)
            elif p.dim() >= 2:
                value = normal(p.shape, 1 / math.sqrt(p[0].numel()))
            else:
                raise ValueError(f"no init rule for {name} {tuple(p.shape)}")
            p.copy_(value)
        zero_unused_tile_rows(model)


def zero_unused_tile_rows(model):
    """The tile tables hold, per aspect ratio id, one slice per tile; a checkpoint converted
    from Meta's weights (tables indexed by (tiles high, tiles wide)) has zeros for the tiles
    past the arrangement's own and for id 0. So does this one: Meta's encoder
    (check_mllama_meta.py) only agrees with transformers on such tables."""
    v = model.config.vision_config
    vision = model.model.vision_model
    tables = [vision.gated_positional_embedding.tile_embedding.weight,
              vision.pre_tile_positional_embedding.embedding.weight,
              vision.post_tile_positional_embedding.embedding.weight]
    with torch.no_grad():
        for table in tables:
            rows = table.view(table.shape[0], v.max_num_tiles, -1)
            rows[0] = 0
            for rid, (h, w) in enumerate(v.supported_aspect_ratios, start=1):
                rows[rid, h * w:] = 0


def save(model, out_dir, processor):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        processor.save_pretrained(tmp)
        for name in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, name), "rb") as f:
                common.write_bytes(os.path.join(out_dir, name), f.read())


def make_tiny():
    from transformers import MllamaForConditionalGeneration

    tokenizer = load_tokenizer_dir(None)
    processor = make_processor(tokenizer)
    for seed, name in enumerate(TEXT, start=11):
        torch.manual_seed(seed)
        model = MllamaForConditionalGeneration(make_config(name, tokenizer)).eval()
        init_weights(model, seed)
        save(model, os.path.join(TINY, name), processor)
        print(f"tiny: {name}")
        if name == "mllama":  # the same weights in bfloat16, as the released checkpoints
            save(model.to(torch.bfloat16), os.path.join(TINY, "mllama-bf16"), processor)
            print("tiny: mllama-bf16")


# ---- the reference correction ---------------------------------------------------------------

def patched_encoder_forward(self, hidden_states, attention_mask=None):
    """MllamaVisionEncoder.forward with Meta's feature definition: hidden_states[i] is the
    *input* of layer i (llama-models ImageTransformer.forward: `out.append(x)` before `x =
    r(x, mask=mask)`), as transformers <= 4.54 had it."""
    from transformers.modeling_outputs import BaseModelOutput

    encoder_states = ()
    for encoder_layer in self.layers:
        encoder_states = encoder_states + (hidden_states,)
        hidden_states = encoder_layer(hidden_state=hidden_states, attention_mask=attention_mask)
    return BaseModelOutput(last_hidden_state=hidden_states, hidden_states=encoder_states)


def patch_reference():
    from transformers.models.mllama import modeling_mllama

    modeling_mllama.MllamaVisionEncoder.forward = patched_encoder_forward


# ---- goldens --------------------------------------------------------------------------------

class Recorder(taps_lib.TapRecorder):
    """Hooks on the mllama module tree; records the first call of each module only."""

    def __init__(self, model):  # pylint: disable=super-init-not-called
        self.taps, self._active, self._handles = {}, False, []
        vision = model.model.vision_model
        self._hook(vision.layernorm_pre, "vision.layernorm_pre")
        for i, layer in enumerate(vision.transformer.layers):
            self._hook(layer, f"vision.layers.{i}")
        self._hook(vision.layernorm_post, "vision.layernorm_post")
        for i, layer in enumerate(vision.global_transformer.layers):
            self._hook(layer, f"vision.global_layers.{i}")
        self._hook(vision, "vision.output")
        self._hook(model.model.multi_modal_projector, "projector")
        decoder = model.model.language_model
        for i, layer in enumerate(decoder.layers):
            self._hook(layer, f"decoder.layers.{i}")
            if i in decoder.cross_attention_layers:
                self._hook(layer.cross_attn.k_norm, f"cross.{i}.k")
                self._hook(layer.cross_attn.v_proj, f"cross.{i}.v")
        self._hook(decoder.norm, "decoder.norm")

    def _store(self, name, tensor):
        if not self._active or name in self.taps:
            return
        t = tensor.detach()
        if name == "vision.output":  # [1, n, T, P, D'] -> [n, T, P, D']
            t = t[0]
        elif name.startswith("vision."):  # the image axis is the batch axis: kept
            pass
        elif name.startswith("cross."):
            if t.dim() == 4:  # k_norm output [1, Hkv, S, d] -> [S, Hkv*d]
                t = t[0].transpose(0, 1).reshape(t.shape[2], -1)
            else:  # v_proj output [n*T, P, Hkv*d] (MllamaModel reshapes the states per tile)
                t = t.reshape(-1, t.shape[-1])
        elif name == "projector":
            t = t[0]
        else:
            t = t[0]
        self.taps[name] = t.to(torch.float32).clone()

    def _hook(self, module, name):
        def hook(_module, _args, output):
            out = output
            if hasattr(out, "last_hidden_state"):
                out = out.last_hidden_state
            elif isinstance(out, (tuple, list)):
                out = out[0]
            self._store(name, out)
        self._handles.append(module.register_forward_hook(hook))


@torch.no_grad()
def trace(model, inputs):
    recorder = Recorder(model)
    try:
        with recorder.recording():
            out = model(**inputs, use_cache=False)
        taps = dict(recorder.taps)
    finally:
        recorder.remove()
    model.generation_config.eos_token_id = None  # never stop early: NUM_GENERATED tokens
    gen = model.generate(**inputs, max_new_tokens=NUM_GENERATED, do_sample=False,
                         output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    generated = gen.sequences[0, inputs["input_ids"].shape[1]:].to(torch.int64).clone()
    decode_logits = torch.stack([l[0] for l in gen.logits]).to(torch.float32)
    assert torch.equal(decode_logits.argmax(-1), generated), "generate is not greedy"
    # The prefill's last row is the first decode row: the two passes must agree.
    tol = 1e-5 if out.logits.dtype == torch.float32 else 3e-2
    torch.testing.assert_close(decode_logits[0], out.logits[0, -1].float(), rtol=tol, atol=tol)
    if "pixel_values" in inputs:
        taps["pixel_values"] = inputs["pixel_values"][0].to(torch.float32).clone()
        taps["aspect_ratio_ids"] = inputs["aspect_ratio_ids"][0].to(torch.int64).clone()
    taps["input_ids"] = inputs["input_ids"][0].to(torch.int64).clone()
    taps["logits"] = out.logits[0].to(torch.float32).clone()
    taps["generated_ids"] = generated
    taps["decode_logits"] = decode_logits
    return taps


BOS = "<|begin_of_text|>"
BOS_CASES = {  # testdata/golden/mllama-bos: the raw prompt and the chat turn with that tokenizer
    "one": (["wide"], "<|image|>describe this picture"),
    "chat": (["photo", "gray"], {"chat": "What differs?"}),
}


def meta_inputs(processor, prompt, images):
    """Meta's format: BOS + prompt (unless it has one), no post_processor tokens."""
    text = prompt if BOS in prompt else BOS + prompt
    kwargs = dict(images=[images]) if images else {}
    return processor(text=[text], return_tensors="pt", add_special_tokens=False, **kwargs)


def case_inputs(processor, names, prompt, images, meta_format=True):
    """(prompt text kept in the metadata, model inputs, extra metadata) of one case. Without
    meta_format a raw prompt is tokenized by transformers' processor as it is."""
    meta = {}
    imgs = [images[n] for n in names]
    if isinstance(prompt, dict):  # one user turn through the checkpoint's chat_template
        content = [{"type": "image"} for _ in names] + [{"type": "text", "text": prompt["chat"]}]
        meta["chat_text"] = "<|image|>" * len(names) + prompt["chat"]
        text = processor.apply_chat_template([{"role": "user", "content": content}],
                                             add_generation_prompt=True, tokenize=False)
        # processing_utils.py apply_chat_template: a text that starts with bos_token is
        # tokenized without special tokens, else with them.
        add = not text.startswith(processor.tokenizer.bos_token)
        kwargs = dict(images=[imgs]) if imgs else {}
        inputs = processor(text=[text], return_tensors="pt", add_special_tokens=add, **kwargs)
        return text, inputs, meta
    if not meta_format:
        kwargs = dict(images=[imgs]) if imgs else {}
        return prompt, processor(text=[prompt], return_tensors="pt", **kwargs), meta
    inputs = meta_inputs(processor, prompt, imgs)
    hf = processor(text=[prompt], return_tensors="pt", **(dict(images=[imgs]) if imgs else {}))
    meta["transformers_input_ids"] = " ".join(map(str, hf["input_ids"][0].tolist()))
    return prompt, inputs, meta


def bos_tokenizer_json(path):
    """The tokenizer.json of `path` with the hub's post_processor: BOS before each sequence."""
    from tokenizers import Tokenizer, processors

    tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS}:1 $B:1", special_tokens=[(BOS, bos_id)])
    return tok.to_str(pretty=True).encode("utf-8")


def make_bos_goldens(images):
    """testdata/tiny/mllama's weights with a BOS-adding tokenizer.json (mllama-bos)."""
    from transformers import AutoProcessor, MllamaForConditionalGeneration

    path = os.path.join(TINY, "mllama")
    out_dir = os.path.join(GOLDEN, "mllama-bos")
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    common.write_bytes(os.path.join(out_dir, "tokenizer.json"), bos_tokenizer_json(path))
    with tempfile.TemporaryDirectory() as tmp:
        for name in os.listdir(path):
            shutil.copy(os.path.join(path, name), tmp)
        shutil.copy(os.path.join(out_dir, "tokenizer.json"), tmp)
        model = MllamaForConditionalGeneration.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager").eval()
        processor = AutoProcessor.from_pretrained(tmp)
    bos_id = processor.tokenizer.convert_tokens_to_ids(BOS)
    for case, (names, prompt) in BOS_CASES.items():
        text, inputs, meta = case_inputs(processor, names, prompt, images)
        if "transformers_input_ids" in meta:  # the issue's [BOS, <|image|>, BOS, ...]
            hf = [int(t) for t in meta["transformers_input_ids"].split()]
            assert hf[:3] == [bos_id, processor.image_token_id, bos_id], hf[:3]
        ids = inputs["input_ids"][0].tolist()
        assert ids.count(bos_id) == 1 and ids[0] == bos_id, ids
        inputs = {k: v for k, v in inputs.items() if k not in ("attention_mask", "token_type_ids")}
        taps = trace(model, inputs)
        taps_lib.save_taps(taps, os.path.join(out_dir, f"{case}.safetensors"),
                           {"checkpoint": "mllama-bos", "case": case, "prompt": text,
                            "images": ",".join(names), **meta})
        print(f"golden: mllama-bos/{case} ids={ids[:4]}... gen={taps['generated_ids'].tolist()}")


def make_goldens():
    from transformers import AutoProcessor, MllamaForConditionalGeneration

    taps_lib.I64_TAPS = taps_lib.I64_TAPS + ("aspect_ratio_ids",)
    images = make_images()
    for name, cases in CASES.items():
        path = os.path.join(TINY, name)
        dtype = torch.bfloat16 if name.endswith("bf16") else torch.float32
        model = MllamaForConditionalGeneration.from_pretrained(
            path, dtype=dtype, attn_implementation="eager").eval()
        processor = AutoProcessor.from_pretrained(path)
        out_dir = os.path.join(GOLDEN, name)
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.makedirs(out_dir)
        for case, (names, prompt) in cases.items():
            # mllama-bf16 checks bf16 arithmetic on the ids it is given (its processor is
            # mllama's, checked there): its cases keep transformers' processor ids, on which the
            # scalar kernels' bf16 rounding flips were measured (mllama_golden_test.cc).
            prompt, inputs, meta = case_inputs(processor, names, prompt, images,
                                               meta_format=not name.endswith("bf16"))
            inputs = {k: v for k, v in inputs.items() if k not in ("attention_mask", "token_type_ids")}
            taps = trace(model, inputs)
            file = os.path.join(out_dir, f"{case}.safetensors")
            taps_lib.save_taps(taps, file, {"checkpoint": name, "case": case, "prompt": prompt,
                                            "images": ",".join(names), **meta})
            tiles = inputs["aspect_ratio_mask"][0].sum(-1).tolist() if names else []
            print(f"golden: {name}/{case} T={taps['input_ids'].shape[0]} tiles={tiles} "
                  f"gen={taps['generated_ids'].tolist()}")
    make_bos_goldens(images)


def make_pixel_fixture():
    """MllamaImageProcessor on synthetic images: pixels, aspect ratio id and tiles of each."""
    processor = make_processor(load_tokenizer_dir(None)).image_processor
    processor.size = {"height": PIXEL_TILE, "width": PIXEL_TILE}  # small tiles: a small file
    taps = {}
    tiles_seen = []
    for k, (w, h) in enumerate(PIXEL_SIZES):
        out = processor(images=[[synthetic(w, h, k)]], return_tensors="pt")
        tiles = int(out["aspect_ratio_mask"][0, 0].sum())
        tiles_seen.append(tiles)
        taps[f"{w}x{h}s{k}/pixel_values"] = out["pixel_values"][0, 0, :tiles].to(torch.float32)
        taps[f"{w}x{h}s{k}/aspect_ratio_id"] = out["aspect_ratio_ids"][0].to(torch.int64)
    taps_lib.I64_TAPS = tuple(set(taps_lib.I64_TAPS) | {n for n in taps if n.endswith("_id")})
    taps_lib.save_taps(taps, os.path.join(GOLDEN, "mllama-pixels.safetensors"),
                       {"tile": PIXEL_TILE, "max_image_tiles": 4, "seed": "image index"})
    print(f"pixels: {len(PIXEL_SIZES)} images, tiles {sorted(tiles_seen)}")


def MllamaForConditionalGeneration_from(path):  # noqa: N802 (named after the class it loads)
    """The checkpoint at `path` in float32 with eager attention, for tracing."""
    from transformers import MllamaForConditionalGeneration

    return MllamaForConditionalGeneration.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager").eval()


def to_ocular_layout(taps, n_images):
    """pixel_values as `ocular trace` writes them: one row of every tile's pixels per image (the
    aspect ratio stays in aspect_ratio_ids)."""
    if n_images:
        taps["pixel_values"] = taps["pixel_values"].reshape(n_images, -1)
    if "aspect_ratio_ids" not in taps_lib.I64_TAPS:
        taps_lib.I64_TAPS = taps_lib.I64_TAPS + ("aspect_ratio_ids",)


def trace_checkpoint(args):
    """Taps of any mllama directory for some images and a prompt, in ocular's layout (pixel
    values as one row per image), for `ocular diff` against
    `ocular trace`. --transformers-features keeps transformers 4.57's (unpatched) definition."""
    from transformers import AutoProcessor

    if not args.transformers_features:
        patch_reference()
    model = MllamaForConditionalGeneration_from(args.trace)
    processor = AutoProcessor.from_pretrained(args.trace)
    images = [Image.open(f).convert("RGB") for f in args.image]
    inputs = meta_inputs(processor, args.prompt, images)  # as ocular builds a raw prompt
    inputs = {k: v for k, v in inputs.items() if k not in ("attention_mask", "token_type_ids")}
    taps = trace(model, inputs)
    to_ocular_layout(taps, len(images))
    taps_lib.save_taps(taps, args.out, {"model_dir": args.trace, "prompt": args.prompt,
                                        "features": "transformers" if args.transformers_features
                                        else "meta"})
    print(f"generated: {taps['generated_ids'].tolist()} -> {args.out}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-tiny", action="store_true", help="goldens only")
    parser.add_argument("--pixels-only", action="store_true", help="the pixel fixture only")
    parser.add_argument("--trace", metavar="MODEL_DIR", help="dump one run's taps instead")
    parser.add_argument("--image", action="append", default=[], help="with --trace")
    parser.add_argument("--prompt", help="with --trace")
    parser.add_argument("--out", help="with --trace: output .safetensors")
    parser.add_argument("--transformers-features", action="store_true",
                        help="with --trace: transformers 4.57's intermediate features (unpatched)")
    args = parser.parse_args(argv)
    common.set_determinism()
    if args.trace:
        trace_checkpoint(args)
        return
    patch_reference()
    if args.pixels_only:
        make_pixel_fixture()
        return
    if not args.no_tiny:
        make_tiny()
    make_goldens()
    make_pixel_fixture()
    from tools.reference import check_mllama_meta  # the patched reference == Meta's
    check_mllama_meta.check()


if __name__ == "__main__":
    main()

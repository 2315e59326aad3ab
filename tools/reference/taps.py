"""Named activation taps on a Hugging Face PaliGemma model: the reference side of parity.

The tap names are the contract the C++ tracer follows (docs/testing.md). Every tap is one
prompt's activations with the batch dimension dropped:
  input_ids [T] (I64)                 pixel_values [n_img, 3, R, R]
  vision.embeddings [n_img, N, D]     patch + position embeddings
  vision.layers.{i} [n_img, N, D]     output of SigLIP encoder layer i
  vision.post_layernorm [n_img, N, D]
  projector [n_img, N, H]             multi_modal_projector output (before the 1/√H)
  decoder.inputs_embeds [T, H]        merged embeddings entering the language model
                                      (image rows already divided by √H, text rows unscaled)
  decoder.embed_scaled [T, H]         × √H: the input of decoder layer 0
  decoder.layers.{i} [T, H]           output of decoder layer i
  decoder.norm [T, H]                 final norm output
  logits [T, V]                       every prompt position (what HF returns)
  generated_ids [G] (I64)             greedy continuation with the KV cache, EOS not special
  decode_logits [G, V]                row k = the logits that chose generated_ids[k]

Reference: transformers 4.57 models/paligemma/modeling_paligemma.py (PaliGemmaModel.forward),
models/siglip/modeling_siglip.py, models/gemma{,2}/modeling_gemma{,2}.py.
"""

import contextlib
import json
import os
import struct

import torch

I64_TAPS = ("input_ids", "generated_ids")


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


class TapRecorder:
    """Forward hooks that copy the named intermediates of one forward pass.

    Hooks fire on every call; they record only inside `with recorder.recording():` so the
    cached decode steps of generation do not overwrite the prefill taps.
    """

    def __init__(self, model):
        self.taps = {}
        self._active = False
        self._handles = []
        vision = model.model.vision_tower.vision_model
        decoder = model.model.language_model
        self._hook(vision.embeddings, "vision.embeddings")
        for i, layer in enumerate(vision.encoder.layers):
            self._hook(layer, f"vision.layers.{i}")
        self._hook(vision.post_layernorm, "vision.post_layernorm")
        self._hook(model.model.multi_modal_projector, "projector")
        self._pre_hook(decoder, "decoder.inputs_embeds", kwarg="inputs_embeds")
        self._pre_hook(decoder.layers[0], "decoder.embed_scaled", kwarg="hidden_states")
        for i, layer in enumerate(decoder.layers):
            self._hook(layer, f"decoder.layers.{i}")
        self._hook(decoder.norm, "decoder.norm")

    def _store(self, name, tensor):
        if self._active:
            assert name not in self.taps, f"tap {name} recorded twice in one pass"
            # The vision tower's batch axis is the image axis [n_img, N, D]: kept. The
            # decoder's is the (single) prompt: dropped.
            per_image = name.startswith(("vision.", "projector"))
            value = tensor.detach() if per_image else tensor.detach()[0]
            self.taps[name] = value.to(torch.float32).clone()

    def _hook(self, module, name):
        def hook(_module, _args, output):
            self._store(name, _first(output))
        self._handles.append(module.register_forward_hook(hook))

    def _pre_hook(self, module, name, kwarg):
        def hook(_module, args, kwargs):
            self._store(name, args[0] if args else kwargs[kwarg])
        self._handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    @contextlib.contextmanager
    def recording(self):
        self.taps = {}
        self._active = True
        try:
            yield self.taps
        finally:
            self._active = False

    def remove(self):
        for h in self._handles:
            h.remove()


def load_model(path):
    """Loads an HF PaliGemma dir as a user would: its own dtype, eager attention, eval mode.

    Eager, because the SDPA path of Gemma 2 ignores the attention softcap.
    """
    from transformers import PaliGemmaForConditionalGeneration, PaliGemmaProcessor

    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    dtype = getattr(torch, config.get("dtype") or config.get("torch_dtype") or "float32")
    model = PaliGemmaForConditionalGeneration.from_pretrained(
        path, dtype=dtype, attn_implementation="eager").eval()
    processor = PaliGemmaProcessor.from_pretrained(path, use_fast=False)
    return model, processor, dtype


def make_inputs(processor, image, prompt):
    """Processor inputs for one image and prompt: "<image>"*N + "<bos>" + prompt + "\n".

    PaliGemma's image processor does not convert modes: users convert to RGB first.
    """
    return processor(images=image.convert("RGB"), text="<image>" + prompt, return_tensors="pt")


def make_cache(model):
    from transformers import DynamicCache

    # What generate() builds: sliding-window layers keep only the last window-1 keys.
    return DynamicCache(config=model.config.get_text_config(decoder=True))


@torch.no_grad()
def greedy_decode(model, inputs, num_tokens, recorder=None):
    """Prefill + `num_tokens` greedy steps with the KV cache, never stopping at EOS.

    Returns (prefill_output, generated_ids [G] I64, decode_logits [G, V] in model dtype).
    Mirrors generate(do_sample=False): argmax (ties -> lowest id) of the last position.
    If `recorder` is given, it records the prefill pass only.
    """
    cache = make_cache(model)
    prompt_len = inputs["input_ids"].shape[1]
    with recorder.recording() if recorder else contextlib.nullcontext():
        out = model(**inputs, past_key_values=cache, use_cache=True)
    next_logits = out.logits[0, -1]
    ids, rows = [], []
    for k in range(num_tokens):
        token = int(torch.argmax(next_logits))
        ids.append(token)
        rows.append(next_logits)
        if k + 1 == num_tokens:
            break
        step = model(
            input_ids=torch.tensor([[token]]),
            attention_mask=torch.ones(1, prompt_len + k + 1, dtype=torch.long),
            cache_position=torch.tensor([prompt_len + k]),
            past_key_values=cache, use_cache=True)
        next_logits = step.logits[0, -1]
    return out, torch.tensor(ids, dtype=torch.int64), torch.stack(rows)


def trace(model, inputs, num_tokens=16):
    """Runs one case and returns {tap name: tensor} (floats as f32, ids as I64)."""
    recorder = TapRecorder(model)
    try:
        out, generated, decode_logits = greedy_decode(model, inputs, num_tokens, recorder)
        taps = dict(recorder.taps)
    finally:
        recorder.remove()
    taps["input_ids"] = inputs["input_ids"][0].to(torch.int64).clone()
    taps["pixel_values"] = inputs["pixel_values"].to(torch.float32).clone()
    taps["logits"] = out.logits[0].to(torch.float32).clone()
    taps["generated_ids"] = generated
    taps["decode_logits"] = decode_logits.to(torch.float32).clone()
    missing = set(tap_names(model.config)) - set(taps)
    assert not missing, f"taps not recorded: {sorted(missing)}"
    return taps


def tap_names(config):
    """All tap names for a PaliGemma config, in forward order."""
    names = ["input_ids", "pixel_values", "vision.embeddings"]
    names += [f"vision.layers.{i}" for i in range(config.vision_config.num_hidden_layers)]
    names += ["vision.post_layernorm", "projector", "decoder.inputs_embeds",
              "decoder.embed_scaled"]
    names += [f"decoder.layers.{i}" for i in range(config.text_config.num_hidden_layers)]
    names += ["decoder.norm", "logits", "generated_ids", "decode_logits"]
    return names


TAP_MEANING = {
    "input_ids": "prompt token ids: <image>*N <bos> prompt \\n (I64)",
    "pixel_values": "processor output, channels first, (x/255-0.5)/0.5 after bicubic resize",
    "vision.embeddings": "SigLIP patch conv + learned position embedding",
    "vision.layers.{i}": "output of SigLIP encoder layer i",
    "vision.post_layernorm": "SigLIP post_layernorm output (projector input)",
    "projector": "multi_modal_projector.linear output, before dividing by sqrt(H)",
    "decoder.inputs_embeds": "merged embeddings into the language model: image rows = "
                             "projector/sqrt(H), text rows = embed_tokens (unscaled)",
    "decoder.embed_scaled": "inputs_embeds * normalizer sqrt(H) (dtype-rounded): layer 0 input",
    "decoder.layers.{i}": "output of decoder layer i",
    "decoder.norm": "final RMSNorm output",
    "logits": "lm_head (tied embeddings) at every prompt position; HF PaliGemma applies no "
              "final softcap",
    "generated_ids": "greedy tokens with the KV cache, not stopping at EOS (I64)",
    "decode_logits": "row k = logits that chose generated_ids[k] (row 0 = last prompt position)",
}


def save_taps(taps, path, metadata=None):
    """Writes taps as safetensors, byte-deterministically.

    safetensors.torch.save_file keeps __metadata__ in a hash map (its key order varies from
    run to run), so the file is written here: JSON header with sorted keys, padded with
    spaces to a multiple of 8, tensors' data in sorted-name order, little-endian.
    """
    header = {"__metadata__": {k: str(v) for k, v in (metadata or {}).items()}}
    chunks, offset = [], 0
    for name in sorted(taps):
        t = taps[name]
        want = torch.int64 if name in I64_TAPS else torch.float32
        assert t.dtype == want, f"{name}: {t.dtype}"
        data = t.contiguous().numpy().astype("<i8" if want == torch.int64 else "<f4").tobytes()
        header[name] = {"dtype": "I64" if want == torch.int64 else "F32",
                        "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    blob = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for data in chunks:
            f.write(data)

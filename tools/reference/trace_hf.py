"""Dumps the named taps of a Hugging Face checkpoint for images and a prompt.

The reference side of the parity debugger: the C++ tracer writes the same tap names
(docs/testing.md), and comparing the two files tap by tap shows the first divergence.

  PaliGemma: one --image and a task prompt (PaliGemmaProcessor), as `ocular trace` runs it.
  --chat (Gemma 3, Llama 3.2 Vision): the prompt as one user turn of the checkpoint's chat
      template, as `ocular trace --chat` builds it (ocular::UserTurn: the prompt split at each
      image marker into text and image parts, images first when it has none), rendered by
      processor.apply_chat_template(add_generation_prompt=True) and tokenized as
      apply_chat_template does (no special tokens when the text starts with bos_token).

Run: .venv/bin/python -m tools.reference.trace_hf MODEL_DIR --image F --prompt P \\
         --out acts.safetensors [--tokens 16]
     .venv/bin/python -m tools.reference.trace_hf MODEL_DIR --chat [--image F]... --prompt P \\
         --out acts.safetensors [--date "26 Jul 2024"]
"""

import argparse

import torch
from PIL import Image

from tools.reference import common, taps as taps_lib

# The marker ocular::UserTurn splits a --chat prompt at, per model_type.
MARKERS = {"gemma3": "<start_of_image>", "gemma3_text": "<start_of_image>", "mllama": "<|image|>"}


def user_turn(prompt, n_images, marker):
    """ocular::UserTurn (src/models/chat.cc): text and image parts in the prompt's order."""
    text_part = lambda t: [{"type": "text", "text": t}] if t else []  # noqa: E731
    if not marker or marker not in prompt:
        return [{"type": "image"}] * n_images + text_part(prompt)
    content = []
    for i, piece in enumerate(prompt.split(marker)):
        if i > 0:
            content.append({"type": "image"})
        content += text_part(piece)
    return content


def chat_inputs(processor, images, prompt, marker, date):
    """apply_chat_template's text for one user turn, and the processor's tensors for it."""
    kwargs = {"date_string": date} if date else {}
    messages = [{"role": "user", "content": user_turn(prompt, len(images), marker)}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                         **kwargs)
    tokenizer = getattr(processor, "tokenizer", processor)  # gemma3_text: a tokenizer alone
    bos = tokenizer.bos_token
    add = not (bos and text.startswith(bos))  # processing_utils.py apply_chat_template
    image_kwargs = dict(images=[images]) if images else {}
    inputs = processor(text=[text], return_tensors="pt", add_special_tokens=add, **image_kwargs)
    # Gemma 3 needs token_type_ids (its image tokens attend bidirectionally); mllama takes none.
    return text, {k: v for k, v in inputs.items() if k != "attention_mask"}


def trace_chat(args):
    from transformers import AutoConfig, AutoProcessor

    model_type = AutoConfig.from_pretrained(args.model_dir).model_type
    if model_type not in MARKERS:
        raise SystemExit(f"--chat: {model_type} is not a family with a chat template here "
                         f"({', '.join(sorted(MARKERS))})")
    images = [Image.open(f).convert("RGB") for f in args.image]
    processor = AutoProcessor.from_pretrained(args.model_dir)
    text, inputs = chat_inputs(processor, images, args.prompt, MARKERS[model_type], args.date)
    if model_type == "mllama":
        from tools.reference import make_mllama
        make_mllama.patch_reference()  # Meta's intermediate features, as ocular
        model = make_mllama.MllamaForConditionalGeneration_from(args.model_dir)
        inputs.pop("token_type_ids", None)
        taps = make_mllama.trace(model, inputs)
        make_mllama.to_ocular_layout(taps, len(images))
    else:
        from transformers import Gemma3ForCausalLM, Gemma3ForConditionalGeneration

        from tools.reference import make_gemma3
        cls = Gemma3ForCausalLM if model_type == "gemma3_text" else Gemma3ForConditionalGeneration
        model = cls.from_pretrained(args.model_dir, dtype=torch.float32,
                                    attn_implementation="eager").eval()
        make_gemma3.NUM_GENERATED = args.tokens
        taps = make_gemma3.trace(model, inputs)
    taps_lib.save_taps(taps, args.out, {"model_dir": args.model_dir, "prompt": args.prompt,
                                        "chat_text": text})
    print(f"input_ids: {taps['input_ids'].tolist()}")
    print(f"generated: {taps['generated_ids'].tolist()} -> {args.out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", help="HF checkpoint directory (config.json, safetensors)")
    parser.add_argument("--image", action="append", default=[],
                        help="image file (any PIL-readable format); --chat: repeatable")
    parser.add_argument("--prompt", required=True, help='e.g. "caption en"')
    parser.add_argument("--out", required=True, help="output .safetensors")
    parser.add_argument("--tokens", type=int, default=16, help="greedy tokens to generate")
    parser.add_argument("--chat", action="store_true",
                        help="the prompt as one user turn of the chat template (Gemma 3, mllama)")
    parser.add_argument("--date", help="with --chat: the template's date_string")
    args = parser.parse_args()

    common.set_determinism()
    if args.chat:
        trace_chat(args)
        return
    if len(args.image) != 1:
        parser.error("PaliGemma takes exactly one --image")
    model, processor, dtype = taps_lib.load_model(args.model_dir)
    with Image.open(args.image[0]) as image:
        inputs = taps_lib.make_inputs(processor, image, args.prompt)
    with torch.no_grad():
        taps = taps_lib.trace(model, inputs, args.tokens)
    taps_lib.save_taps(taps, args.out, {"model_dir": args.model_dir, "image": args.image[0],
                                        "prompt": args.prompt, "dtype": str(dtype)})
    for name in taps_lib.tap_names(model.config):
        print(f"{name:24s} {list(taps[name].shape)}")
    print(f"generated: {taps['generated_ids'].tolist()} -> {args.out}")


if __name__ == "__main__":
    main()

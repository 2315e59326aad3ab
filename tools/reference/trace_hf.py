"""Dumps the named taps of any Hugging Face PaliGemma checkpoint for one image and prompt.

The reference side of the parity debugger: the C++ tracer writes the same tap names
(docs/testing.md), and comparing the two files tap by tap shows the first divergence.

Run: .venv/bin/python -m tools.reference.trace_hf MODEL_DIR --image F --prompt P \\
         --out acts.safetensors [--tokens 16]
"""

import argparse

import torch
from PIL import Image

from tools.reference import common, taps as taps_lib


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", help="HF PaliGemma directory (config.json, safetensors)")
    parser.add_argument("--image", required=True, help="image file (any PIL-readable format)")
    parser.add_argument("--prompt", required=True, help='e.g. "caption en"')
    parser.add_argument("--out", required=True, help="output .safetensors")
    parser.add_argument("--tokens", type=int, default=16, help="greedy tokens to generate")
    args = parser.parse_args()

    common.set_determinism()
    model, processor, dtype = taps_lib.load_model(args.model_dir)
    with Image.open(args.image) as image:
        inputs = taps_lib.make_inputs(processor, image, args.prompt)
    with torch.no_grad():
        taps = taps_lib.trace(model, inputs, args.tokens)
    taps_lib.save_taps(taps, args.out, {"model_dir": args.model_dir, "image": args.image,
                                        "prompt": args.prompt, "dtype": str(dtype)})
    for name in taps_lib.tap_names(model.config):
        print(f"{name:24s} {list(taps[name].shape)}")
    print(f"generated: {taps['generated_ids'].tolist()} -> {args.out}")


if __name__ == "__main__":
    main()

"""A random-init mllama whose text matrices fit every block format, for quantization quality.

The tiny golden checkpoints (make_mllama.py) are 36-48 wide: no row of their decoder fits a
quantized block, so `ocular quantize` writes them in f16 (the fallback) and measures nothing.
This one has the tiny vision tower (kept as stored by default anyway) and a text model 512
wide with an MLP of 1536 (multiples of 256: Q8_0, Q4_0, Q4_K and Q6_K all apply), 6 layers
with cross-attention at [2, 5], GQA 8/2, initialized like the tiny ones (O(1) activations, so
the next-token distributions are peaked, unlike the full-size random model's). ~80 MB in f32:
never committed; docs/quantization.md reports what bench/quant_quality measures on it.

Run: .venv/bin/python -m tools.reference.make_mllama_medium --out /tmp/mllama-medium
"""

import argparse

import torch

from tools.reference import make_mllama as tiny

TEXT = dict(hidden_size=512, num_attention_heads=8, num_key_value_heads=2, intermediate_size=1536,
            num_hidden_layers=6, cross_attention_layers=[2, 5])


def main():
    from transformers import MllamaForConditionalGeneration

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    tiny.TEXT["medium"] = TEXT
    tokenizer = tiny.load_tokenizer_dir(None)
    processor = tiny.make_processor(tokenizer)
    torch.manual_seed(31)
    model = MllamaForConditionalGeneration(tiny.make_config("medium", tokenizer)).eval()
    tiny.init_weights(model, 31)
    tiny.save(model, args.out, processor)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Regenerates every fixture this package owns, in dependency order (`make fixtures`).

tokenizer -> tiny checkpoints (use the tokenizer) -> goldens (run the checkpoints), then the
image-pipeline fixtures (PIL / SiglipImageProcessor; transparent files through each family's
processor, make_alpha_fixtures.py) and the tokenizer fixtures (HF tokenizers /
sentencepiece on the tiny and real vocabularies), the ggml block-format fixtures (gguf-py) and the real-GGUF fixtures (Gemma 3 270M Q4_K_M), and the segmentation mask-decoder fixtures
(torch + PIL, testdata/seg), then the tiny Gemma 3 checkpoints and goldens (make_gemma3.py) and
the tiny Llama 3.2 Vision checkpoints, goldens and pixel fixture (make_mllama.py), the tiny
Qwen3-VL checkpoints and goldens (make_qwen3vl.py), and the
chat-template goldens on those tiny checkpoints (make_chat_goldens.py). The
shapes demo model has its own recipe
(tools/demo_model, MODEL_CARD.md).
Deterministic: running it twice gives byte-identical files (docs/testing.md).
"""

from tools.reference import common
from tools.reference import make_alpha_fixtures
from tools.reference import make_chat_goldens
from tools.reference import make_gemma3
from tools.reference import make_gguf_fixtures
from tools.reference import make_mllama
from tools.reference import make_image_fixtures
from tools.reference import make_quant_fixtures
from tools.reference import make_qwen3vl
from tools.reference import make_seg_fixtures
from tools.reference.make_goldens import make_goldens
from tools.reference.make_text_fixtures import make_text_fixtures
from tools.reference.make_tiny import make_tiny
from tools.reference.make_tokenizer import make_tokenizer


def main():
    common.set_determinism()
    make_tokenizer()
    make_tiny()
    make_goldens()
    make_image_fixtures.main()
    make_alpha_fixtures.main()  # transparent files, read by make_mllama / make_qwen*'s goldens
    make_text_fixtures()
    make_quant_fixtures.main()
    make_gguf_fixtures.main()
    make_seg_fixtures.main()
    make_gemma3.main([])  # reseeds, so it cannot shift the fixtures above
    make_mllama.main([])  # reseeds too, and patches transformers' mllama vision encoder
    make_qwen3vl.main([])  # reseeds; reads the qwen2vl-pixels palette PNG (make_qwen2vl.py)
    make_chat_goldens.main()  # renders with the tiny checkpoints' processors


if __name__ == "__main__":
    main()

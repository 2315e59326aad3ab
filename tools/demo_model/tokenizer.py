"""The shapes-world tokenizer: PaliGemma's layout at a tiny vocabulary.

Built by the reference tools' own tiny-tokenizer builder (tools/reference/
make_tokenizer.make_tokenizer), only with the shapes-world corpus: SentencePiece BPE
with Gemma's trainer settings (byte fallback, no dummy prefix, pad 0 / eos 1 / bos 2 /
unk 3), the 1024 <locNNNN> + 128 <segNNN> pieces moved to the END of the vocabulary as
in the real PaliGemma vocabulary, and HF's `<image>` appended as an added special
token right after the SentencePiece vocabulary (docs/models.md sections 1.1 / 6). The
builder asserts that SentencePiece and the HF fast tokenizer agree on every line.

The vocabulary is trained on the shapes-world prompt/answer corpus, so every word
is one piece.
"""

from __future__ import annotations

import os
import tempfile

from tools.demo_model import shapes
from tools.reference import make_tokenizer as reference

LOC_TOKENS = reference.LOC_TOKENS
SEG_TOKENS = reference.SEG_TOKENS
IMAGE_TOKEN = reference.IMAGE_TOKEN
# Requested SentencePiece size; the corpus runs out of merges below it (BPE with
# hard_vocab_limit=False), so the real size is whatever the trainer reaches.
VOCAB_SIZE = 1600


def build(out_dir: str):
  """Writes tokenizer.model + HF files (tokenizer.json, configs) into out_dir and
  returns the HF fast tokenizer."""
  with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
      f.write("\n".join(shapes.corpus_lines()))
    return reference.make_tokenizer(out_dir, corpus=corpus, vocab_size=VOCAB_SIZE)


if __name__ == "__main__":
  import sys
  t = build(sys.argv[1])
  print(len(t), t.convert_tokens_to_ids(IMAGE_TOKEN))

"""The shapes-world tokenizer: PaliGemma's layout at a tiny vocabulary.

Same construction as the reference tools' tiny tokenizer (tools/reference/
make_tokenizer.py): SentencePiece BPE, byte fallback, no dummy prefix,
<pad>=0 <eos>=1 <bos>=2 <unk>=3, 1024 <locNNNN> + 128 <segNNN> user-defined pieces
(matched atomically), then HF's `<image>` appended as an added special token right
after the SentencePiece vocabulary (as in PaliGemma, MODELS.md section 1.1/6).
If the reference module exposes its training function it is used; otherwise the
equivalent trainer call below runs (same flags).

The vocabulary is trained on the shapes-world prompt/answer corpus so every word is
one piece.
"""

from __future__ import annotations

import io
import os

import sentencepiece as spm

from tools.demo_model import shapes

LOC_TOKENS = [f"<loc{i:04d}>" for i in range(1024)]
SEG_TOKENS = [f"<seg{i:03d}>" for i in range(128)]
IMAGE_TOKEN = "<image>"
VOCAB_SIZE = 1600  # SentencePiece pieces (words stop merging below this); +1 <image>.


def _train_sentencepiece(lines: list, vocab_size: int) -> bytes:
  """SentencePiece BPE model bytes (deterministic: single thread, fixed order)."""
  try:  # Prefer the reference tools' function when it exists.
    from tools.reference import make_tokenizer as ref  # type: ignore
    if hasattr(ref, "train_sentencepiece"):
      return ref.train_sentencepiece(lines, vocab_size=vocab_size)
  except ImportError:
    pass
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(lines),
      model_writer=model,
      model_type="bpe",
      vocab_size=vocab_size,
      byte_fallback=True,
      add_dummy_prefix=False,
      remove_extra_whitespaces=False,
      normalization_rule_name="identity",
      split_digits=True,
      pad_id=0, eos_id=1, bos_id=2, unk_id=3,
      pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
      user_defined_symbols=LOC_TOKENS + SEG_TOKENS,
      character_coverage=1.0,
      hard_vocab_limit=False,
      num_threads=1,
      shuffle_input_sentence=False,
      minloglevel=2,
  )
  return model.getvalue()


def build(out_dir: str):
  """Writes tokenizer.model + HF files (tokenizer.json, configs) into out_dir and
  returns the HF fast tokenizer."""
  from transformers import GemmaTokenizerFast

  os.makedirs(out_dir, exist_ok=True)
  lines = shapes.corpus_lines()
  model_path = os.path.join(out_dir, "tokenizer.model")
  with open(model_path, "wb") as f:
    f.write(_train_sentencepiece(lines, VOCAB_SIZE))
  tok = GemmaTokenizerFast(vocab_file=model_path, add_bos_token=False, add_eos_token=False)
  tok.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
  tok.save_pretrained(out_dir)
  return tok


if __name__ == "__main__":
  import sys
  t = build(sys.argv[1])
  print(len(t), t.convert_tokens_to_ids(IMAGE_TOKEN))

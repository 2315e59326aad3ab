"""Trains the tiny PaliGemma-style tokenizer used by every tiny checkpoint.

A SentencePiece BPE model with Gemma's trainer settings (byte fallback, no dummy prefix,
identity normalization, split digits, whitespace-only pieces, ids pad=0 eos=1 bos=2 unk=3)
plus PaliGemma's 1024 <locNNNN> and 128 <segNNN> user-defined pieces, trained on
tools/reference/corpus.txt. It is exported twice, as the reference stacks do:
    tokenizer.model                  the SentencePiece proto (what big_vision / gemma.cpp load)
    tokenizer.json + *_config.json   transformers' GemmaTokenizerFast converted from it, with
                                                                      "<image>" added as an additional special token (next id)
and the script asserts both give identical ids on the corpus and on loc/seg strings.

Run: .venv/bin/python -m tools.reference.make_tokenizer [--out testdata/tiny/tokenizer]
"""

import argparse
import os
import tempfile

import sentencepiece as spm

from tools.reference import common

CORPUS = os.path.join(os.path.dirname(__file__), "corpus.txt")
DEFAULT_OUT = "testdata/tiny/tokenizer"
IMAGE_TOKEN = "<image>"

LOC_TOKENS = [f"<loc{i:04d}>" for i in range(1024)]
SEG_TOKENS = [f"<seg{i:03d}>" for i in range(128)]

# Strings beyond the corpus that the two tokenizers must agree on (atomic loc/seg matching,
# byte fallback, whitespace runs, the "\n" separator of PaliGemma prompts).
EXTRA_STRINGS = [
        "<loc0000><loc1023><loc0512><loc0001> circle",
        "<loc0100><loc0200><loc0300><loc0400><seg000><seg127><seg064> cat ; dog",
        "detect circle\n",
        "caption en\n",
        "answer en what color is the square?\n",
        "<loc12345> <loc99> <seg1000> <locabcd>",
        "  two leading spaces and two trailing  ",
        "\n\n\t\ttabs and newlines\n",
        "unseen bytes: \u00ff \u2603 \U0001f600 \u0000",
            "",
]


def train(corpus_path, model_prefix, vocab_size=2048):
    """Trains the SentencePiece model; returns the serialized proto bytes."""
    spm.SentencePieceTrainer.train(
            input=corpus_path,
            model_prefix=model_prefix,
            model_type="bpe",
            vocab_size=vocab_size,
            hard_vocab_limit=False,
            character_coverage=1.0,
            byte_fallback=True,
            add_dummy_prefix=False,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            split_digits=True,
            allow_whitespace_only_pieces=True,
            pad_id=0, pad_piece="<pad>",
            eos_id=1, eos_piece="<eos>",
            bos_id=2, bos_piece="<bos>",
            unk_id=3, unk_piece="<unk>",
            user_defined_symbols=LOC_TOKENS + SEG_TOKENS,
            num_threads=1,
            seed_sentencepiece_size=100000,
            shuffle_input_sentence=False,
            input_sentence_size=0,
            minloglevel=2,
    )
    with open(model_prefix + ".model", "rb") as f:
        return f.read()


def canonicalize(proto_bytes):
    """Mirrors the real PaliGemma id layout and strips machine-specific trainer fields.

    SentencePiece puts user-defined pieces right after the control pieces; in the real
    PaliGemma vocabulary <loc0000>.. <seg127> are the last 1152 ids (256000..257151), so they
    are moved to the end (ids of a SentencePiece model are just positions in this list).
    The trainer spec records absolute input/output paths (a temp dir): replaced by fixed names
    so the file is byte-identical on every machine.
    """
    from sentencepiece import sentencepiece_model_pb2 as sp_pb2

    model = sp_pb2.ModelProto()
    model.ParseFromString(proto_bytes)
    user = [p for p in model.pieces if p.type == sp_pb2.ModelProto.SentencePiece.USER_DEFINED]
    rest = [p for p in model.pieces if p.type != sp_pb2.ModelProto.SentencePiece.USER_DEFINED]
    assert [p.piece for p in user] == LOC_TOKENS + SEG_TOKENS
    reordered = [sp_pb2.ModelProto.SentencePiece() for _ in range(len(model.pieces))]
    for dst, src in zip(reordered, rest + user):
        dst.CopyFrom(src)
    del model.pieces[:]
    model.pieces.extend(reordered)
    model.trainer_spec.input[:] = ["corpus.txt"]
    model.trainer_spec.model_prefix = "tokenizer"
    return model.SerializeToString(deterministic=True)


def check_agreement(sp, fast, lines):
    """Asserts SentencePiece and the HF fast tokenizer produce identical ids."""
    for text in lines:
        a = sp.encode(text)
        b = fast(text, add_special_tokens=False)["input_ids"]
        assert a == b, f"sentencepiece and HF disagree on {text!r}:\n  sp {a}\n  hf {b}"


def make_tokenizer(out_dir=DEFAULT_OUT, corpus=CORPUS, vocab_size=2048):
    """Builds the tokenizer into out_dir; returns the HF tokenizer (fast).

    corpus / vocab_size: other PaliGemma-style tokenizers built the same way (the shapes
    demo model, tools/demo_model/tokenizer.py) pass their own text corpus file."""
    from transformers import GemmaTokenizerFast  # slow import, keep the module light

    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proto = canonicalize(train(corpus, os.path.join(tmp, "sp"), vocab_size))
    model_path = os.path.join(out_dir, "tokenizer.model")
    common.write_bytes(model_path, proto)

    sp = spm.SentencePieceProcessor(model_proto=proto)
    assert (sp.pad_id(), sp.eos_id(), sp.bos_id(), sp.unk_id()) == (0, 1, 2, 3)
    n = sp.get_piece_size()
    assert sp.piece_to_id("<loc0000>") == n - 1152 and sp.piece_to_id("<seg127>") == n - 1

    fast = GemmaTokenizerFast(vocab_file=model_path, from_slow=True,
                                                        additional_special_tokens=[IMAGE_TOKEN])
    assert fast.convert_tokens_to_ids(IMAGE_TOKEN) == sp.get_piece_size(), "image id must follow sp"
    assert len(fast) == sp.get_piece_size() + 1
    # The processor adds "<bos>" itself; the tokenizer must not (PaliGemma processing contract).
    fast.add_bos_token = False
    fast.add_eos_token = False

    with open(corpus, encoding="utf-8") as f:
        corpus_lines = f.read().split("\n")
    check_agreement(sp, fast, corpus_lines + EXTRA_STRINGS)
    # Known divergence: HF matches special tokens ("<bos>", "<image>") written in the text
    # atomically, SentencePiece treats control pieces in text as plain characters. The
    # PaliGemma processor relies on the HF behaviour ("<image>"*N + "<bos>" + prompt).
    text = "<image><bos>caption en\n"
    hf_ids = fast(text, add_special_tokens=False)["input_ids"]
    assert hf_ids == [fast.convert_tokens_to_ids(IMAGE_TOKEN), sp.bos_id()] + sp.encode(text[12:]), hf_ids

    with tempfile.TemporaryDirectory() as tmp:
        fast.save_pretrained(tmp)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            with open(os.path.join(tmp, name), "rb") as f:
                common.write_bytes(os.path.join(out_dir, name), f.read())

    # Round trip: what a user loads from the directory agrees with sentencepiece too.
    reloaded = GemmaTokenizerFast.from_pretrained(out_dir)
    check_agreement(sp, reloaded, corpus_lines + EXTRA_STRINGS)
    print(f"tokenizer: {sp.get_piece_size()} sp pieces + {IMAGE_TOKEN} -> {out_dir}")
    return reloaded


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    common.set_determinism()
    make_tokenizer(args.out)


if __name__ == "__main__":
    main()

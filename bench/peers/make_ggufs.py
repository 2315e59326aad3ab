"""Random-weight GGUF files with PaliGemma's shapes, for timing llama.cpp on ocular's work.

llama.cpp has no PaliGemma, but it runs the same parts: PaliGemma 2's text decoder is a Gemma 2
2B (architecture "gemma2") and its vision tower a SigLIP So400m/14, which llama.cpp runs as the
mmproj of Gemma 3 (projector type "gemma3": the tower, a 4x4 average pool, RMSNorm and a
projection; PaliGemma's projector is one matmul, within 0.5 % of the FLOPs). Speed does not
depend on the values, so the weights are N(0, 0.02) and the norms 1.

Writes into OUT:
  gemma2-2b-<type>.gguf                     the decoder (H 2304, FF 9216, 26 layers, 8/4 heads,
                                            head_dim 256, vocab 257216), bf16 or f16
  mmproj-so400m-<size>-<type>.gguf          the tower at each --sizes (224 / 448 / 896), f16 or q8_0
  gemma3-1layer-2304.gguf                   a 1-layer Gemma 3 text model with a byte vocabulary
                                            whose hidden size matches the projector's output, so
                                            llama-mtmd-cli can load an mmproj and encode an image

Needs numpy and the PyPI gguf package only (the reference venv has both):
  .venv/bin/python bench/peers/make_ggufs.py --out peers [--decoder-types bf16]
      [--vision-types f16] [--sizes 224 448 896] [--layers 26]
--layers / --vision-layers / --vocab shrink the models for a quick smoke run (not for measuring).
"""

import argparse
import os

import numpy as np
import gguf

QT = gguf.GGMLQuantizationType
TT = gguf.TokenType

# PaliGemma 2 3B's decoder = Gemma 2 2B (docs/models.md).
GEMMA2 = dict(hidden=2304, ff=9216, layers=26, heads=8, kv_heads=4, head_dim=256, vocab=257216)
# SigLIP So400m/14.
SIGLIP = dict(hidden=1152, ff=4304, layers=27, heads=16, patch=14)


class Random:
    """N(0, 0.02) tensors in a ggml type, written straight into a GGUFWriter."""

    def __init__(self, writer, seed):
        self.w, self.rng = writer, np.random.default_rng(seed)

    def matrix(self, name, rows, cols, qtype):
        x = self.rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)
        if qtype == QT.BF16:  # truncation is fine for random values
            self.w.add_tensor(name, (x.view(np.uint32) >> 16).astype(np.uint16),
                              raw_shape=(rows, cols), raw_dtype=QT.BF16)
        elif qtype == QT.F16:
            self.w.add_tensor(name, x.astype(np.float16))
        elif qtype == QT.F32:
            self.w.add_tensor(name, x)
        else:
            self.w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    def vector(self, name, n, value=None):
        x = (np.full(n, value, np.float32) if value is not None
             else self.rng.standard_normal(n, dtype=np.float32) * np.float32(0.02))
        self.w.add_tensor(name, x)


def byte_vocab(writer, extra=()):
    """<pad> <eos> <bos> <unk>, the 256 byte pieces, then `extra` (piece, type) pairs."""
    toks = [("<pad>", TT.CONTROL), ("<eos>", TT.CONTROL), ("<bos>", TT.CONTROL),
            ("<unk>", TT.UNKNOWN)]
    toks += [(f"<0x{b:02X}>", TT.BYTE) for b in range(256)] + list(extra)
    writer.add_tokenizer_model("llama")
    writer.add_token_list([t for t, _ in toks])
    writer.add_token_scores([0.0] * len(toks))
    writer.add_token_types([int(t) for _, t in toks])
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    writer.add_pad_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    return len(toks)


def close(writer, path):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {path} ({os.path.getsize(path) / 2**20:.1f} MiB)", flush=True)


def decoder_layer(r, i, c, qtype):
    h, d = c["hidden"], c["head_dim"]
    for norm in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
        r.vector(f"blk.{i}.{norm}.weight", h, 1.0)
    r.matrix(f"blk.{i}.attn_q.weight", c["heads"] * d, h, qtype)
    r.matrix(f"blk.{i}.attn_k.weight", c["kv_heads"] * d, h, qtype)
    r.matrix(f"blk.{i}.attn_v.weight", c["kv_heads"] * d, h, qtype)
    r.matrix(f"blk.{i}.attn_output.weight", h, c["heads"] * d, qtype)
    r.matrix(f"blk.{i}.ffn_gate.weight", c["ff"], h, qtype)
    r.matrix(f"blk.{i}.ffn_up.weight", c["ff"], h, qtype)
    r.matrix(f"blk.{i}.ffn_down.weight", h, c["ff"], qtype)


def write_gemma2(path, qtype, layers, vocab):
    c = dict(GEMMA2, layers=layers, vocab=vocab)
    w = gguf.GGUFWriter(path, "gemma2")
    w.add_context_length(8192)
    w.add_embedding_length(c["hidden"])
    w.add_block_count(c["layers"])
    w.add_feed_forward_length(c["ff"])
    w.add_head_count(c["heads"])
    w.add_head_count_kv(c["kv_heads"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_attn_logit_softcapping(50.0)
    w.add_final_logit_softcapping(30.0)
    w.add_sliding_window(4096)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if qtype == QT.BF16 else gguf.LlamaFileType.MOSTLY_F16)
    # A byte vocabulary padded with plain pieces to PaliGemma's 257216 rows.
    n = byte_vocab(w, [(f"t{i}", TT.NORMAL) for i in range(c["vocab"] - 260)])
    r = Random(w, seed=0)
    r.matrix("token_embd.weight", n, c["hidden"], qtype)
    for i in range(c["layers"]):
        decoder_layer(r, i, c, qtype)
    r.vector("output_norm.weight", c["hidden"], 1.0)
    close(w, path)


def write_mmproj(path, size, qtype, layers, proj_dim):
    c = SIGLIP
    h, p = c["hidden"], c["patch"]
    w = gguf.GGUFWriter(path, "clip")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if qtype == QT.F16 else gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_clip_has_vision_encoder(True)
    w.add_clip_projector_type(gguf.VisionProjectorType.GEMMA3)
    w.add_vision_projection_dim(proj_dim)
    w.add_vision_image_size(size)
    w.add_vision_patch_size(p)
    w.add_vision_embedding_length(h)
    w.add_vision_feed_forward_length(c["ff"])
    w.add_vision_block_count(layers)
    w.add_vision_head_count(c["heads"])
    w.add_vision_attention_layernorm_eps(1e-6)
    w.add_vision_image_mean([0.5, 0.5, 0.5])
    w.add_vision_image_std([0.5, 0.5, 0.5])
    w.add_vision_use_gelu(True)
    r = Random(w, seed=size)
    # llama.cpp keeps the patch and position embeddings in f32 and the projection in f16
    # (convert_hf_to_gguf.py Gemma3VisionModel); Q8_0 needs rows that are whole blocks of 32.
    mat = lambda n, rows, cols: r.matrix(  # noqa: E731
        n, rows, cols, QT.F16 if qtype == QT.Q8_0 and cols % 32 else qtype)
    x = r.rng.standard_normal((h, 3, p, p), dtype=np.float32) * np.float32(0.02)
    w.add_tensor("v.patch_embd.weight", x)
    r.vector("v.patch_embd.bias", h)
    r.matrix("v.position_embd.weight", (size // p) ** 2, h, QT.F32)
    for i in range(layers):
        b = f"v.blk.{i}"
        for m in ("attn_q", "attn_k", "attn_v", "attn_out"):
            mat(f"{b}.{m}.weight", h, h)
            r.vector(f"{b}.{m}.bias", h)
        for ln in ("ln1", "ln2"):
            r.vector(f"{b}.{ln}.weight", h, 1.0)
            r.vector(f"{b}.{ln}.bias", h)
        mat(f"{b}.ffn_up.weight", c["ff"], h)
        r.vector(f"{b}.ffn_up.bias", c["ff"])
        mat(f"{b}.ffn_down.weight", h, c["ff"])
        r.vector(f"{b}.ffn_down.bias", h)
    r.vector("v.post_ln.weight", h, 1.0)
    r.vector("v.post_ln.bias", h)
    r.vector("mm.soft_emb_norm.weight", h, 1.0)
    r.matrix("mm.input_projection.weight", h, proj_dim, QT.F16)  # HF [D, H]: ne = [H, D]
    close(w, path)


def write_gemma3_stub(path, hidden):
    """One Gemma 3 layer over a byte vocabulary: what llama-mtmd-cli needs around an mmproj."""
    c = dict(hidden=hidden, ff=2048, heads=8, kv_heads=1, head_dim=256)
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_context_length(8192)
    w.add_embedding_length(hidden)
    w.add_block_count(1)
    w.add_feed_forward_length(c["ff"])
    w.add_head_count(c["heads"])
    w.add_head_count_kv(c["kv_heads"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n = byte_vocab(w, [("<start_of_turn>", TT.CONTROL), ("<end_of_turn>", TT.CONTROL),
                       ("<start_of_image>", TT.USER_DEFINED), ("<end_of_image>", TT.USER_DEFINED),
                       ("\u2581", TT.NORMAL), ("\n", TT.NORMAL)])
    r = Random(w, seed=1)
    r.matrix("token_embd.weight", n, hidden, QT.F16)
    for name in ("attn_q_norm", "attn_k_norm"):
        r.vector(f"blk.0.{name}.weight", c["head_dim"], 1.0)
    decoder_layer(r, 0, c, QT.F16)
    r.vector("output_norm.weight", hidden, 1.0)
    close(w, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for the files (several GB at full size)")
    ap.add_argument("--decoder-types", nargs="*", default=["bf16"], choices=["bf16", "f16"])
    ap.add_argument("--vision-types", nargs="*", default=["f16"], choices=["f16", "q8_0"])
    ap.add_argument("--sizes", nargs="*", type=int, default=[224, 448, 896])
    ap.add_argument("--layers", type=int, default=GEMMA2["layers"], help="decoder layers (smoke runs)")
    ap.add_argument("--vision-layers", type=int, default=SIGLIP["layers"])
    ap.add_argument("--vocab", type=int, default=GEMMA2["vocab"], help="decoder vocabulary (smoke runs)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for t in args.decoder_types:
        write_gemma2(os.path.join(args.out, f"gemma2-2b-{t}.gguf"), QT[t.upper()], args.layers,
                     max(args.vocab, 261))
    for t in args.vision_types:
        for s in args.sizes:
            assert s % SIGLIP["patch"] == 0, f"--sizes {s} is not a multiple of 14"
            write_mmproj(os.path.join(args.out, f"mmproj-so400m-{s}-{t}.gguf"), s,
                         QT[t.upper()], args.vision_layers, GEMMA2["hidden"])
    if args.vision_types:
        write_gemma3_stub(os.path.join(args.out, f"gemma3-1layer-{GEMMA2['hidden']}.gguf"),
                          GEMMA2["hidden"])


if __name__ == "__main__":
    main()

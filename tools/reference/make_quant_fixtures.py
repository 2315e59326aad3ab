"""Golden data for src/kernels/quant: ggml block formats as the `gguf` Python package writes
and reads them.

Run from the repo root:  .venv/bin/python -m tools.reference.make_quant_fixtures
Deterministic (seeded numpy; safetensors sorts its tensors): byte-identical on every run.
Needs only numpy, safetensors and gguf (tools/reference/requirements.txt).

Writes testdata/quant/blocks.safetensors:
  x                        F32 [12, 512]  rows with odd values (see rows()): zeros, tiny, huge,
                                          ties at .5 for every rounding, constant rows,
                                          negative-max blocks, all-positive / all-negative rows
  quantize/<fmt>           U8  [12, row bytes]  gguf.quants.quantize(x, fmt) for bf16, f16,
                                                q8_0, q4_0, q5_0
  dequantize/<fmt>/blocks  U8  [4, row bytes]   random valid blocks (finite f16 scales) of
                                                every format: f32, bf16, f16, q8_0, q4_0, q5_0,
                                                q4_k, q6_k
  dequantize/<fmt>/values  F32 [4, 512]         gguf.quants.dequantize of those blocks
"""

import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = os.path.join("testdata", "quant", "blocks.safetensors")
COLS = 512
TYPES = {"f32": T.F32, "bf16": T.BF16, "f16": T.F16, "q8_0": T.Q8_0, "q4_0": T.Q4_0,
         "q5_0": T.Q5_0, "q4_k": T.Q4_K, "q6_k": T.Q6_K}
QUANTIZED = ["bf16", "f16", "q8_0", "q4_0", "q5_0"]  # the formats gguf-py can quantize


def bits(u32):
    return np.array(u32, dtype=np.uint32).view(np.float32)


def rows(rng):
    r = []
    r.append(rng.standard_normal(COLS))                                   # 0 plain
    r.append(rng.uniform(-0.02, 0.02, COLS))                              # 1 weight-like
    x = rng.standard_normal(COLS) * 0.05
    x[rng.integers(0, COLS, 8)] = rng.choice([-6.0, 7.5, 12.0], 8)       # 2 outliers
    r.append(x)
    r.append(np.zeros(COLS))                                              # 3 zeros
    r.append(rng.standard_normal(COLS) * 1e-6)                            # 4 tiny (f16 subnormal)
    r.append(rng.uniform(-1e5, 1e5, COLS))                                # 5 huge (f16 overflow)
    # 6 ties: block 0 has amax 127 (Q8_0 d = 1, x * id = x), block 1 has max -8 (Q4_0 d = 1,
    # x * id + 8.5 integral), then bf16 and f16 rounding ties and their neighbours.
    x = np.zeros(COLS)
    x[0:32] = [127.0] + [(k + 0.5) * (-1) ** k for k in range(31)]
    x[32:64] = [-8.0] + [(k % 16) - 7.5 for k in range(31)]
    x[64:96] = bits([0x3F808000, 0x3F818000, 0xBF808000, 0x3F808001, 0x3F807FFF] * 6 + [0, 0])
    x[96:128] = bits([0x3F801000, 0x3F803000, 0xBF801000, 0x3F801001, 0x477FF000,
                      0x477FEFFF, 0x33000000, 0x33000001] * 4)
    x[128:] = rng.integers(-20, 20, COLS - 128) * 0.5
    r.append(x)
    r.append(np.full(COLS, 0.3))                                          # 7 all equal
    x = rng.uniform(0, 1, COLS)                                           # 8 negative-max blocks
    x[::32] = -1.5
    r.append(x)
    r.append(rng.standard_normal(COLS) * np.repeat(10.0 ** rng.uniform(-3, 3, COLS // 32), 32))
    r.append(np.abs(rng.standard_normal(COLS)) * 5 + 0.1)                 # 10 all positive
    r.append(-np.abs(rng.standard_normal(COLS)) * 0.1)                    # 11 all negative
    return np.stack(r).astype(np.float32)


def random_f16(rng, n, scale):
    """Finite f16 values (no inf/NaN), as raw bytes."""
    return (rng.uniform(-1, 1, n) * scale).astype(np.float16).view(np.uint8).reshape(n, 2)


def random_blocks(rng, name, n_rows):
    """n_rows random rows of valid blocks: random quants, finite f16 scales."""
    qtype = TYPES[name]
    block, size = quants.GGML_QUANT_SIZES[qtype]
    nb = n_rows * COLS // block
    if name == "f32":
        return rng.standard_normal(n_rows * COLS).astype(np.float32).view(np.uint8).reshape(n_rows, -1)
    if name == "bf16":
        return rng.integers(0, 256, (n_rows, COLS * 2), dtype=np.uint8)
    if name == "f16":
        return random_f16(rng, n_rows * COLS, 60000.0).reshape(n_rows, -1)
    b = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    if name in ("q8_0", "q4_0", "q5_0"):
        b[:, 0:2] = random_f16(rng, nb, 0.1)
    elif name == "q4_k":
        b[:, 0:2] = random_f16(rng, nb, 0.01)
        b[:, 2:4] = random_f16(rng, nb, 0.01)
    elif name == "q6_k":
        b[:, 208:210] = random_f16(rng, nb, 0.01)
    return b.reshape(n_rows, -1)


def main():
    from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(14)
    x = rows(rng)
    out = {"x": x}
    with np.errstate(over="ignore"):  # the huge row overflows f16 on purpose
        for name in QUANTIZED:
            q = quants.quantize(x, TYPES[name])
            out[f"quantize/{name}"] = np.ascontiguousarray(q).view(np.uint8).reshape(x.shape[0], -1)
    for name, qtype in TYPES.items():
        blocks = random_blocks(rng, name, 4)
        values = quants.dequantize(blocks, qtype).astype(np.float32, copy=False)
        out[f"dequantize/{name}/blocks"] = np.ascontiguousarray(blocks)
        out[f"dequantize/{name}/values"] = np.ascontiguousarray(values).reshape(4, COLS)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(out, OUT)
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()

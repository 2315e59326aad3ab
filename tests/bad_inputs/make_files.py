"""Writes the committed bad image files under tests/bad_inputs/files/ (standard library only).

PNGs with valid CRCs whose headers declare absurd sizes: the CRC check must not be what
stops them; the pixel budget (--max-image-pixels) or the size check must.
Usage: python3 tests/bad_inputs/make_files.py
"""
import pathlib
import struct
import zlib

OUT = pathlib.Path(__file__).resolve().parent / "files"


def chunk(kind: bytes, data: bytes) -> bytes:
  crc = zlib.crc32(kind + data) & 0xFFFFFFFF
  return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png(width: int, height: int, raw: bytes = b"") -> bytes:
  ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
  return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) +
          chunk(b"IEND", b""))


def main() -> None:
  OUT.mkdir(exist_ok=True)
  (OUT / "huge_dims.png").write_bytes(png(100000, 100000, b"\x00" * 301))
  (OUT / "wide_dims.png").write_bytes(png(2**31 - 1, 1, b"\x00" * 4))
  (OUT / "zero_width.png").write_bytes(png(0, 16))
  (OUT / "short_idat.png").write_bytes(png(64, 64, b"\x00" * 100))


if __name__ == "__main__":
  main()

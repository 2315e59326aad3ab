"""Image inputs: what the engine takes (a path or the bytes of an encoded file)."""

from __future__ import annotations

import os
from typing import Any


def to_engine_image(image: Any) -> Any:
    """One image as the C++ module takes it.

    Accepts a path (``str`` or ``os.PathLike``), the bytes of an encoded file (JPEG, PNG,
    WebP, GIF, BMP: decoded by the engine exactly as for a path), a ``PIL.Image.Image``
    (converted to RGB as ``image.convert("RGB")``) or a ``numpy`` array of shape
    ``(height, width, 3)`` and dtype ``uint8`` (RGB). PIL images and arrays are handed over
    as an uncompressed 24-bit BMP written by Pillow: lossless, so the engine sees the exact
    pixels.
    """
    if isinstance(image, str):
        return image
    if isinstance(image, os.PathLike):
        return os.fspath(image)
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    if _is_pil(image):
        return _bmp(image if image.mode == "RGB" else image.convert("RGB"))
    if _is_numpy(image):
        return _from_array(image)
    raise TypeError(
        f"image: expected a path, bytes, a PIL.Image or a (height, width, 3) uint8 numpy "
        f"array; got {type(image).__name__}"
    )


def _is_pil(obj: Any) -> bool:
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(obj, Image.Image)


def _is_numpy(obj: Any) -> bool:
    try:
        import numpy as np
    except ImportError:
        return False
    return isinstance(obj, np.ndarray)


def _from_array(array: Any) -> Any:
    import numpy as np

    if array.ndim != 3 or array.shape[2] != 3:
        raise ValueError(
            f"image: a numpy image must have shape (height, width, 3) (RGB); got {array.shape}"
        )
    if array.dtype != np.uint8:
        raise ValueError(f"image: a numpy image must have dtype uint8; got {array.dtype}")
    from PIL import Image

    return _bmp(Image.fromarray(np.ascontiguousarray(array)))


def _bmp(rgb: Any) -> bytes:
    import io

    out = io.BytesIO()
    rgb.save(out, format="BMP")
    return out.getvalue()

"""Image inputs: what the engine takes (a path or the bytes of an encoded file)."""

from __future__ import annotations

import os
from typing import Any


def to_engine_image(image: Any) -> Any:
    """One image as the C++ module takes it.

    Accepts a path (``str`` or ``os.PathLike``), the bytes of an encoded file (JPEG, PNG,
    WebP, GIF, BMP: decoded by the engine exactly as for a path), a ``PIL.Image.Image``
    or a ``numpy`` array of shape ``(height, width, 3)`` and dtype ``uint8`` (RGB). PIL
    images and arrays are handed over as an uncompressed 24-bit BMP written by Pillow
    (``image.convert("RGB")``): lossless, so the engine sees the exact pixels. A PIL image
    with transparency (a mode other than "RGB" with an alpha channel or a ``transparency``
    entry) goes as ``image.convert("RGBA")`` in a PNG instead, so that it keeps its alpha
    until the model family's processor decides (Llama 3.2 Vision composites it onto white,
    the others drop it), as a file of that image would.
    """
    if isinstance(image, str):
        return image
    if isinstance(image, os.PathLike):
        return os.fspath(image)
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    if _is_pil(image):
        if image.mode != "RGB" and ("A" in image.mode or "transparency" in image.info):
            return _encoded(image.convert("RGBA"), "PNG")
        return _encoded(image if image.mode == "RGB" else image.convert("RGB"), "BMP")
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

    return _encoded(Image.fromarray(np.ascontiguousarray(array)), "BMP")


def _encoded(image: Any, fmt: str) -> bytes:
    import io

    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()

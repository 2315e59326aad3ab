"""ocular: vision-language models on the CPU, the same answers as transformers.

    import ocular
    m = ocular.load("models/shapes-paligemma")
    r = m.generate("caption en", images=["models/shapes-paligemma/sample.png"])
    print(r.text, r.finish_reason, r.detections)

The C++ engine (the same as the ``ocular`` CLI's, its SIMD kernels chosen at run time for the
CPU) does the work; see docs/python.md.
"""

from ._model import Detection, Model, Result, Stream, Timings, load
from .errors import (
    DataLossError,
    InternalError,
    InvalidArgumentError,
    IoError,
    NotFoundError,
    OcularError,
    ResourceExhaustedError,
    UnimplementedError,
)

__version__ = "0.1.0"
__all__ = [
    "load",
    "Model",
    "Result",
    "Detection",
    "Timings",
    "Stream",
    "OcularError",
    "InvalidArgumentError",
    "NotFoundError",
    "DataLossError",
    "UnimplementedError",
    "ResourceExhaustedError",
    "IoError",
    "InternalError",
]

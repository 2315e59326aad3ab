"""Errors raised by ocular: every one carries the engine's status code and message.

The message starts with the component that failed, in brackets, and names the file, tensor or
value at fault, e.g. ``[image] cat.png: truncated PNG data``. Catch :class:`OcularError` for
all of them, or the subclass for one kind; each subclass is also the matching built-in
exception (``FileNotFoundError``, ``ValueError``, ``NotImplementedError``, ...), so code that
does not know ocular catches them the usual way.
"""

from __future__ import annotations


class OcularError(Exception):
    """An error from the ocular engine.

    Attributes:
        code: the status code's name, e.g. ``"InvalidArgument"``, ``"NotFound"``.
        code_value: its number in ``ocular::StatusCode`` (include/ocular/status.h).
        message: the engine's message, ``"[component] facts"``.
        exit_code: the exit code the ``ocular`` CLI reports for it (README: exit codes).
    """

    exit_code = 1

    def __init__(self, code: str, message: str, code_value: int = -1) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.code_value = code_value
        self.message = message


class InvalidArgumentError(OcularError, ValueError):
    """Malformed input: a request, prompt, option or undecodable image (CLI exit 2)."""

    exit_code = 2


class NotFoundError(OcularError, FileNotFoundError):
    """A missing file, tensor or key (CLI exit 3)."""

    exit_code = 3


class DataLossError(OcularError):
    """Corrupt or truncated file content (CLI exit 4)."""

    exit_code = 4


class UnimplementedError(OcularError, NotImplementedError):
    """Valid but not supported: architecture, dtype, codec, option (CLI exit 5)."""

    exit_code = 5


class ResourceExhaustedError(OcularError):
    """Over a limit: image pixels, context length, sizes (CLI exit 6)."""

    exit_code = 6


class IoError(OcularError, OSError):
    """The operating system refused: open, read, mmap (CLI exit 3)."""

    exit_code = 3


class InternalError(OcularError, RuntimeError):
    """A bug in ocular (CLI exit 1)."""


_BY_NAME = {
    "InvalidArgument": InvalidArgumentError,
    "NotFound": NotFoundError,
    "DataLoss": DataLossError,
    "Unimplemented": UnimplementedError,
    "ResourceExhausted": ResourceExhaustedError,
    "IoError": IoError,
    "Internal": InternalError,
}


def from_status(code_value: int, code: str, message: str) -> OcularError:
    """The exception for an engine Status (called by the C++ module)."""
    return _BY_NAME.get(code, OcularError)(code, message, code_value)

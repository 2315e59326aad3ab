# Type stubs of the C++ module (python/src/module.cc). Internal: use the ocular package, whose
# Python files carry the public API's types (py.typed).
from typing import Any, Callable, Optional, Sequence, Union

# str: a path; bytes: an encoded file (PIL images and arrays arrive as BMP).
_Image = Union[str, bytes]
_Message = tuple[str, Sequence[Optional[str]]]  # (role, [text | None for an image, ...])

class Engine:
    @staticmethod
    def load(
        path: str,
        threads: int,
        precision: str,
        kv_cache: str,
        quant_activations: str,
        max_batch: int,
        image_cache_bytes: int,
        max_image_pixels: int,
        min_pixels: int,
        max_pixels: int,
        seg_model: str,
        mmproj: str,
    ) -> Engine: ...
    def generate(
        self,
        images: Sequence[_Image],
        prompt: Optional[str],
        messages: Optional[Sequence[_Message]],
        options: dict[str, Any],
        on_text: Optional[Callable[[str], Optional[bool]]],
    ) -> dict[str, Any]: ...
    def generate_batch(
        self,
        requests: Sequence[
            tuple[Sequence[_Image], Optional[str], Optional[Sequence[_Message]], dict[str, Any]]
        ],
        make_error: Callable[[int, str, str], BaseException],
    ) -> list[Union[dict[str, Any], BaseException]]: ...
    def info(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, Any]: ...
    def tokenize(self, text: str) -> list[int]: ...
    def detokenize(self, ids: Sequence[int], skip_special: bool) -> str: ...

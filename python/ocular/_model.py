"""ocular.load() and the Model: generate, stream, chat and generate_batch over the C++ engine."""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import threading
import time
import uuid
from typing import Any, Iterator, Optional, Sequence

from . import _chat
from ._images import to_engine_image
from ._ocular import Engine as _Engine
from .errors import from_status


@dataclasses.dataclass(frozen=True)
class Timings:
    """Milliseconds per stage of one request, and its token counts."""

    image_ms: float  # decode + preprocess + vision encoder + projector
    prefill_ms: float
    decode_ms: float
    prefill_tokens: int
    decode_tokens: int
    constraint_ms: float = 0.0  # of decode_ms: the grammar's token masks (structured output)


@dataclasses.dataclass(frozen=True)
class Detection:
    """A detected object (from PaliGemma's ``<loc>`` tokens) in the first image's pixels.

    box: float32 array ``[x0, y0, x1, y1]`` (continuous edges, x in [0, width]).
    mask: bool array ``(height, width)`` of the whole image for a ``segment`` answer decoded
        with the mask model next to the checkpoint (``vae.safetensors`` / ``vae-oid.npz``,
        or ``seg_model=``); None otherwise.
    loc: the four ``<locNNNN>`` values as emitted (y_min, x_min, y_max, x_max).
    seg: the 16 ``<segNNN>`` codes of a ``segment`` answer; empty otherwise.
    """

    label: str
    box: Any
    mask: Any
    loc: tuple
    seg: tuple


@dataclasses.dataclass(frozen=True)
class Result:
    """One answer.

    text: the answer, special tokens skipped (what ``ocular run`` prints).
    tokens: the generated token ids (EOS included when produced).
    finish_reason: "eos", "length" (max_tokens), "stop" (a stop string) or "cancelled".
    detections: boxes (and masks) parsed from the answer, in the first image's pixels.
    timings: per-stage times and token counts.
    raw_text: the answer with special tokens (``<loc0123>``, ``<seg045>``) kept.
    prompt_tokens: the full prompt's ids, image tokens included.
    image_sizes: (width, height) of each decoded input image.
    """

    text: str
    tokens: list
    finish_reason: str
    detections: list
    timings: Timings
    raw_text: str
    prompt_tokens: list
    image_sizes: list


def _mask_array(mask: Any) -> Any:
    import numpy as np

    image_w, image_h, x0, y0, w, h, bits = mask
    full = np.zeros((image_h, image_w), dtype=bool)
    box = np.frombuffer(bits, dtype=np.uint8).reshape(h, w) != 0
    full[y0 : y0 + h, x0 : x0 + w] = box
    return full


def _result(d: dict) -> Result:
    import numpy as np

    detections = [
        Detection(
            label=x["label"],
            box=np.asarray(x["box"], dtype=np.float32),
            mask=None if x["mask"] is None else _mask_array(x["mask"]),
            loc=tuple(x["loc"]),
            seg=tuple(x["seg"]),
        )
        for x in d["detections"]
    ]
    return Result(
        text=d["text"],
        tokens=list(d["output_ids"]),
        finish_reason=d["finish_reason"],
        detections=detections,
        timings=Timings(**d["timings"]),
        raw_text=d["raw_text"],
        prompt_tokens=list(d["prompt_ids"]),
        image_sizes=[tuple(s) for s in d["image_sizes"]],
    )


def _options(
    max_tokens: int = 64,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    stop: Optional[Sequence[str]] = None,
    stop_at_eos: bool = True,
    separate_newline: bool = False,
    pan_and_scan: Optional[bool] = None,
    min_pixels: Optional[int] = None,
    max_pixels: Optional[int] = None,
    date: str = "",
    json_schema: Any = None,
    json_object: bool = False,
    regex: Optional[str] = None,
) -> dict:
    if isinstance(stop, str):
        stop = [stop]
    if json_schema is not None and not isinstance(json_schema, str):
        json_schema = json.dumps(json_schema)  # a dict (or list, bool) schema
    return {
        "max_tokens": int(max_tokens),
        "temperature": float(temperature),
        "top_k": int(top_k),
        "top_p": float(top_p),
        "seed": int(seed),
        "stop": list(stop or []),
        "stop_at_eos": bool(stop_at_eos),
        "separate_newline": bool(separate_newline),
        "pan_and_scan": pan_and_scan,
        "min_pixels": int(min_pixels or 0),
        "max_pixels": int(max_pixels or 0),
        "date": date,
        "json_schema": json_schema or "",
        "json_object": bool(json_object),
        "regex": regex or "",
    }


def _response_format(rf: Optional[dict]) -> dict:
    """OpenAI's (and llama-cpp-python's) chat ``response_format`` as generate options."""
    if rf is None or rf.get("type") == "text":
        return {}
    if rf.get("type") == "json_object":
        # llama-cpp-python also takes a "schema" here.
        return {"json_schema": rf["schema"]} if "schema" in rf else {"json_object": True}
    if rf.get("type") == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, dict) or "schema" not in js:
            raise ValueError('response_format json_schema needs {"json_schema": {"schema": ...}}')
        return {"json_schema": js["schema"]}
    raise ValueError(f"unsupported response_format type: {rf.get('type')!r}")


def _images(images: Any) -> list:
    if images is None:
        return []
    if not isinstance(images, (list, tuple)):
        images = [images]
    return [to_engine_image(i) for i in images]


class Stream:
    """The pieces of one answer as they decode (``for piece in model.stream(...)``).

    The pieces add up to ``result.text``; ``result`` is set once the iteration ends. Leaving
    the loop early (``break``, an exception, Ctrl-C) cancels the request.
    """

    def __init__(self, run: Any) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._cancel = threading.Event()
        self.result: Optional[Result] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._work, args=(run,), daemon=True)
        self._thread.start()

    def _work(self, run: Any) -> None:
        try:
            self.result = _result(run(self._on_text))
        except BaseException as e:  # re-raised on the consumer's thread
            self._error = e
        self._queue.put(None)

    def _on_text(self, piece: str) -> bool:
        if self._cancel.is_set():
            return False
        self._queue.put(piece)
        return True

    def __iter__(self) -> Iterator[str]:
        try:
            while True:
                piece = self._queue.get()
                if piece is None:
                    break
                yield piece
        finally:
            self._cancel.set()
            self._thread.join()
        if self._error is not None:
            raise self._error


class Model:
    """A loaded model (``ocular.load``).

    Thread-safety: every method may be called from many threads at once. The engine runs
    without the GIL; requests from several threads are decoded together (continuous
    batching, up to ``max_batch`` sequences per step, the rest waiting in arrival order), and
    each answer is the one the request gets alone. ``generate_batch`` does this for you.
    Ctrl-C (KeyboardInterrupt) on the main thread cancels the request it is waiting for; it
    is seen between decoded tokens (not inside the image encoder or the prefill).
    """

    def __init__(self, engine: _Engine, path: str) -> None:
        self._engine = engine
        self.path = path
        self.info = engine.info()

    def __repr__(self) -> str:
        i = self.info
        return f"<ocular.Model {self.path!r} {i['architecture']} {i['precision']} {i['isa']}>"

    def generate(self, prompt: str, images: Any = None, **options: Any) -> Result:
        """Answers ``prompt`` about ``images`` (none: a text-only prompt).

        images: one image or a list; each a path, encoded bytes, a ``PIL.Image`` or an
            ``(H, W, 3)`` uint8 numpy array (RGB).
        options: max_tokens=64, temperature=0.0 (greedy), top_k=0, top_p=1.0, seed=0,
            stop=None (strings that end the answer, cut before them), stop_at_eos=True,
            separate_newline=False, pan_and_scan=None (Gemma 3), date="" (Llama 3.2 chat),
            min_pixels=None / max_pixels=None (Qwen-VL: this request's resize bounds, at most
            the model's as loaded);
            structured output (one of): json_schema=dict or JSON text (the answer matches the
            schema), json_object=True (any JSON object), regex=str (the answer matches it).
            A schema the compiler does not support raises ``InvalidArgumentError`` naming
            the keyword.
        Raises an ``ocular.OcularError`` subclass on bad input (undecodable image, prompt
        over the context, bad option) with the engine's code and message.
        """
        d = self._engine.generate(_images(images), prompt, None, _options(**options), None)
        return _result(d)

    def stream(self, prompt: str, images: Any = None, **options: Any) -> Stream:
        """Like ``generate``, yielding the answer's pieces as they decode (a ``Stream``)."""
        imgs, opts = _images(images), _options(**options)
        return Stream(lambda on_text: self._engine.generate(imgs, prompt, None, opts, on_text))

    def generate_batch(
        self, requests: Sequence[dict], return_exceptions: bool = False
    ) -> list:
        """Runs many requests through the engine's continuous batching; results in order.

        Each request is a dict with ``prompt``, optional ``images`` and any ``generate``
        option. With return_exceptions, a failed request's slot holds its OcularError;
        otherwise the first failure is raised once all have finished.
        """
        packed = []
        for r in requests:
            r = dict(r)
            prompt, images = r.pop("prompt"), r.pop("images", None)
            packed.append((_images(images), prompt, None, _options(**r)))
        out = self._engine.generate_batch(packed, from_status)
        results = [x if isinstance(x, BaseException) else _result(x) for x in out]
        if not return_exceptions:
            for x in results:
                if isinstance(x, BaseException):
                    raise x
        return results

    def chat(
        self,
        messages: Sequence[dict],
        stream: bool = False,
        response_format: Optional[dict] = None,
        **options: Any,
    ) -> Any:
        """Answers an OpenAI-style conversation; returns an OpenAI ``chat.completion`` dict
        (as llama-cpp-python's ``create_chat_completion``), or with stream=True an iterator of
        ``chat.completion.chunk`` dicts.

        messages: ``[{"role": "user", "content": [{"type": "text", "text": ...},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}]}]``;
            an image_url may also be a path, a ``file://`` URL or an image object (PIL,
            numpy, bytes), and a part ``{"type": "image", "image": obj}`` is accepted.
            Roles: system, developer (as system), user, assistant.
        Models with a chat template (Gemma 3, Llama 3.2 Vision) format every message; the
        others (PaliGemma) answer the last user message's text about the images of the user
        messages, as ``ocular serve`` does. max_tokens defaults to 256 here.
        response_format: as OpenAI's: ``{"type": "json_object"}`` or ``{"type": "json_schema",
            "json_schema": {"name": ..., "schema": {...}}}`` (constrained decoding).
        """
        options.setdefault("max_tokens", 256)
        options.update(_response_format(response_format))
        run = self._chat_call(messages, _options(**options))
        model = os.path.basename(os.path.normpath(self.path))
        if not stream:
            return _chat.completion_dict(_result(run(None)), model)
        return self._chat_chunks(Stream(run), model)

    def _chat_call(self, messages: Sequence[dict], opts: dict) -> Any:
        conversation, images, prompt, user_images = _chat.convert_messages(messages)
        if self.info["chat_format"]:
            imgs = [to_engine_image(i) for i in images]
            return lambda on_text: self._engine.generate(imgs, None, conversation, opts, on_text)
        imgs = [to_engine_image(i) for i in user_images]
        return lambda on_text: self._engine.generate(imgs, prompt, None, opts, on_text)

    @staticmethod
    def _chat_chunks(s: Stream, model: str) -> Iterator[dict]:
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        yield _chat.chunk_dict(cid, created, model, {"role": "assistant", "content": ""}, None)
        for piece in s:
            yield _chat.chunk_dict(cid, created, model, {"content": piece}, None)
        reason = _chat.finish_reason(s.result.finish_reason) if s.result else "stop"
        yield _chat.chunk_dict(cid, created, model, {}, reason)

    def tokenize(self, text: str) -> list:
        """The tokenizer's ids of ``text`` (no BOS, no image tokens)."""
        return list(self._engine.tokenize(text))

    def detokenize(self, ids: Sequence[int], skip_special: bool = True) -> str:
        return self._engine.detokenize(list(ids), skip_special)

    def stats(self) -> dict:
        """The engine's counters: decode steps by batch size, running / waiting, KV bytes."""
        return self._engine.stats()


def load(
    path: str | os.PathLike,
    mmproj: Optional[str] = None,
    threads: int = 0,
    precision: Optional[str] = None,
    kv_cache: Optional[str] = None,
    quant_activations: Optional[str] = None,
    max_batch: int = 8,
    image_cache_bytes: int = 0,
    max_image_pixels: int = 50_000_000,
    seg_model: Optional[str] = None,
    min_pixels: Optional[int] = None,
    max_pixels: Optional[int] = None,
) -> Model:
    """Loads a model: an HF directory or a GGUF file (as ``ocular run -m``).

    threads: worker threads (0: ``OCULAR_THREADS`` or the physical cores).
    precision: "f32", "bf16", "bf16-fast" (None: the checkpoint's default, README).
    kv_cache: "f32" or "bf16" (None: bf16 under bf16 precisions).
    quant_activations: "int8" (default) or "f32", for quantized GGUF weights.
    max_batch: sequences decoded together (concurrent requests, generate_batch).
    image_cache_bytes: vision features kept for images seen again (0: off).
    max_image_pixels: images with more pixels are refused before they are decoded.
    min_pixels, max_pixels: Qwen-VL's image processor bounds (Qwen2VLImageProcessor's
        min_pixels / max_pixels) in place of the checkpoint's; other families raise
        InvalidArgumentError. None: the checkpoint's.
    seg_model: the mask model for ``segment`` answers (None: the one next to the checkpoint).
    mmproj: llama.cpp's mmproj file (vision encoder + projector) paired with a llama.cpp text
        GGUF given as ``path`` (as ``llama-mtmd-cli -m text.gguf --mmproj mmproj.gguf``).
    Raises NotFoundError, DataLossError, UnimplementedError, ... (ocular.errors).
    """
    engine = _Engine.load(
        os.fspath(path),
        int(threads),
        precision or "auto",
        kv_cache or "auto",
        quant_activations or "int8",
        int(max_batch),
        int(image_cache_bytes),
        int(max_image_pixels),
        int(min_pixels or 0),
        int(max_pixels or 0),
        seg_model or "",
        os.fspath(mmproj) if mmproj is not None else "",
    )
    return Model(engine, os.fspath(path))

"""OpenAI-style chat messages → the engine's conversation, and results → OpenAI-shaped dicts."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import time
import uuid
from typing import Any, Iterable

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def convert_messages(messages: Iterable[dict]) -> tuple[list, list, str, list]:
    """Returns (conversation, images, last user text, user images).

    conversation: [(role, [text | None for an image, ...]), ...] for models with a chat
    template; images: every image in order (paths, bytes, PIL images, arrays); the last user message's text parts joined by
    newlines and the images of the user messages: the prompt of a model without one
    (PaliGemma), as ``ocular serve`` does.
    """
    conversation: list = []
    images: list = []
    user_images: list = []
    last_user = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"messages[{i}]: expected a dict, got {type(message).__name__}")
        role = _ROLES.get(message.get("role"))
        if role is None:
            raise ValueError(
                f"messages[{i}].role: {message.get('role')!r} is not system, developer, user "
                f"or assistant"
            )
        parts, texts, imgs = _convert_content(message.get("content"), f"messages[{i}].content")
        conversation.append((role, parts))
        images.extend(imgs)
        if role == "user":
            user_images.extend(imgs)
            last_user = "\n".join(texts)
    if last_user is None:
        raise ValueError("messages: no user message")
    return conversation, images, last_user, user_images


def _convert_content(content: Any, where: str) -> tuple[list, list, list]:
    if content is None:
        return [], [], []
    if isinstance(content, str):
        return [content], [content], []
    if not isinstance(content, list):
        raise TypeError(f"{where}: expected a string or a list of parts")
    parts, texts, images = [], [], []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise TypeError(f"{at}.text: expected a string")
            parts.append(text)
            texts.append(text)
        elif kind == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            parts.append(None)
            images.append(_image_from_url(url, f"{at}.image_url.url"))
        elif kind in ("image", "input_image"):
            parts.append(None)
            images.append(part.get("image"))
        else:
            raise ValueError(f"{at}: a part of type {kind!r} (expected text, image_url or image)")
    return parts, texts, images


def _image_from_url(url: Any, where: str) -> Any:
    """A data: URL, a file:// URL or path, or an image object (PIL, numpy, bytes)."""
    if not isinstance(url, str):
        return url  # an image object: ocular._images converts it
    if url.startswith("data:"):
        header, sep, payload = url.partition(",")
        if not sep or not header.endswith(";base64"):
            raise ValueError(f"{where}: only base64 data URLs are accepted (data:image/png;base64,...)")
        try:
            return base64.b64decode(payload, validate=True)
        except binascii.Error as e:
            raise ValueError(f"{where}: invalid base64 in the data URL ({e})") from None
    if url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: ocular does not download images; pass a file, bytes or a data URL")
    if url.startswith("file://"):
        url = url[len("file://"):]
    return os.fspath(url)


def finish_reason(engine_reason: str) -> str:
    return "length" if engine_reason == "length" else "stop"


def completion_dict(result: Any, model: str) -> dict:
    """The OpenAI chat.completion object (llama-cpp-python's create_chat_completion shape),
    with ocular's detections and timings in choices[0].message.ocular as ``ocular serve``."""
    prompt, completion = len(result.prompt_tokens), len(result.tokens)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": result.text,
                    "ocular": _extras(result),
                },
                "logprobs": None,
                "finish_reason": finish_reason(result.finish_reason),
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def chunk_dict(cid: str, created: int, model: str, delta: dict, reason: Any) -> dict:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}],
    }


def _extras(result: Any) -> dict:
    extras: dict = {"timings": dataclasses.asdict(result.timings)}
    if result.detections:
        extras["detections"] = [
            {"x0": d.box[0], "y0": d.box[1], "x1": d.box[2], "y1": d.box[3], "label": d.label}
            for d in result.detections
        ]
    return extras

"""JSON and server-sent-event encoding of function results."""

from __future__ import annotations

import json
from typing import Any

# Values that are JSON results even though some of them are iterable.
JSON_TYPES = (str, bytes, bytearray, memoryview, dict, list, tuple, int, float, bool, type(None))


def _default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return bytes(o).decode("utf-8")  # UnicodeDecodeError is a ValueError: reported as unserialisable
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON. Raises TypeError/ValueError for values JSON cannot represent (incl. NaN)."""
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_default
    ).encode()


def is_async_iterator(value: Any) -> bool:
    return not isinstance(value, JSON_TYPES) and hasattr(type(value), "__anext__")


def is_iterator(value: Any) -> bool:
    return not isinstance(value, JSON_TYPES) and hasattr(type(value), "__next__")


def sse_event(value: Any, event: str | None = None) -> bytes:
    """One SSE event. ``str`` (and UTF-8 bytes) as is, anything else as compact JSON; one ``data:`` line
    per line of text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8")
    text = value if isinstance(value, str) else dumps(value).decode()
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    head = f"event: {event}\n" if event else ""
    return (head + "".join(f"data: {line}\n" for line in lines) + "\n").encode()

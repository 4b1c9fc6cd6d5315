"""The request body -> keyword arguments: a JSON object, parsed under the rules the gateway applies before
it accepts a run (src/gateway/body.ts), so a body refused here is refused there too, sync and async.

* UTF-8 only (invalid bytes are a 400, never replaced);
* nesting at most ``MAX_DEPTH`` levels (checked before parsing, so the limit never depends on the
  interpreter's recursion limit);
* numbers must fit a 64-bit float: ``1e999999`` is a 400 naming the argument, not an ``inf`` that fails
  later; ``NaN`` and ``Infinity`` are not JSON.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 512

# A JSON string (escapes included); what is left once strings are removed is structure and scalars.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_OPENERS = re.compile(rb"[\[{]")


class BodyError(ValueError):
    """The body breaks one of the rules; ``message`` says which (a 400)."""


class _OutOfRange:
    def __init__(self, text: str) -> None:
        self.text = text


def _depth(body: bytes) -> int:
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return 0  # cannot be deeper than it has openers: skip the scan (nearly every body)
    structure = _STRING.sub(b"", body)
    if len(_OPENERS.findall(structure)) <= MAX_DEPTH:
        return 0
    steps = (_STEP[c] for c in structure if c in _STEP)
    return max(accumulate(steps, initial=0))


def _refuse_constant(name: str) -> Any:
    raise BodyError(f"request body is not valid JSON: {name} is not a JSON value")


def _first_out_of_range(value: Any) -> str | None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, _OutOfRange):
            return v.text
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def parse_kwargs(body: bytes) -> Any:
    """The parsed body (``{}`` when empty); BodyError when it breaks a rule. Not checked to be an object."""
    if not body.strip():
        return {}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BodyError(f"request body is not valid UTF-8: {e}") from None
    if _depth(body) > MAX_DEPTH:
        raise BodyError(f"request body is nested deeper than {MAX_DEPTH} levels")
    overflow = [False]

    def parse_float(s: str) -> float | _OutOfRange:
        f = float(s)
        if math.isfinite(f):
            return f
        overflow[0] = True
        return _OutOfRange(s)

    def parse_int(s: str) -> int | float | _OutOfRange:
        i = int(s)
        # JavaScript (the gateway) and most JSON readers hold numbers as 64-bit floats.
        return i if abs(i) < 2**1024 else parse_float(s)

    try:
        value = json.loads(
            text, parse_float=parse_float, parse_int=parse_int, parse_constant=_refuse_constant
        )
    except BodyError:
        raise
    except (ValueError, RecursionError) as e:
        raise BodyError(f"request body is not valid JSON: {e}") from None
    if overflow[0]:
        raise BodyError(_out_of_range_message(value))
    return value


def _out_of_range_message(value: Any) -> str:
    items = value.items() if isinstance(value, dict) else [(None, value)]
    for key, v in items:
        text = _first_out_of_range(v)
        if text is not None:
            where = f"argument {key!r}: " if key is not None else ""
            shown = text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"
            return f"{where}number {shown} is out of range (a JSON number must fit a 64-bit float)"
    return "a number is out of range (a JSON number must fit a 64-bit float)"

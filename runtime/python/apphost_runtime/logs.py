"""Structured logging: one JSON object per line on stdout.

Every record carries ``time``, ``level`` and ``msg``; records about a call also carry ``request_id``,
``function``, ``duration_ms`` and ``status`` (passed through ``extra=`` or, for ``request_id`` and
``function``, picked up from context variables so that log lines emitted by user code through the
``logging`` module are tagged as well). Request bodies are never logged.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "apphost_request_id", default=None
)
function_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("apphost_function", default=None)

_FIELDS = ("request_id", "function", "duration_ms", "status")
_EXTRA_FIELDS = ("traceback", "events", "outcome", "error_type", "method", "path")

logger = logging.getLogger("apphost_runtime")


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": _now(),
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id_var.get()
        if rid is not None:
            out["request_id"] = rid
        fn = getattr(record, "function", None) or function_var.get()
        if fn is not None:
            out["function"] = fn
        for key in _FIELDS[2:] + _EXTRA_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = value
        if record.exc_info and "traceback" not in out:
            out["traceback"] = self.formatException(record.exc_info)
        if record.name != logger.name:
            out["logger"] = record.name
        return json.dumps(out, ensure_ascii=False, default=str, separators=(",", ":"))


def setup_logging(level: str = "info") -> None:
    """Route the root logger (so uvicorn's and the user's loggers too) to stdout as JSON lines."""
    try:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        pass
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    logging.getLogger("uvicorn.access").disabled = True

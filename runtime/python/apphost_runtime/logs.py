"""Structured logging: one JSON object per line on stdout.

Every record carries ``time``, ``level`` and ``msg``; records about a call also carry ``request_id``,
``function``, ``duration_ms`` and ``status`` (passed through ``extra=`` or, for ``request_id`` and
``function``, picked up from context variables so that log lines emitted by user code through the
``logging`` module are tagged as well). Request bodies are never logged.
"""

from __future__ import annotations

import asyncio
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


_second_cache: list = [-1, ""]


def _now() -> str:
    t = time.time()
    sec = int(t)
    if sec != _second_cache[0]:
        _second_cache[0] = sec
        _second_cache[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return f"{_second_cache[1]}.{int((t - sec) * 1000):03d}Z"


# Fast path for the per-call lines written from the event loop: no LogRecord/handler machinery, and the
# lines produced during one loop iteration are written with a single write() at its end (call_soon), so
# under load the runtime does not pay one syscall per request, and nothing waits longer than an iteration.
_pending: list[str] = []
_LEVEL_NAMES = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
}


_handler: logging.Handler | None = None  # its lock also serialises our writes with logging's (threads)


def flush() -> None:
    if _pending:
        data = "\n".join(_pending) + "\n"
        _pending.clear()
        h = _handler
        if h is not None:
            h.acquire()
        try:
            sys.stdout.write(data)
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        finally:
            if h is not None:
                h.release()


def call_log(level: int, msg: str, **fields: object) -> None:
    """Log one line about a call (fields: request_id, function, duration_ms, status, ...; None = omitted)."""
    if not logger.isEnabledFor(level):
        return
    rec: dict[str, object] = {"time": _now(), "level": _LEVEL_NAMES.get(level, "info"), "msg": msg}
    for k, v in fields.items():
        if v is not None:
            rec[k] = v
    line = json.dumps(rec, ensure_ascii=False, default=str, separators=(",", ":"))
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None:
        _pending.append(line)
        flush()
        return
    if not _pending:
        loop.call_soon(flush)
    _pending.append(line)


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
    global _handler
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    _handler = handler
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

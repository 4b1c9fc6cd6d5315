"""The ASGI application: routing, argument binding, calling, JSON and SSE responses, errors.

HTTP contract (see docs/runtimes.md for the author-facing version):

* ``POST /<name>`` body = JSON object of keyword arguments (empty body = ``{}``) -> ``name(**body)``.
  200 ``application/json`` with the return value, or, if the return value is an (async) iterator /
  generator, 200 ``text/event-stream`` with one ``data:`` event per yielded value.
* Errors are ``{"error": {"code": ..., "message": ...}}``, the platform's one error shape (``type``
  repeats ``code`` for clients of the first release; deprecated): 400 ``bad_request`` (body not JSON / not an
  object), 404 ``not_found`` (unknown function or nested path), 405 ``method_not_allowed``, 413
  ``payload_too_large``, 422 ``invalid_arguments``, 500 ``function_error`` / ``serialization_error``, 503
  ``shutting_down``, 429 ``at_capacity`` (``--max-concurrency`` calls already in progress). The last two never
  run the function and carry ``X-Apphost-Refused: <type>``.
* ``GET /health`` (alive), ``GET /ready`` (imported and not shutting down), ``GET /functions``.
* ``X-Request-Id`` is echoed (one is generated when absent) and tagged on every log line of the call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import json
import logging
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from .encoding import dumps, is_async_iterator, is_iterator, sse_event
from .jsonbody import BodyError, parse_kwargs
from .loader import Function
from .logs import call_log, function_var, logger, request_id_var

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PROBES = ("/health", "/ready", "/functions")
_JSON = b"application/json"
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
# Set on answers that refuse a call without running it (at_capacity, shutting_down): the gateway may retry
# those on another replica.
REFUSED_HEADER = b"x-apphost-refused"
_DONE = object()
_TOO_LARGE = object()


def _next(it: Any) -> Any:
    """``next()`` for use in a worker thread: StopIteration cannot cross a future, so map it to _DONE."""
    try:
        return next(it)
    except StopIteration:
        return _DONE


def _error_object(code: str, message: str) -> dict[str, str]:
    """The platform's error shape; ``type`` is the deprecated first spelling of ``code``."""
    return {"code": code, "message": message, "type": code}


def _error_body(code: str, message: str) -> bytes:
    return json.dumps(
        {"error": _error_object(code, message)}, ensure_ascii=False, separators=(",", ":")
    ).encode()


def _exc_message(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tb(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class CallError(Exception):
    def __init__(self, status: int, type_: str, message: str, tb: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.tb = tb


class Runtime:
    """ASGI callable serving ``functions``; blocking work runs on ``executor``."""

    def __init__(
        self,
        functions: dict[str, Function],
        executor: concurrent.futures.ThreadPoolExecutor,
        max_body_bytes: int = 100 * 1024 * 1024,
        max_concurrency: int = 0,
    ) -> None:
        self.functions = functions
        self.executor = executor
        self.max_body_bytes = max_body_bytes
        self.max_concurrency = max_concurrency
        self.shutting_down = False
        self.inflight = 0
        self.admitted = 0  # calls holding a max_concurrency slot (from arrival to the end of the response)
        self._functions_body = json.dumps(
            {"functions": [f.describe() for f in functions.values()]}, separators=(",", ":")
        ).encode()

    # ------------------------------------------------------------------ ASGI entry point
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is disabled in the server; websockets are not served
        path: str = scope["path"]
        method: str = scope["method"]
        rid = _request_id(scope)
        f = self.functions.get(path[1:])
        if f is not None:
            if method == "POST":
                await self._call(f, receive, send, rid)
            else:
                await self._error(
                    send,
                    rid,
                    405,
                    "method_not_allowed",
                    f"use POST to call {f.name}()",
                    f.name,
                    extra=[(b"allow", b"POST")],
                )
            return
        if path in PROBES:
            if method not in ("GET", "HEAD"):
                await self._error(
                    send,
                    rid,
                    405,
                    "method_not_allowed",
                    f"use GET for {path}",
                    None,
                    extra=[(b"allow", b"GET, HEAD")],
                )
            elif path == "/health":
                await _respond(send, 200, b'{"status":"ok"}', rid)
            elif path == "/ready":
                if self.shutting_down:
                    await _respond(send, 503, b'{"status":"shutting_down"}', rid)
                else:
                    await _respond(send, 200, b'{"status":"ready"}', rid)
            else:
                await _respond(send, 200, self._functions_body, rid)
            return
        name = path[1:]
        msg = f"unknown function {name!r}" if name else "no function named in the path (POST /<function>)"
        await self._error(send, rid, 404, "not_found", msg, None)

    # ------------------------------------------------------------------ helpers
    async def _error(
        self,
        send: Send,
        rid: str,
        status: int,
        type_: str,
        message: str,
        function: str | None,
        t0: float | None = None,
        tb: str | None = None,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        headers = list(extra or [])
        if status == 503:
            headers.append((b"connection", b"close"))
        await _respond(send, status, _error_body(type_, message), rid, extra=headers)
        level = logging.ERROR if status >= 500 else logging.WARNING
        call_log(
            level,
            message,
            request_id=rid,
            function=function,
            duration_ms=_ms(t0) if t0 is not None else None,
            status=status,
            error_type=type_,
            traceback=tb,
        )

    async def _read_body(self, receive: Receive) -> bytes | object | None:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return None
        body: bytes = msg.get("body", b"")
        if not msg.get("more_body", False):
            return _TOO_LARGE if len(body) > self.max_body_bytes else body
        chunks = [body]
        size = len(body)
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return None
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return _TOO_LARGE
            chunks.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(chunks)

    def _parse(self, f: Function, body: bytes) -> inspect.BoundArguments | dict[str, Any]:
        try:
            kwargs = parse_kwargs(body)
        except BodyError as e:
            raise CallError(400, "bad_request", str(e)) from None
        if not isinstance(kwargs, dict):
            kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
                type(kwargs), "a number"
            )
            raise CallError(
                400, "bad_request", f"request body must be a JSON object of keyword arguments, got {kind}"
            )
        if f.signature is None:
            return kwargs
        try:
            return f.signature.bind(**kwargs)
        except TypeError as e:
            raise CallError(422, "invalid_arguments", f"invalid arguments for {f.name}(): {e}") from None

    async def _invoke(self, f: Function, bound: inspect.BoundArguments | dict[str, Any]) -> Any:
        if isinstance(bound, dict):
            args: tuple[Any, ...] = ()
            kwargs = bound
        else:
            args, kwargs = bound.args, bound.kwargs
        if f.is_async:
            return await f.fn(*args, **kwargs)
        if f.is_generator_fn or f.is_async_generator_fn:
            result = f.fn(*args, **kwargs)  # creating a generator runs no user code: no thread hop needed
        else:
            ctx = contextvars.copy_context()
            call = functools.partial(f.fn, *args, **kwargs)
            result = await asyncio.get_running_loop().run_in_executor(self.executor, ctx.run, call)
        if inspect.isawaitable(result) and not is_async_iterator(result):
            result = await result  # e.g. a plain def that returns a coroutine (decorators, partials)
        return result

    # ------------------------------------------------------------------ a call
    async def _call(self, f: Function, receive: Receive, send: Send, rid: str) -> None:
        t0 = time.perf_counter()
        request_id_var.set(rid)
        function_var.set(f.name)
        if self.shutting_down:
            await self._error(
                send,
                rid,
                503,
                "shutting_down",
                "the runtime is shutting down; retry on another instance",
                f.name,
                t0,
                extra=[(REFUSED_HEADER, b"shutting_down")],
            )
            return
        if self.max_concurrency and self.admitted >= self.max_concurrency:
            # The backstop behind the gateways' own limit: with several gateways, each sees only its own
            # calls. The function does not run, so the gateway may safely send the call elsewhere.
            await self._error(
                send,
                rid,
                429,
                "at_capacity",
                f"this replica already serves {self.max_concurrency} call(s) (its limit); retry on another",
                f.name,
                t0,
                extra=[(REFUSED_HEADER, b"at_capacity"), (b"retry-after", b"1")],
            )
            return
        self.admitted += 1
        try:
            await self._admitted_call(f, receive, send, rid, t0)
        finally:
            self.admitted -= 1

    async def _admitted_call(self, f: Function, receive: Receive, send: Send, rid: str, t0: float) -> None:
        body = await self._read_body(receive)
        if body is None:
            call_log(
                logging.INFO,
                "client disconnected before sending the body",
                request_id=rid,
                function=f.name,
                duration_ms=_ms(t0),
            )
            return
        if body is _TOO_LARGE:
            await self._error(
                send,
                rid,
                413,
                "payload_too_large",
                f"request body larger than {self.max_body_bytes} bytes",
                f.name,
                t0,
            )
            return
        assert isinstance(body, bytes)
        self.inflight += 1
        try:
            try:
                bound = self._parse(f, body)
                try:
                    result = await self._invoke(f, bound)
                except asyncio.CancelledError:
                    raise
                except BaseException as e:  # noqa: BLE001 - user code may raise anything, even SystemExit
                    raise CallError(500, "function_error", _exc_message(e), _tb(e)) from None
                if is_async_iterator(result):
                    await self._stream(f, result, True, receive, send, rid, t0)
                    return
                if is_iterator(result):
                    await self._stream(f, result, False, receive, send, rid, t0)
                    return
                try:
                    payload = dumps(result)
                except (TypeError, ValueError, RecursionError) as e:
                    raise CallError(
                        500,
                        "serialization_error",
                        f"return value of {f.name}() is not JSON-serialisable: {_exc_message(e)}",
                        _tb(e),
                    ) from None
            except CallError as e:
                await self._error(send, rid, e.status, e.type, e.message, f.name, t0, e.tb)
                return
            await _respond(send, 200, payload, rid)
            call_log(logging.INFO, "call", request_id=rid, function=f.name, duration_ms=_ms(t0), status=200)
        finally:
            self.inflight -= 1

    # ------------------------------------------------------------------ server-sent events
    async def _stream(
        self, f: Function, it: Any, is_async: bool, receive: Receive, send: Send, rid: str, t0: float
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*_SSE_HEADERS, (b"x-request-id", rid.encode("latin-1", "replace"))],
            }
        )
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        pending: list[concurrent.futures.Future[Any] | None] = [None]
        state = {"events": 0, "stopped": False}

        async def emit(chunk: bytes) -> None:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async def pump() -> str:
            anext_ = type(it).__anext__ if is_async else None
            try:
                while not state["stopped"]:
                    if anext_ is not None:
                        try:
                            item = await anext_(it)
                        except StopAsyncIteration:
                            return "completed"
                    else:
                        cf = self.executor.submit(ctx.run, _next, it)
                        pending[0] = cf
                        item = await asyncio.wrap_future(cf, loop=loop)
                        pending[0] = None
                        if item is _DONE:
                            return "completed"
                    try:
                        chunk = sse_event(item)
                    except (TypeError, ValueError, RecursionError) as e:
                        msg = (
                            f"event {state['events']} of {f.name}() is not JSON-serialisable: "
                            f"{_exc_message(e)}"
                        )
                        call_log(logging.ERROR, msg, request_id=rid, function=f.name, traceback=_tb(e))
                        await emit(sse_event(_error_object("serialization_error", msg), "error"))
                        return "error"
                    await emit(chunk)
                    state["events"] += 1
                return "stopped"
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # noqa: BLE001
                call_log(
                    logging.ERROR,
                    f"{f.name}() raised while streaming: {_exc_message(e)}",
                    request_id=rid,
                    function=f.name,
                    error_type="function_error",
                    traceback=_tb(e),
                )
                await emit(sse_event(_error_object("function_error", _exc_message(e)), "error"))
                return "error"

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        pump_t = asyncio.ensure_future(pump())
        watch_t = asyncio.ensure_future(disconnected())
        outcome = "cancelled"
        try:
            done, _ = await asyncio.wait({pump_t, watch_t}, return_when=asyncio.FIRST_COMPLETED)
            if pump_t in done:
                outcome = pump_t.result()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                outcome = "disconnected"
        finally:
            state["stopped"] = True
            watch_t.cancel()
            if not pump_t.done():
                pump_t.cancel()
                await asyncio.wait({pump_t})
            await self._close_iterator(it, is_async, outcome, pending[0], ctx, rid, f.name)
            call_log(
                logging.INFO,
                "stream",
                request_id=rid,
                function=f.name,
                duration_ms=_ms(t0),
                status=200,
                events=state["events"],
                outcome=outcome,
            )

    async def _close_iterator(
        self,
        it: Any,
        is_async: bool,
        outcome: str,
        pending: concurrent.futures.Future[Any] | None,
        ctx: contextvars.Context,
        rid: str,
        name: str,
    ) -> None:
        """Run the generator's ``finally``: ``aclose()`` / ``close()`` (in a thread, after any ``next()`` in
        progress returns - a generator cannot be closed while it is executing)."""
        if outcome == "completed" and (inspect.isgenerator(it) or inspect.isasyncgen(it)):
            return  # exhausted: nothing to close
        if is_async:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except BaseException as e:  # noqa: BLE001
                    logger.warning(
                        f"closing the stream of {name}() raised {_exc_message(e)}",
                        extra={"request_id": rid, "function": name, "traceback": _tb(e)},
                    )
            return
        close = getattr(it, "close", None)
        if close is None:
            return

        def do_close() -> None:
            try:
                ctx.run(close)
            except BaseException as e:  # noqa: BLE001
                logger.warning(
                    f"closing the stream of {name}() raised {_exc_message(e)}",
                    extra={"request_id": rid, "function": name, "traceback": _tb(e)},
                )

        def submit(_: object = None) -> None:
            try:
                self.executor.submit(do_close)
            except RuntimeError:  # executor shut down: close on a plain thread
                import threading

                threading.Thread(target=do_close, daemon=True).start()

        if pending is not None and not pending.done():
            pending.add_done_callback(submit)  # runs once the in-progress next() has returned
        else:
            submit()


def _request_id(scope: Scope) -> str:
    for k, v in scope["headers"]:
        if k == b"x-request-id":
            rid = v.decode("latin-1").strip()[:200]
            if rid:
                return rid
    return uuid.uuid4().hex


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)


async def _respond(
    send: Send, status: int, body: bytes, rid: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [
        (b"content-type", _JSON),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", rid.encode("latin-1", "replace")),
    ]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

"""In-process checks of states that are hard to hit with exact timing over real HTTP (draining), and of
the SSE encoder. Everything else is tested against the real process."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json

import pytest

from apphost_runtime.app import Runtime
from apphost_runtime.encoding import sse_event
from apphost_runtime.loader import make_function


def add(a, b):
    return a + b


async def asgi_call(app, method: str, path: str, body: bytes = b"") -> tuple[int, dict, bytes]:
    sent: list[dict] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)

    async def send(msg):
        sent.append(msg)

    scope = {"type": "http", "method": method, "path": path, "headers": [(b"x-request-id", b"unit-1")]}
    await app(scope, receive, send)
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


@pytest.fixture
def app():
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        yield Runtime({"add": make_function("add", add)}, ex)


def test_draining_runtime_refuses_new_calls_and_is_not_ready(app):
    status, _, body = asyncio.run(asgi_call(app, "POST", "/add", b'{"a":1,"b":2}'))
    assert (status, body) == (200, b"3")
    assert asyncio.run(asgi_call(app, "GET", "/ready"))[0] == 200
    app.shutting_down = True
    status, headers, body = asyncio.run(asgi_call(app, "GET", "/ready"))
    assert status == 503 and json.loads(body) == {"status": "shutting_down"}
    status, headers, body = asyncio.run(asgi_call(app, "POST", "/add", b'{"a":1,"b":2}'))
    assert status == 503
    assert json.loads(body)["error"]["type"] == "shutting_down"
    assert headers["x-request-id"] == "unit-1"
    assert asyncio.run(asgi_call(app, "GET", "/health"))[0] == 200


def test_sse_encoding():
    assert sse_event("hi") == b"data: hi\n\n"
    assert sse_event("") == b"data: \n\n"
    assert sse_event("a\nb\r\nc") == b"data: a\ndata: b\ndata: c\n\n"
    assert sse_event({"k": "v é"}) == 'data: {"k":"v é"}\n\n'.encode()
    assert sse_event(3) == b"data: 3\n\n"
    assert sse_event(None) == b"data: null\n\n"
    assert sse_event({"type": "x"}, "error") == b'event: error\ndata: {"type":"x"}\n\n'
    with pytest.raises(TypeError):
        sse_event({1, 2})

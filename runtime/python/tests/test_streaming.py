"""Server-sent events: flushing per event, async generators, multi-line text, disconnects, errors."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest


def read_events(rt, name: str, body: dict) -> tuple[httpx.Response, list[tuple[float, str]], float]:
    """POST and return (response, [(arrival time, raw event text)], request start time)."""
    events: list[tuple[float, str]] = []
    buf = ""
    t0 = time.monotonic()
    with httpx.Client(base_url=rt.url, timeout=20) as client:
        with client.stream("POST", f"/{name}", json=body) as r:
            for chunk in r.iter_raw():
                buf += chunk.decode()
                while "\n\n" in buf:
                    ev, buf = buf.split("\n\n", 1)
                    events.append((time.monotonic(), ev))
            assert buf == ""
            return r, events, t0


def data_of(ev: str) -> str:
    return "\n".join(line[len("data: ") :] for line in ev.split("\n") if line.startswith("data: "))


def _assert_sse_headers(r: httpx.Response) -> None:
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in r.headers


@pytest.mark.parametrize("name", ["ticks", "aticks"])
def test_generator_events_arrive_one_by_one(rt, name):
    gap = 0.3
    r, events, t0 = read_events(rt, name, {"n": 3, "gap": gap})
    _assert_sse_headers(r)
    assert [json.loads(data_of(ev)) for _, ev in events] == [{"i": 0}, {"i": 1}, {"i": 2}]
    first, last = events[0][0] - t0, events[-1][0] - t0
    gaps = [round(b[0] - a[0], 3) for a, b in zip(events, events[1:], strict=False)]
    print(f"{name}: first event after {first * 1000:.0f} ms, last after {last * 1000:.0f} ms, gaps {gaps} s")
    # The generator needs >= 2*gap to yield the last event: the first must arrive long before that.
    assert first < 2 * gap * 0.75
    assert last - first >= 2 * gap * 0.8
    assert all(g >= gap * 0.7 for g in gaps)


def test_plain_iterator_object_is_streamed(rt):
    r, events, _ = read_events(rt, "iterator_object", {"n": 3})
    _assert_sse_headers(r)
    assert [data_of(ev) for _, ev in events] == ["0", "1", "2"]


def test_multiline_string_event(rt):
    with httpx.Client(base_url=rt.url, timeout=10) as client:
        r = client.post("/multiline")
    _assert_sse_headers(r)
    assert r.content == b'data: line one\ndata: line two\n\ndata: plain\n\ndata: ["not","text"]\n\n'


def test_error_mid_stream_sends_error_event(rt):
    r, events, _ = read_events(rt, "stream_fails", {})
    _assert_sse_headers(r)
    assert len(events) == 2
    assert data_of(events[0][1]) == "first"
    lines = events[1][1].split("\n")
    assert lines[0] == "event: error"
    err = json.loads(data_of(events[1][1]))
    assert err["type"] == "function_error"
    assert err["code"] == "function_error"
    assert "RuntimeError" in err["message"] and "mid-stream failure" in err["message"]
    assert rt.alive()


@pytest.mark.parametrize("name", ["forever", "aforever"])
def test_client_disconnect_closes_generator(rt, tmp_path: Path, name):
    marker = tmp_path / f"{name}.closed"
    body = json.dumps({"marker": str(marker)}).encode()
    req = (
        f"POST /{name} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with socket.create_connection(("127.0.0.1", rt.port), timeout=5) as s:
        s.sendall(req)
        got = b""
        while got.count(b"data: ") < 2:
            chunk = s.recv(4096)
            assert chunk, "connection closed before events arrived"
            got += chunk
        assert b"200 OK" in got.split(b"\r\n", 1)[0]
        assert not marker.exists(), "generator closed while the client was still connected"
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), f"generator's finally did not run after the client disconnected\n{rt.stdout()}"
    assert marker.read_text() == "closed"
    assert rt.alive()
    r = httpx.post(f"{rt.url}/add", json={"a": 1, "b": 1}, timeout=5)
    assert r.status_code == 200 and r.json() == 2

"""Plain JSON calls, concurrency, probes, /functions, request ids and logs."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx


def test_kwargs_echo(rt):
    body = {"a": 1, "b": [1, 2, {"c": None}], "text": "héllo ✓", "flag": True}
    r = httpx.post(f"{rt.url}/echo", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json() == body


def test_empty_body_is_no_arguments(rt):
    r = httpx.post(f"{rt.url}/echo", content=b"")
    assert r.status_code == 200, r.text
    assert r.json() == {}


def test_positional_names_and_non_dict_results(rt):
    assert httpx.post(f"{rt.url}/add", json={"a": 2, "b": 3}).json() == 5
    r = httpx.post(f"{rt.url}/returns_list")
    assert r.status_code == 200 and r.json() == [1, "two", None]


def test_main_can_import_siblings(rt):
    r = httpx.post(f"{rt.url}/hello", json={"name": "ada"})
    assert r.status_code == 200, r.text
    assert r.json() == "hello ada"


def test_async_def_function(rt):
    r = httpx.post(f"{rt.url}/aadd", json={"a": 40, "b": 2})
    assert r.status_code == 200, r.text
    assert r.json() == {"sum": 42, "async": True}


def test_only_public_functions_defined_in_main_are_callable(rt):
    for name in ("_private", "join", "Thing", "time", "asyncio"):
        r = httpx.post(f"{rt.url}/{name}", json={})
        assert r.status_code == 404, (name, r.text)
        assert r.json()["error"]["type"] == "not_found"


def test_blocking_function_does_not_stall_others(rt, tmp_path):
    # Proven by rendezvous, not by timing: both blocking calls must be inside the function at once,
    # and /health must answer while they are held there.
    release = tmp_path / "release"

    def call():
        return httpx.post(
            f"{rt.url}/meet", json={"key": str(release), "parties": 2, "release": str(release)}, timeout=60
        )

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(call) for _ in range(2)]
        deadline = time.monotonic() + 30
        while not all((tmp_path / f"release.{n}").exists() for n in (0, 1)):
            assert time.monotonic() < deadline, "the two blocking calls never ran at the same time"
            assert not any(f.done() for f in futures), [f.result().text for f in futures if f.done()]
            time.sleep(0.02)
        assert httpx.get(f"{rt.url}/health", timeout=10).status_code == 200
        release.touch()
        results = [f.result() for f in futures]
    assert [r.status_code for r in results] == [200, 200], [r.text for r in results]
    assert all(r.json() == {"met": 2} for r in results)


def test_fifty_concurrent_blocking_calls(rt, tmp_path):
    # All 50 blocking calls must be inside the function at once (a 50-party rendezvous),
    # not queued behind a small pool.
    release = tmp_path / "release"
    release.touch()  # no hold after the rendezvous

    async def run() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx.AsyncClient(base_url=rt.url, limits=limits, timeout=60) as client:
            body = {"key": f"{tmp_path}/fifty", "parties": 50, "release": str(release)}
            return await asyncio.gather(*(client.post("/meet", json=body) for _ in range(50)))

    responses = asyncio.run(run())
    assert [r.status_code for r in responses] == [200] * 50, [
        r.text for r in responses if r.status_code != 200
    ][:1]


def test_health_ready(rt):
    r = httpx.get(f"{rt.url}/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    r = httpx.get(f"{rt.url}/ready")
    assert r.status_code == 200


def test_functions_listing(rt):
    r = httpx.get(f"{rt.url}/functions")
    assert r.status_code == 200
    fns = {f["name"]: f for f in r.json()["functions"]}
    for name in ("echo", "add", "aadd", "sleep", "ticks", "aticks", "forever", "fails"):
        assert name in fns
    for name in ("_private", "join", "Thing", "greet", "time"):
        assert name not in fns
    assert fns["ticks"]["streaming"] is True
    assert fns["aticks"]["streaming"] is True
    assert fns["add"]["streaming"] is False
    assert fns["aadd"]["streaming"] is False
    assert fns["add"]["parameters"] == ["a", "b"]
    assert fns["add"]["required"] == ["a", "b"]
    assert fns["ticks"]["required"] == []


def test_request_id_echoed_and_logged_without_body(rt):
    secret = "s3cr3t-body-value-7f1c"
    r = httpx.post(f"{rt.url}/echo", json={"secret": secret}, headers={"X-Request-Id": "req-abc-123"})
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "req-abc-123"
    r = httpx.post(f"{rt.url}/nope", json={}, headers={"X-Request-Id": "req-404"})
    assert r.status_code == 404 and r.headers["x-request-id"] == "req-404"
    r = httpx.post(f"{rt.url}/echo", json={})
    assert r.headers.get("x-request-id"), "a request id is generated when the gateway sent none"

    deadline = time.monotonic() + 3
    while True:
        lines = [json.loads(line) for line in rt.stdout().splitlines() if line.startswith("{")]
        mine = [rec for rec in lines if rec.get("request_id") == "req-abc-123"]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert mine, rt.stdout()
    rec = mine[-1]
    assert rec["function"] == "echo" and rec["status"] == 200
    assert {"time", "level", "msg", "duration_ms"} <= rec.keys()
    assert secret not in rt.stdout()
    assert any(rec.get("request_id") == "req-404" and rec["status"] == 404 for rec in lines)


def test_user_logging_is_json_and_tagged_with_request_id(rt):
    r = httpx.post(f"{rt.url}/logs_something", headers={"X-Request-Id": "req-user-log"})
    assert r.status_code == 200
    deadline = time.monotonic() + 3
    while True:
        recs = [json.loads(line) for line in rt.stdout().splitlines() if line.startswith("{")]
        user = [rec for rec in recs if rec.get("msg") == "hello from user code"]
        if user or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert user, rt.stdout()
    assert user[0]["request_id"] == "req-user-log"
    assert user[0]["function"] == "logs_something"
    assert user[0]["level"] == "warning"

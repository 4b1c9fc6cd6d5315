"""The runtime's own concurrency limit (--max-concurrency), the backstop behind the gateways' limit."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
from conftest import spawn, wait_ready, write_app

APP = """
import os
import time


def hold(started, release):
    open(started, "w").close()
    while not os.path.exists(release):
        time.sleep(0.01)
    return "done"


def ticks(started, release):
    open(started, "w").close()
    yield 1
    while not os.path.exists(release):
        time.sleep(0.01)
    yield 2


def quick():
    return "ok"
"""


def _bg(url: str, path: str, body: dict, out: dict, stream: bool = False) -> threading.Thread:
    def run() -> None:
        try:
            r = httpx.post(f"{url}{path}", json=body, timeout=20)
            out["status"], out["text"] = r.status_code, r.text
        except Exception as e:  # noqa: BLE001
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait(path: Path) -> None:
    deadline = time.monotonic() + 10
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_a_call_over_the_limit_is_refused_with_429_without_running(start_runtime, tmp_path):
    rt = start_runtime(APP, "--max-concurrency", "1")
    started, release = tmp_path / "started", tmp_path / "release"
    out: dict = {}
    t = _bg(rt.url, "/hold", {"started": str(started), "release": str(release)}, out)
    _wait(started)
    # A second call, even to another function, is refused at once and does not run.
    marker = tmp_path / "second-started"
    r = httpx.post(f"{rt.url}/hold", json={"started": str(marker), "release": str(release)}, timeout=10)
    assert r.status_code == 429
    assert r.headers["x-apphost-refused"] == "at_capacity"
    assert r.headers["retry-after"] == "1"
    assert r.json()["error"]["code"] == "at_capacity"
    assert not marker.exists()
    release.touch()
    t.join(timeout=10)
    assert out.get("status") == 200, out
    # The slot is free again.
    assert httpx.post(f"{rt.url}/quick", json={}, timeout=10).status_code == 200


def test_a_stream_holds_its_slot_until_it_ends(start_runtime, tmp_path):
    rt = start_runtime(APP, "--max-concurrency", "1")
    started, release = tmp_path / "started", tmp_path / "release"
    with httpx.Client(base_url=rt.url, timeout=20) as client:
        with client.stream("POST", "/ticks", json={"started": str(started), "release": str(release)}) as s:
            lines = s.iter_lines()
            assert next(line for line in lines if line.startswith("data: ")) == "data: 1"
            assert httpx.post(f"{rt.url}/quick", json={}, timeout=10).status_code == 429
            release.touch()
            assert [line for line in lines if line.startswith("data: ")] == ["data: 2"]
    assert httpx.post(f"{rt.url}/quick", json={}, timeout=10).status_code == 200


def test_no_limit_by_default(start_runtime, tmp_path):
    rt = start_runtime(APP)
    started, release = tmp_path / "started", tmp_path / "release"
    out: dict = {}
    t = _bg(rt.url, "/hold", {"started": str(started), "release": str(release)}, out)
    _wait(started)
    assert httpx.post(f"{rt.url}/quick", json={}, timeout=10).status_code == 200
    release.touch()
    t.join(timeout=10)


def test_shutting_down_refusal_says_the_function_did_not_run(tmp_path):
    rt = spawn(write_app(tmp_path / "app", APP), "--grace-seconds", "10", tmp=tmp_path)
    try:
        wait_ready(rt)
        started, release = tmp_path / "started", tmp_path / "release"
        out: dict = {}
        t = _bg(rt.url, "/hold", {"started": str(started), "release": str(release)}, out)
        _wait(started)
        rt.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while True:
            # uvicorn closes its listener shortly after the signal; until then calls are refused.
            try:
                r = httpx.post(f"{rt.url}/quick", json={}, timeout=5)
            except httpx.TransportError:
                r = None
                break
            if r.status_code == 503:
                break
            assert time.monotonic() < deadline, "never refused"
            time.sleep(0.01)
        if r is not None:
            assert r.headers["x-apphost-refused"] == "shutting_down"
        release.touch()
        t.join(timeout=10)
        assert out.get("status") == 200
    finally:
        rt.stop()


def test_max_concurrency_must_not_be_negative(tmp_path):
    rt = spawn(write_app(tmp_path / "app", APP), "--max-concurrency", "-1", tmp=tmp_path)
    try:
        assert rt.proc.wait(timeout=15) != 0
        assert "--max-concurrency must be >= 0" in rt.stderr()
    finally:
        rt.stop()

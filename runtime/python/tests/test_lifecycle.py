"""Start-up (import errors) and SIGTERM drain."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import spawn, write_app

SLOW_APP = """
import time


def sleep(seconds, started=None):
    if started:
        open(started, "w").close()  # tells the test the call is in flight
    time.sleep(seconds)
    return {"slept": seconds}


def ticks(n=4, gap=0.3):
    for i in range(n):
        if i:
            time.sleep(gap)
        yield i
"""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\n\nraise RuntimeError('kaboom at import time')\n", "RuntimeError: kaboom at import time"),
        ("import no_such_module_xyz\n", "ModuleNotFoundError"),
    ],
    ids=["raises", "missing-module"],
)
def test_import_error_exits_nonzero_with_traceback(tmp_path, source, expected):
    app = write_app(tmp_path / "broken", source)
    rt = spawn(app, tmp=tmp_path)
    try:
        code = rt.proc.wait(timeout=15)
    finally:
        rt.stop()
    assert code != 0
    err = rt.stderr()
    assert "Traceback" in err and expected in err
    assert "Uvicorn running" not in rt.stdout()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "def ok():\n    return 1\n\ndef broken(:\n    pass\n",
            ['main.py", line 4', "def broken(:", "^", "SyntaxError:"],
        ),
        (
            "import os\n\nraise RuntimeError('kaboom at import time')\n",
            ['main.py", line 3, in <module>', "RuntimeError: kaboom at import time"],
        ),
        ("import helper\n", ['helper.py", line 1, in <module>', "ZeroDivisionError: division by zero"]),
    ],
    ids=["syntax-error", "raises", "raises-in-sibling-module"],
)
def test_import_error_is_written_to_the_termination_log(tmp_path, source, expected):
    """What Kubernetes shows as the container's last termination message (and the App's status names)."""
    app = write_app(tmp_path / "broken", source, helper="x = 1 / 0\n")
    log = tmp_path / "termination-log"
    log.write_text("")  # the kubelet creates the file; the runtime only writes into it
    rt = spawn(app, "--termination-log", str(log), tmp=tmp_path)
    try:
        assert rt.proc.wait(timeout=15) == 1
    finally:
        rt.stop()
    message = log.read_text()
    assert message.startswith(f"cannot import {app}/main.py:\n")
    for part in expected:
        assert part in message, message
    assert "Traceback" not in message  # the error, not the runtime's own frames: those stay in the log
    assert len(message.encode()) <= 4096


def test_no_termination_log_is_created_outside_kubernetes(tmp_path):
    app = write_app(tmp_path / "broken", "raise RuntimeError('x')\n")
    log = tmp_path / "no-such-dir-file"
    rt = spawn(app, "--termination-log", str(log), tmp=tmp_path)
    try:
        assert rt.proc.wait(timeout=15) == 1
    finally:
        rt.stop()
    assert not log.exists()


def test_a_long_error_keeps_its_end_within_the_kubelet_bound():
    from apphost_runtime.__main__ import MAX_TERMINATION_MESSAGE_BYTES, termination_message

    try:
        raise ValueError("é" * 5000 + " the end")
    except ValueError as e:
        message = termination_message("/app", e)
    assert len(message.encode()) <= MAX_TERMINATION_MESSAGE_BYTES
    assert message.endswith(" the end")


def _call_in_thread(url: str, path: str, body: dict, out: dict) -> threading.Thread:
    def run() -> None:
        try:
            out["response"] = httpx.post(f"{url}{path}", json=body, timeout=20)
        except Exception as e:  # noqa: BLE001
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait_inflight(rt, started: Path) -> None:
    """Wait until the function has started running (it creates the ``started`` file)."""
    deadline = time.monotonic() + 10
    while not started.exists():
        assert rt.alive() and time.monotonic() < deadline, "the call never started"
        time.sleep(0.01)


def test_sigterm_lets_inflight_call_finish_then_exits_zero(start_runtime, tmp_path):
    rt = start_runtime(SLOW_APP, "--grace-seconds", "10")
    out: dict = {}
    started = tmp_path / "started"
    t = _call_in_thread(rt.url, "/sleep", {"seconds": 1.5, "started": str(started)}, out)
    _wait_inflight(rt, started)
    t_sig = time.monotonic()
    rt.proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    try:
        ready = httpx.get(f"{rt.url}/ready", timeout=2).status_code
    except httpx.TransportError:
        ready = None  # listener already closed: also "not ready"
    assert ready != 200
    t.join(timeout=10)
    assert "error" not in out, out.get("error")
    assert out["response"].status_code == 200
    assert out["response"].json() == {"slept": 1.5}
    code = rt.proc.wait(timeout=10)
    print(f"exited {code} {time.monotonic() - t_sig:.2f}s after SIGTERM")
    assert code == 0, rt.stdout() + rt.stderr()


def test_sigterm_lets_open_stream_finish(start_runtime):
    rt = start_runtime(SLOW_APP, "--grace-seconds", "10")
    events: list[str] = []
    with httpx.Client(base_url=rt.url, timeout=20) as client:
        with client.stream("POST", "/ticks", json={"n": 4, "gap": 0.3}) as r:
            lines = r.iter_lines()
            for line in lines:
                if line.startswith("data: "):
                    events.append(line)
                    break
            rt.proc.send_signal(signal.SIGTERM)
            for line in lines:
                if line.startswith("data: "):
                    events.append(line)
    assert events == ["data: 0", "data: 1", "data: 2", "data: 3"]
    assert rt.proc.wait(timeout=10) == 0


def test_sigterm_past_grace_exits_after_grace(start_runtime, tmp_path):
    grace = 1.0
    rt = start_runtime(SLOW_APP, "--grace-seconds", str(grace))
    out: dict = {}
    started = tmp_path / "started"
    _call_in_thread(rt.url, "/sleep", {"seconds": 30, "started": str(started)}, out)
    _wait_inflight(rt, started)
    t_sig = time.monotonic()
    rt.proc.send_signal(signal.SIGTERM)
    code = rt.proc.wait(timeout=grace + 5)
    took = time.monotonic() - t_sig
    print(f"call longer than grace: exited {code} {took:.2f}s after SIGTERM (grace {grace}s)")
    assert code == 0
    assert grace * 0.9 <= took < grace + 1.5


def test_sigint_drains_like_sigterm(start_runtime, tmp_path):
    rt = start_runtime(SLOW_APP, "--grace-seconds", "10")
    out: dict = {}
    started = tmp_path / "started"
    t = _call_in_thread(rt.url, "/sleep", {"seconds": 1.0, "started": str(started)}, out)
    _wait_inflight(rt, started)
    rt.proc.send_signal(signal.SIGINT)
    t.join(timeout=10)
    assert out.get("response") is not None and out["response"].status_code == 200, out
    assert rt.proc.wait(timeout=10) == 0


def test_env_var_configuration(tmp_path):
    import os
    import subprocess
    import sys

    from conftest import PACKAGE_ROOT, free_port

    app = write_app(tmp_path / "envapp", "def ping():\n    return 'pong'\n")
    port = free_port()
    env = dict(os.environ, APPHOST_APP_DIR=str(app), APPHOST_PORT=str(port), APPHOST_GRACE_SECONDS="5")
    env["PYTHONPATH"] = str(PACKAGE_ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "apphost_runtime", "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/ping", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        assert r.status_code == 200 and r.json() == "pong"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

"""Fixtures that run the REAL runtime (``python -m apphost_runtime``) as a subprocess on a free port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
READY_TIMEOUT = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Runtime:
    proc: subprocess.Popen[bytes]
    port: int
    app_dir: Path
    stdout_path: Path
    stderr_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def client(self, **kw: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kw.pop("timeout", 20.0), **kw)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def write_app(dir_: Path, main_py: str, **extra_files: str) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / "main.py").write_text(textwrap.dedent(main_py))
    for name, text in extra_files.items():
        (dir_ / f"{name}.py").write_text(textwrap.dedent(text))
    return dir_


def spawn(app_dir: Path, *args: str, tmp: Path) -> Runtime:
    port = free_port()
    out = tmp / f"runtime-{port}.stdout"
    err = tmp / f"runtime-{port}.stderr"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "apphost_runtime",
                "--app-dir",
                str(app_dir),
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                *args,
            ],
            stdout=fo,
            stderr=fe,
            env=env,
            cwd=str(tmp),
        )
    return Runtime(proc, port, app_dir, out, err)


def wait_ready(rt: Runtime, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if rt.proc.poll() is not None:
            pytest.fail(
                f"runtime exited with {rt.proc.returncode} before ready:\n{rt.stderr()}\n{rt.stdout()}"
            )
        try:
            if httpx.get(f"{rt.url}/ready", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    rt.stop()
    pytest.fail(f"runtime not ready within {timeout}s:\n{rt.stderr()}\n{rt.stdout()}")


@pytest.fixture
def start_runtime(tmp_path: Path) -> Iterator[Callable[..., Runtime]]:
    """Factory: ``start_runtime(main_py_source, *cli_args, ready=True, **sibling_modules)``."""
    started: list[Runtime] = []

    def _start(main_py: str, *args: str, ready: bool = True, **extra_files: str) -> Runtime:
        app_dir = write_app(tmp_path / f"app{len(started)}", main_py, **extra_files)
        rt = spawn(app_dir, *args, tmp=tmp_path)
        started.append(rt)
        if ready:
            wait_ready(rt)
        return rt

    yield _start
    for rt in started:
        rt.stop()


SHARED_APP = """
import asyncio
import os
import threading
import time
from os.path import join  # imported into main.py: must NOT be exposed

from helper import greet


def echo(**kwargs):
    return kwargs


def add(a, b):
    return a + b


async def aadd(a, b):
    await asyncio.sleep(0.05)
    return {"sum": a + b, "async": True}


def hello(name):
    return greet(name)


def sleep(seconds):
    time.sleep(seconds)
    return {"slept": seconds}


_barriers = {}
_barriers_lock = threading.Lock()


def meet(key, parties, release, timeout=30):
    # Returns only if `parties` blocking calls were inside at the same time (else the barrier times out:
    # a 500), then holds each call until the file `release` exists; `release.<n>` marks each arrival.
    with _barriers_lock:
        barrier = _barriers.setdefault(key, threading.Barrier(parties, timeout=timeout))
    n = barrier.wait()
    open(f"{release}.{n}", "w").close()
    deadline = time.monotonic() + timeout
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return {"met": parties}


def ticks(n=3, gap=0.3):
    for i in range(n):
        if i:
            time.sleep(gap)
        yield {"i": i}


async def aticks(n=3, gap=0.3):
    for i in range(n):
        if i:
            await asyncio.sleep(gap)
        yield {"i": i}


def iterator_object(n=3):
    return iter(range(n))


def multiline():
    yield "line one\\nline two"
    yield "plain"
    yield ["not", "text"]


def _mark_closed(marker):
    # Written aside, then renamed: the test polls for the file and must never read it half-written.
    with open(f"{marker}.tmp", "w") as f:
        f.write("closed")
    os.replace(f"{marker}.tmp", marker)


def forever(marker):
    try:
        i = 0
        while True:
            yield i
            i += 1
            time.sleep(0.05)
    finally:
        _mark_closed(marker)


async def aforever(marker):
    try:
        i = 0
        while True:
            yield i
            i += 1
            await asyncio.sleep(0.05)
    finally:
        _mark_closed(marker)


def stream_fails():
    yield "first"
    raise RuntimeError("mid-stream failure")


def fails():
    raise ValueError("boom")


def unserialisable():
    return {"s": {1, 2}}


def returns_list():
    return [1, "two", None]


def logs_something():
    import logging

    logging.getLogger("user").warning("hello from user code")
    return "logged"


def _private():
    return "hidden"


class Thing:
    pass
"""

HELPER = """
def greet(name):
    return f"hello {name}"
"""


@pytest.fixture(scope="module")
def shared_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """One runtime serving SHARED_APP for the tests that do not stop or signal it."""
    tmp = tmp_path_factory.mktemp("shared")
    app_dir = write_app(tmp / "app", SHARED_APP, helper=HELPER)
    rt = spawn(app_dir, "--max-workers", "128", tmp=tmp)
    wait_ready(rt)
    yield rt
    rt.stop()


@pytest.fixture
def rt(shared_runtime: Runtime) -> Runtime:
    assert shared_runtime.alive(), f"shared runtime died:\n{shared_runtime.stderr()}"
    return shared_runtime

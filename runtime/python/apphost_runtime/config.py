"""Command line / environment configuration."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass


@dataclass
class Settings:
    app_dir: str
    deps_dir: str | None = None
    host: str = "0.0.0.0"
    port: int = 8080
    grace_seconds: float = 900.0
    max_workers: int = 128
    keep_alive_seconds: float = 75.0
    max_body_bytes: int = 100 * 1024 * 1024
    max_concurrency: int = 0
    log_level: str = "info"
    termination_log: str = "/dev/termination-log"


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def parse_args(argv: list[str] | None = None) -> Settings:
    p = argparse.ArgumentParser(
        prog="python -m apphost_runtime",
        description="Serve the functions of DIR/main.py over HTTP (apphost Cortex runtime).",
    )
    p.add_argument(
        "--app-dir", default=_env("APPHOST_APP_DIR"), help="directory holding main.py [APPHOST_APP_DIR]"
    )
    p.add_argument(
        "--deps-dir",
        default=_env("APPHOST_DEPS_DIR"),
        help="packages installed for the app (pip install --target), importable after DIR [APPHOST_DEPS_DIR]",
    )
    p.add_argument("--host", default=_env("APPHOST_HOST", "0.0.0.0"), help="bind address (default 0.0.0.0)")
    p.add_argument(
        "--port", type=int, default=int(_env("APPHOST_PORT", "8080")), help="port [APPHOST_PORT] (8080)"
    )
    p.add_argument(
        "--grace-seconds",
        type=float,
        default=float(_env("APPHOST_GRACE_SECONDS", "900")),
        help="on SIGTERM/SIGINT, how long in-flight calls and streams may still run "
        "[APPHOST_GRACE_SECONDS] (900)",
    )
    p.add_argument(
        "--max-workers",
        type=int,
        default=int(_env("APPHOST_MAX_WORKERS", "128")),
        help="threads for blocking (plain def) functions and sync generators [APPHOST_MAX_WORKERS] (128)",
    )
    p.add_argument(
        "--keep-alive-seconds",
        type=float,
        default=float(_env("APPHOST_KEEP_ALIVE_SECONDS", "75")),
        help="idle HTTP keep-alive timeout [APPHOST_KEEP_ALIVE_SECONDS] (75)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=int(_env("APPHOST_MAX_BODY_BYTES", str(100 * 1024 * 1024))),
        help="largest accepted request body, else 413 [APPHOST_MAX_BODY_BYTES] (100 MiB)",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=int(_env("APPHOST_MAX_CONCURRENCY", "0")),
        help="calls served at once; one more is refused with 429 at_capacity, without running it "
        "(the App's replicaConcurrency) [APPHOST_MAX_CONCURRENCY] (0 = no limit)",
    )
    p.add_argument(
        "--log-level", default=_env("APPHOST_LOG_LEVEL", "info"), help="[APPHOST_LOG_LEVEL] (info)"
    )
    p.add_argument(
        "--termination-log",
        default=_env("APPHOST_TERMINATION_LOG", "/dev/termination-log"),
        help="file that receives why start-up failed, if it exists (the kubelet creates it and shows it in "
        "the pod status) [APPHOST_TERMINATION_LOG] (/dev/termination-log)",
    )
    a = p.parse_args(argv)
    if not a.app_dir:
        p.error("--app-dir (or APPHOST_APP_DIR) is required")
    if a.grace_seconds < 0:
        p.error("--grace-seconds must be >= 0")
    if a.max_workers < 1:
        p.error("--max-workers must be >= 1")
    if a.max_concurrency < 0:
        p.error("--max-concurrency must be >= 0")
    return Settings(
        app_dir=a.app_dir,
        deps_dir=a.deps_dir,
        host=a.host,
        port=a.port,
        grace_seconds=a.grace_seconds,
        max_workers=a.max_workers,
        keep_alive_seconds=a.keep_alive_seconds,
        max_body_bytes=a.max_body_bytes,
        max_concurrency=a.max_concurrency,
        log_level=a.log_level,
        termination_log=a.termination_log,
    )

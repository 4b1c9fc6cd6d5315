"""``python -m apphost_runtime --app-dir DIR [--deps-dir D] --port N [--host H] [--grace-seconds S]``.

Imports ``DIR/main.py`` before listening: if that raises, the traceback goes to stderr and the process
exits 1 without ever opening the port (so the readiness probe never passes).
"""

from __future__ import annotations

import concurrent.futures
import sys
import traceback

from .config import parse_args
from .logs import logger, setup_logging


def _preload_server_modules() -> None:
    """Import everything the server needs BEFORE the app dir goes first on sys.path, so that a user module
    called e.g. ``click.py`` or ``h11.py`` cannot shadow one of the runtime's dependencies."""
    import importlib

    for name in (
        "uvicorn",
        "uvicorn.lifespan.off",
        "uvicorn.protocols.http.httptools_impl",
        "uvicorn.protocols.http.h11_impl",
        "uvicorn.loops.uvloop",
        "uvloop",
        "httptools",
    ):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def main(argv: list[str] | None = None) -> None:
    settings = parse_args(argv)
    setup_logging(settings.log_level)
    _preload_server_modules()

    from .app import Runtime
    from .loader import discover, load_module
    from .server import run

    try:
        module = load_module(settings.app_dir, settings.deps_dir)
    except BaseException as e:  # noqa: BLE001 - any failure importing user code is fatal
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        logger.error(f"cannot import {settings.app_dir}/main.py: {type(e).__name__}: {e}")
        sys.exit(1)
    functions = discover(module)
    if not functions:
        logger.warning(f"{settings.app_dir}/main.py defines no public functions")

    executor = concurrent.futures.ThreadPoolExecutor(
        max_workers=settings.max_workers, thread_name_prefix="apphost-fn"
    )
    runtime = Runtime(functions, executor, settings.max_body_bytes, settings.max_concurrency)
    logger.info(
        f"loaded {len(functions)} function(s) from {settings.app_dir}/main.py: {', '.join(functions)}; "
        f"listening on {settings.host}:{settings.port}"
    )
    run(settings, runtime, executor)


if __name__ == "__main__":
    main()

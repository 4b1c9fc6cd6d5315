"""``python -m apphost_runtime --app-dir DIR [--deps-dir D] --port N [--host H] [--grace-seconds S]``.

Imports ``DIR/main.py`` before listening: if that raises, the traceback goes to stderr, the error itself
to the termination log (what Kubernetes shows as the container's last termination message, so the App's
status can name it), and the process exits 1 without ever opening the port (the probes never pass).
"""

from __future__ import annotations

import concurrent.futures
import os
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


# The kubelet reads at most 4096 bytes of a termination message.
MAX_TERMINATION_MESSAGE_BYTES = 4096


def termination_message(app_dir: str, e: BaseException) -> str:
    """Why the import failed, shortest first: the exception lines (for a SyntaxError the file, line and
    caret) after the innermost frame of the user's code, bounded to what the kubelet keeps (the tail)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith(app_dir + os.sep)]
    where = ""
    if frames:
        where = f'  File "{frames[-1].filename}", line {frames[-1].lineno}, in {frames[-1].name}\n'
    text = f"cannot import {app_dir}/main.py:\n{where}{''.join(traceback.format_exception_only(e))}".rstrip()
    data = text.encode("utf-8", "replace")
    if len(data) > MAX_TERMINATION_MESSAGE_BYTES:
        data = data[-MAX_TERMINATION_MESSAGE_BYTES:]
    return data.decode("utf-8", "ignore")


def write_termination_log(path: str, message: str) -> None:
    """Only into a file that exists: the kubelet creates it in a pod; elsewhere (apphost dev) there is none,
    and creating /dev/termination-log on a workstation would be wrong."""
    try:
        if os.path.isfile(path):
            with open(path, "w", encoding="utf-8") as f:
                f.write(message)
    except OSError as err:
        logger.warning(f"cannot write the termination log {path}: {err}")


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
        app_dir = os.path.abspath(settings.app_dir)
        write_termination_log(settings.termination_log, termination_message(app_dir, e))
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

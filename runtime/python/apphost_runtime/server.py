"""Running the ASGI app under uvicorn with the SIGTERM/SIGINT drain contract.

On the first SIGTERM or SIGINT: ``/ready`` answers 503 and new calls get 503 ``shutting_down`` at once;
uvicorn then closes the listener and idle connections and waits up to ``grace_seconds`` for in-flight
requests (blocking calls in the thread pool and open SSE streams included, as they are all request
tasks). Whatever is still running after the grace period is cancelled, and the process exits 0 with
``os._exit`` so that worker threads stuck in user code cannot keep it alive. A second SIGINT skips the
wait.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import signal
import sys
from types import FrameType

import uvicorn

from .app import Runtime
from .config import Settings
from .logs import flush, logger


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, runtime: Runtime) -> None:
        super().__init__(config)
        self.runtime = runtime

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        first = not self.runtime.shutting_down
        self.runtime.shutting_down = True  # /ready -> 503 and new calls -> 503 from now on
        super().handle_exit(sig, frame)
        if first:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            logger.info(
                f"received {name}: draining (ready=false), up to {self.config.timeout_graceful_shutdown}s "
                f"for {self.runtime.inflight} in-flight call(s)"
            )


def _noop_signal_handler(sig: int, frame: FrameType | None) -> None:
    """Installed before uvicorn, which re-raises the captured signal with the previous handler after a
    graceful shutdown; a no-op there keeps the exit status 0 instead of death-by-signal."""


def serve(settings: Settings, runtime: Runtime) -> int:
    config = uvicorn.Config(
        runtime,
        host=settings.host,
        port=settings.port,
        loop="auto",  # uvloop when installed
        http="auto",  # httptools when installed
        lifespan="off",
        access_log=False,
        log_config=None,
        log_level=settings.log_level.lower(),
        server_header=False,
        timeout_keep_alive=settings.keep_alive_seconds,  # type: ignore[arg-type]
        timeout_graceful_shutdown=settings.grace_seconds,  # type: ignore[arg-type]
        backlog=4096,
    )
    server = _Server(config, runtime)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _noop_signal_handler)
    server.run()
    return 0 if server.started else 1


def run(settings: Settings, runtime: Runtime, executor: concurrent.futures.ThreadPoolExecutor) -> None:
    try:
        code = serve(settings, runtime)
    except SystemExit as e:  # uvicorn exits 1 itself when it cannot bind
        code = e.code if isinstance(e.code, int) else 1
    except (Exception, KeyboardInterrupt):
        logger.exception("runtime crashed")
        code = 1
    logger.info("exiting", extra={"status": code})
    flush()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    executor.shutdown(wait=False, cancel_futures=True)
    # Threads still running user code (after the grace period) must not delay the exit.
    os._exit(code)

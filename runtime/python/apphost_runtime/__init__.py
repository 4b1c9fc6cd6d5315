"""apphost "Cortex" runtime: serves the functions of a user's ``main.py`` over HTTP inside an app pod.

The gateway talks only to this process. It is started as::

    python -m apphost_runtime --app-dir DIR --port N [--host H] [--grace-seconds S] [--max-workers W]

and answers ``POST /<function>`` (JSON in, JSON or server-sent events out), ``GET /health``,
``GET /ready`` and ``GET /functions``. The full contract is in ``docs/runtimes.md``.

Technology choices (benchmarks compare the gateway against calling this runtime directly, so per-request
overhead matters):

* **uvicorn** with **httptools** (C HTTP parser) and **uvloop** (libuv event loop): the fastest mainstream
  ASGI server stack for CPython. It also gives us a graceful shutdown that stops the listener and waits
  for in-flight requests up to a timeout (``timeout_graceful_shutdown``), which is exactly the SIGTERM
  contract. Both accelerators are optional at import time: uvicorn falls back to h11/asyncio.
* **A bare ASGI callable instead of a framework** (Starlette, FastAPI...): the surface is four routes, and
  what matters here is precise control of the wire: reading the body once, flushing one SSE event per
  ``send``, noticing the client's disconnect (``http.disconnect``) while a generator is paused, and
  never buffering. A framework would add routing/middleware layers per request and hide those details.
* **Only the standard library** otherwise (``json``, ``inspect``, ``concurrent.futures``) so user code can
  pin whatever versions of other libraries it wants without conflicts with the runtime.
"""

__version__ = "0.1.0"

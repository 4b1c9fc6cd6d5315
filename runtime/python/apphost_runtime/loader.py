"""Loading the user's ``main.py`` and deciding which of its names are callable over HTTP.

Rules (documented in docs/runtimes.md):

* ``DIR`` is put first on ``sys.path`` so ``main.py`` can import sibling modules and packages, then the
  app's dependency folder (``--deps-dir``, built by ``pip install --target``, its ``.pth`` files honoured)
  ahead of the runtime's own site-packages; and
  ``DIR/main.py`` is imported exactly once, as module ``main``, before the server listens. Any exception
  during the import propagates (the CLI prints the traceback and exits non-zero).
* If ``main`` defines ``__all__``, the callables it lists (names not starting with ``_``) are the
  functions. Otherwise every module-level callable whose name does not start with ``_`` and that was
  *defined* in ``main.py`` (its ``__module__`` is ``main``) is a function; classes and names merely
  imported into ``main.py`` (``from time import sleep``) are not exposed.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import site
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

MODULE_NAME = "main"


@dataclass
class Function:
    name: str
    fn: Any
    signature: inspect.Signature | None
    is_async: bool  # coroutine function: awaited on the event loop
    is_generator_fn: bool  # def ... yield: called on the loop (creating a generator runs no user code)
    is_async_generator_fn: bool
    parameters: list[str] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    var_keyword: bool = False

    @property
    def streaming(self) -> bool:
        return self.is_generator_fn or self.is_async_generator_fn

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "parameters": self.parameters,
            "required": self.required,
            "var_keyword": self.var_keyword,
            "streaming": self.streaming,
            "async": self.is_async or self.is_async_generator_fn,
        }


def _unwrap_call(fn: Any) -> Any:
    """For callable instances, inspect ``__call__`` rather than the instance."""
    if inspect.isroutine(fn) or inspect.isclass(fn):
        return fn
    try:
        return type(fn).__call__  # the (unbound) method, enough for the iscoroutinefunction & co. checks
    except AttributeError:
        return fn


def make_function(name: str, fn: Any) -> Function:
    try:
        sig: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    target = _unwrap_call(fn)
    f = Function(
        name=name,
        fn=fn,
        signature=sig,
        is_async=inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target),
        is_generator_fn=inspect.isgeneratorfunction(fn) or inspect.isgeneratorfunction(target),
        is_async_generator_fn=inspect.isasyncgenfunction(fn) or inspect.isasyncgenfunction(target),
    )
    if sig is not None:
        for p in sig.parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                f.parameters.append(p.name)
                if p.default is p.empty:
                    f.required.append(p.name)
            elif p.kind == p.VAR_KEYWORD:
                f.var_keyword = True
    return f


def add_deps_dir(deps_dir: str) -> None:
    """Puts a ``pip install --target`` folder on ``sys.path`` at the front (processing its ``.pth`` files)."""
    deps_dir = os.path.abspath(deps_dir)
    if not os.path.isdir(deps_dir):
        raise FileNotFoundError(f"dependency folder {deps_dir!r} does not exist")
    before = list(sys.path)
    site.addsitedir(deps_dir)
    added = [p for p in sys.path if p not in before]
    sys.path[:] = added + [p for p in sys.path if p not in added]


def load_module(app_dir: str, deps_dir: str | None = None) -> ModuleType:
    app_dir = os.path.abspath(app_dir)
    path = os.path.join(app_dir, "main.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no main.py in app dir {app_dir!r}")
    if deps_dir:
        add_deps_dir(deps_dir)
    if app_dir not in sys.path:
        sys.path.insert(0, app_dir)
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    if spec is None or spec.loader is None:  # pragma: no cover - only for exotic paths
        raise ImportError(f"cannot load {path!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(MODULE_NAME, None)
        raise
    return module


def discover(module: ModuleType) -> dict[str, Function]:
    exported = getattr(module, "__all__", None)
    functions: dict[str, Function] = {}
    if exported is not None:
        names = [n for n in exported if isinstance(n, str)]
    else:
        names = list(vars(module))
    for name in names:
        if name.startswith("_"):
            continue
        obj = getattr(module, name, None)
        if obj is None or not callable(obj):
            continue
        if exported is None:
            if inspect.isclass(obj) or getattr(obj, "__module__", None) != module.__name__:
                continue
        functions[name] = make_function(name, obj)
    return functions

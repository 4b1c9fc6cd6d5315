"""``python -m apphost_runtime.constraints``: the runtime's own packages as pip constraints.

Prints ``name==version`` for apphost-runtime and every installed package it depends on (transitively).
An app's dependency build passes these to ``pip install -c`` so that a user's requirements can never
replace a package the runtime runs on: a conflicting pin fails the build with pip's resolver message.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

ROOT = "apphost-runtime"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(root: str = ROOT) -> list[str]:
    """Installed versions of ``root`` and its dependency closure (markers aside: what is installed counts)."""
    seen: dict[str, str] = {}
    todo = [root]
    while todo:
        name = _canonical(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = dist.version
        for req in dist.requires or []:
            if "extra ==" in req or "extra==" in req:
                continue
            m = _NAME.match(req)
            if m:
                todo.append(m.group(1))
    return [f"{n}=={v}" for n, v in sorted(seen.items())]


def main() -> None:
    found = pins()
    if not found:
        sys.stderr.write(f"{ROOT} is not installed in this Python ({sys.executable})\n")
        sys.exit(1)
    sys.stdout.write("\n".join(found) + "\n")


if __name__ == "__main__":
    main()

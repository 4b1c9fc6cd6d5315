"""An app's dependency folder (``--deps-dir``) and the runtime's constraints for dependency builds."""

from __future__ import annotations

import subprocess
import sys

import httpx
from conftest import PACKAGE_ROOT


def test_deps_dir_packages_are_importable_ahead_of_site_packages(start_runtime, tmp_path):
    deps = tmp_path / "deps"
    (deps / "greeting_lib").mkdir(parents=True)
    (deps / "greeting_lib" / "__init__.py").write_text("WORD = 'from deps'\n")
    # .pth files in the folder are honoured, as pip --target leaves them.
    (deps / "extra").mkdir()
    (deps / "extra" / "extra_mod.py").write_text("VALUE = 7\n")
    (deps / "extra.pth").write_text("extra\n")
    rt = start_runtime(
        """
        import greeting_lib, extra_mod, sys

        def run():
            return {"word": greeting_lib.WORD, "extra": extra_mod.VALUE,
                    "first": [p for p in sys.path if p][:2]}
        """,
        "--deps-dir",
        str(deps),
    )
    body = httpx.post(f"{rt.url}/run", json={}).json()
    assert body["word"] == "from deps"
    assert body["extra"] == 7
    assert body["first"][0] == str(rt.app_dir)
    assert body["first"][1] == str(deps)


def test_missing_deps_dir_is_a_start_error(start_runtime, tmp_path):
    rt = start_runtime("def run():\n    return 1\n", "--deps-dir", str(tmp_path / "nope"), ready=False)
    assert rt.proc.wait(timeout=20) == 1
    assert "dependency folder" in rt.stderr()


def test_constraints_pin_the_runtime_and_its_dependencies():
    out = subprocess.run(
        [sys.executable, "-m", "apphost_runtime.constraints"],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(PACKAGE_ROOT),
        timeout=60,
    ).stdout.splitlines()
    names = {line.split("==")[0] for line in out}
    assert {"apphost-runtime", "uvicorn", "h11", "click", "httptools"} <= names
    assert all("==" in line for line in out)

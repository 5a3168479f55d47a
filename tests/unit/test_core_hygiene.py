"""The rooms keep to themselves: app/core is plain Python, app/engine knows nothing of Qt.

The rule lives in one place, the import-linter contracts in pyproject.toml
(``[[tool.importlinter.contracts]]``); ``lint-imports`` checks them over the
static imports of the whole tree. import-linter cannot see an import made at
run time (``importlib.import_module(name)``, ``__import__``), so a second test
imports every module of app.core and app.engine in a fresh interpreter and looks
at ``sys.modules`` for the same forbidden packages.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter brings tomli
    import tomli as tomllib  # type: ignore[no-redef]


ROOT = Path(__file__).resolve().parents[2]


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_hold() -> None:
    """``lint-imports`` (the venv's, run from the repository root) keeps every contract."""
    tool = Path(sysconfig.get_path("scripts")) / ("lint-imports.exe" if sys.platform == "win32" else "lint-imports")
    assert tool.exists(), f"{tool} is missing: the [test] extra installs import-linter"
    done = subprocess.run([str(tool)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(_contracts())} kept, 0 broken" in done.stdout


def _room_modules(room: str) -> list[str]:
    package = __import__(room, fromlist=["_"])
    return sorted(m.name for m in pkgutil.walk_packages(package.__path__, prefix=room + "."))


@pytest.mark.parametrize("room", ["app.core", "app.engine", "app.remote", "app.mcp"])
def test_importing_a_room_at_run_time_loads_nothing_it_forbids(room: str) -> None:
    """Every module of ``room`` imported in a fresh interpreter; no forbidden package in sys.modules."""
    (forbidden,) = [c["forbidden_modules"] for c in _contracts() if c.get("source_modules") == [room]]
    assert "PySide6" in forbidden and "shiboken6" in forbidden and "app.ui" in forbidden
    modules = _room_modules(room)
    assert len(modules) >= 4 and all(m.startswith(room + ".") for m in modules)
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(k for k in sys.modules if any(k == f or k.startswith(f + '.') for f in {forbidden!r}))\n"
        "print(json.dumps(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [], f"{room} pulled in: {done.stdout.strip()}"


def test_the_runtime_check_covers_the_modules_the_old_copies_named() -> None:
    """The per-file copies this test replaced named these modules; they stay covered."""
    core = {"conversations", "models.hub", "models.downloads", "models.library", "hardware.fit", "gguf.gguf_info"}
    assert {f"app.core.{m}" for m in core | {"hardware.memory"}} <= set(_room_modules("app.core"))
    assert {"app.engine.session", "app.engine.process", "app.engine.host"} <= set(_room_modules("app.engine"))

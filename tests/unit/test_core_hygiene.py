"""app/core imports neither PySide6 nor llama_cpp (DESIGN.md principle 1)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import app.core


def test_core_imports_neither_qt_nor_llama_cpp():
    modules = [f"app.core.{m.name}" for m in pkgutil.iter_modules(app.core.__path__)]
    assert "app.core.gguf_info" in modules and "app.core.memory" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('PySide6', 'llama_cpp', 'shiboken6'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"app.core pulled in: {out.stdout.strip()}"


def test_engine_does_not_import_qt():
    code = (
        "import app.engine.session, app.engine.process, app.engine.host, sys\n"
        "print(','.join(sorted(k for k in sys.modules if k.startswith(('PySide6', 'shiboken6')))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

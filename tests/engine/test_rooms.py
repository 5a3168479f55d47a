"""The rooms' doors: the window process never loads llama.cpp, and only the engine client's host link imports the engine."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import app.ui

_LOADED = "print(','.join(sorted(k for k in sys.modules if k.split('.')[0] == 'llama_cpp')))\n"


def _llama_modules_after(imports: str) -> str:
    code = f"import sys\nimport {imports}\n" + _LOADED
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return out.stdout.strip()


def test_engine_client_host_and_process_leave_llama_cpp_out():
    assert _llama_modules_after("app.ui.engine.client, app.engine.host, app.engine.process") == ""


def test_the_child_module_is_what_imports_llama_cpp():
    # The check above can fail: the child's module does pull llama_cpp in.
    from app.engine.process import CHILD_MODULE

    assert "llama_cpp" in _llama_modules_after(CHILD_MODULE).split(",")


def test_only_the_engine_client_imports_the_engine():
    importers = set()
    root = Path(app.ui.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "app.engine" or n.startswith("app.engine.") for n in names):
                importers.add(path.relative_to(root).as_posix())
    assert importers == {"engine/host_link.py"}

"""llama.cpp's log callback is process-wide: a :class:`~app.engine.llama_log.LlamaLog` that is let go must not
leave llama.cpp calling freed memory (a test process died with SIGSEGV in the next model load)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import gc, llama_cpp
from app.engine.llama_log import LlamaLog
log = LlamaLog()
del log
gc.collect()
junk = [bytearray(64) for _ in range(100_000)]  # reuse the freed memory
params = llama_cpp.llama_model_default_params()
model = llama_cpp.llama_model_load_from_file(b"/nonexistent/model.gguf", params)  # logs an error line
print("logged after the LlamaLog went:", model is None)
"""


def test_a_llama_log_let_go_still_takes_llama_cpps_next_line() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "logged after the LlamaLog went: True" in done.stdout

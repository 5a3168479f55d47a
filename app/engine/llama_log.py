"""Capture llama.cpp's log inside the engine process.

llama.cpp reports what it allocated only in its log ("llama_kv_cache: CPU KV
buffer size = 90.00 MiB", "CPU compute buffer size = 99.38 MiB") and explains
load failures there too. :class:`LlamaLog` installs a ``llama_log_set``
callback that keeps recent lines, writes warnings and errors to the engine
log, and parses the buffer sizes.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import llama_cpp

log = logging.getLogger(__name__)

_KV_RE = re.compile(r"KV buffer size =\s*([0-9.]+) MiB")
_COMPUTE_RE = re.compile(r"compute buffer size =\s*([0-9.]+) MiB")
_NODES_RE = re.compile(r"graph: nodes = (\d+)")
# How llama.cpp settles flash attention at context creation (src/llama-context.cpp): AUTO is
# resolved by resolve_fused_ops ("Flash Attention enabled" / "... not supported, set to
# disabled"), or forced on by llama_init_from_model for a quantized V cache.
_FA_ON_LINES = ("Flash Attention enabled", "enabling flash_attn since it is required")
_FA_OFF_LINES = ("Flash Attention not supported", "flash_attn is not compatible")
MIB = 1024 * 1024
# llama.cpp's quantizer warns once per tensor whose rows the type's block does not divide (180 lines for
# SmolLM2's Q2_K, twice with the dry run); its "N of M tensor(s) required fallback" total is enough in the log.
_PER_TENSOR_FALLBACK = "-> falling back to"

# enum ggml_log_level (ggml/include/ggml.h): NONE=0, DEBUG=1, INFO=2, WARN=3, ERROR=4, CONT=5
_LEVEL_NAMES = {0: "none", 1: "debug", 2: "info", 3: "warning", 4: "error"}


_INSTALLED: list[object] = []  # every callback handed to llama_log_set, kept for the process's life


class LlamaLog:
    """Keeps llama.cpp's last log lines; one instance per process (the callback is global).

    Args:
        max_lines: how many recent lines are kept.
        stopping: true while a Stop is in effect. A llama_decode aborted by Stop makes
            llama.cpp log "graph_compute: ... failed", "failed to decode, ret = 2" and
            "removing memory module entries": expected then, so those lines go to the
            engine log at INFO (marked "after Stop") instead of as errors.
    """

    def __init__(self, max_lines: int = 2000, stopping: Callable[[], bool] | None = None) -> None:
        self._stopping = stopping
        self._lines: collections.deque[tuple[str, str]] = collections.deque(maxlen=max_lines)
        self._partial = ""
        self._last_level = "info"
        self._lock = threading.Lock()
        self._mark = 0
        self._count = 0
        self._listeners: list[Callable[[str, str], None]] = []
        # llama.cpp keeps the callback's address for the process: the ctypes thunk must outlive this
        # object, or the next log line (a model load) calls freed memory and the process dies with SIGSEGV
        # (it did, in a test process that let a LlamaLog go and loaded a model later).
        self._callback = llama_cpp.llama_log_callback(self._on_log)
        _INSTALLED.append(self._callback)
        llama_cpp.llama_log_set(self._callback, ctypes.c_void_p(0))

    def _on_log(self, level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        s = text.decode("utf-8", errors="replace") if text else ""
        name = self._last_level if level == 5 else _LEVEL_NAMES.get(level, "info")
        self._last_level = name
        complete: list[str] = []
        with self._lock:
            self._partial += s
            while "\n" in self._partial:
                line, self._partial = self._partial.split("\n", 1)
                self._lines.append((name, line))
                self._count += 1
                complete.append(line)
                if name in ("warning", "error"):
                    if _PER_TENSOR_FALLBACK in line:  # the quantizer's, one per tensor; its total stays a warning
                        log.debug("%s", line)
                    elif self._stopping is not None and self._stopping():
                        log.info("after Stop (llama.cpp %s): %s", name, line)
                    else:
                        log.log(logging.WARNING if name == "warning" else logging.ERROR, "%s", line)
            listeners = list(self._listeners)
        for line in complete:
            for listener in listeners:
                try:
                    listener(name, line)
                except Exception:  # never raise into llama.cpp's C code
                    log.exception("a llama.cpp log listener failed on %r", line)

    @contextmanager
    def listening(self, listener: Callable[[str, str], None]) -> Iterator[None]:
        """Call ``listener(level, line)`` with each whole line llama.cpp logs while the block runs, on the
        thread that logged it (llama.cpp's, inside its call), after the line is kept. An exception it
        raises is logged, never passed to llama.cpp."""
        with self._lock:
            self._listeners.append(listener)
        try:
            yield
        finally:
            with self._lock:
                self._listeners.remove(listener)

    def mark(self) -> None:
        """Start a new section: :meth:`since_mark` returns lines logged after this call."""
        with self._lock:
            self._mark = self._count

    def since_mark(self) -> list[tuple[str, str]]:
        """``(level, line)`` pairs logged since :meth:`mark` (as many as are kept)."""
        with self._lock:
            n = self._count - self._mark
            return list(self._lines)[-n:] if n > 0 else []

    def kv_buffer_bytes(self) -> int:
        """Sum of 'KV buffer size' lines since the mark, bytes (MiB rounded to 0.01 by llama.cpp)."""
        return round(sum(float(m.group(1)) for _, line in self.since_mark() if (m := _KV_RE.search(line))) * MIB)

    def compute_buffer_bytes(self) -> int:
        """Sum of 'compute buffer size' lines since the mark, bytes (first report per load)."""
        total = 0.0
        for _, line in self.since_mark():
            if line.startswith("~"):
                continue  # the destructor's "compute buffer size is ..." check of an old context
            m = _COMPUTE_RE.search(line)
            if m:
                total += float(m.group(1))
        return round(total * MIB)

    def flash_attn_resolved(self) -> bool | None:
        """Whether llama.cpp said, since the mark, that flash attention ended up on (True) or off
        (False); None when it said neither (it says so only when it decides: auto, a quantized
        V cache, an architecture that cannot use it)."""
        verdict: bool | None = None
        for _, line in self.since_mark():
            if any(s in line for s in _FA_OFF_LINES):
                verdict = False
            elif any(s in line for s in _FA_ON_LINES):
                verdict = True
        return verdict

    def graph_nodes(self) -> int:
        """Nodes of the graph llama.cpp reserved at load ("graph: nodes = N"), 0 if not logged."""
        found = [int(m.group(1)) for _, line in self.since_mark() if (m := _NODES_RE.search(line))]
        return max(found) if found else 0

    def errors_since_mark(self, limit: int = 6) -> list[str]:
        """The last error (or failing) lines since the mark, for a load failure message."""
        lines = [line.strip() for level, line in self.since_mark() if level == "error" and line.strip()]
        return lines[-limit:]

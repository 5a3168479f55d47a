"""Benchmarks run as ``python bench/NAME.py`` put ``bench/`` first on sys.path: a file there named like a
standard-library module (``bench/inspect.py`` once did) replaces that module for every benchmark."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_no_benchmark_shadows_a_standard_library_module() -> None:
    names = {p.stem for p in BENCH.glob("*.py")}
    assert names, "no benchmarks found"
    assert not names & set(sys.stdlib_module_names)

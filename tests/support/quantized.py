"""Requantizations of the SmolLM2 test model, made through Glassbox's own ``Quantize`` request and cached.

``smollm2_q8_0`` and ``smollm2_q2_k`` (session fixtures, registered in tests/conftest.py's ``pytest_plugins``)
are the paths of SmolLM2-135M-Instruct Q4_1 requantized to Q8_0 (145 MB) and Q2_K (88 MB; 180 of its 272
tensors fall back to Q4_0, their 576-wide rows not a multiple of Q2_K's 256-weight block). Each is made once
by an engine process (``P.Quantize``, :mod:`app.engine.quant.quantize`; about 1 s here) into
``<test models>/derived/<source sha256[:16]>-llama-cpp-python-<version>/`` (``packaging/bootstrap.py``'s
``test_models_dir``), beside a ``.json`` with its size and sha256, and reused while both match: a damaged or
partial file is remade. Two pytest-xdist workers asking at once take turns on a file lock (``filelock``); the
file is made under another name and renamed into place, so no reader ever sees half of one.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from app.core import protocol as P
from app.core.quant.plan import default_destination
from app.core.quant.types import QuantType
from app.engine.host import EngineHost
from tests.support.models import sha256_file

ROOT = Path(__file__).resolve().parents[2]
#: Seconds one requantization may take (about 1 s here; a busy 2-CPU machine, a cold disk).
MAKE_TIMEOUT_S = 120.0


def models_dir() -> Path:
    """The test models' folder, as ``packaging/bootstrap.py`` decides it (``GLASSBOX_TEST_MODELS_DIR`` or the
    build cache's ``test-models``)."""
    spec = importlib.util.spec_from_file_location("glassbox_bootstrap_for_tests", ROOT / "packaging" / "bootstrap.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as the import system does (dataclasses look their module up there)
    try:
        spec.loader.exec_module(module)
        return Path(module.test_models_dir())
    finally:
        sys.modules.pop(spec.name, None)


def requantized(source: Path, qtype: QuantType, cache: Path | None = None) -> Path:
    """``source`` requantized to ``qtype`` by the ``Quantize`` request, from the cache when it holds a whole one.

    Args:
        source: the GGUF to requantize.
        qtype: the type.
        cache: the folder of derived models (default ``<test models>/derived``).

    Returns:
        The cached file's path (``<source stem>.<type>.gguf``).

    Raises:
        AssertionError: the engine did not make the file (its ``Failed`` message quoted).
    """
    version = importlib.metadata.version("llama-cpp-python")
    folder = (cache or models_dir() / "derived") / f"{sha256_file(source)[:16]}-llama-cpp-python-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    final = default_destination(source, qtype, folder)
    record = final.with_name(final.name + ".json")
    with FileLock(str(final) + ".lock", timeout=4 * MAKE_TIMEOUT_S):
        if _whole(final, record):
            return final
        for stale in (final, record):
            stale.unlink(missing_ok=True)
        making = final.with_name(f"{final.stem}.making-{os.getpid()}.gguf")
        making.unlink(missing_ok=True)
        _make(source, making, qtype)
        facts = {"bytes": making.stat().st_size, "sha256": sha256_file(making)}
        os.replace(making, final)
        tmp = record.with_name(record.name + ".tmp")
        tmp.write_text(json.dumps(facts), encoding="utf-8")
        os.replace(tmp, record)
    return final


def _whole(path: Path, record: Path) -> bool:
    """Whether ``path`` is the file its record describes (size, then SHA-256)."""
    try:
        facts = json.loads(record.read_text(encoding="utf-8"))
        return bool(path.stat().st_size == facts["bytes"] and sha256_file(path) == facts["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _make(source: Path, dest: Path, qtype: QuantType) -> None:
    host = EngineHost()
    host.start()
    try:
        ready = host.recv(60)
        assert isinstance(ready, P.EngineReady), ready
        answer = host.request(P.Quantize(host.next_id(), str(source), str(dest), qtype), timeout=MAKE_TIMEOUT_S)
        assert isinstance(answer, P.Quantized), f"the requantization of {source.name} to {qtype.value} failed: {answer}"
    finally:
        host.stop()


@pytest.fixture(scope="session")
def smollm2_q8_0(smollm2: Path) -> Path:
    """SmolLM2-135M-Instruct Q4_1 requantized to Q8_0 (145 MB), made through ``P.Quantize`` once and cached."""
    return requantized(smollm2, QuantType.Q8_0)


@pytest.fixture(scope="session")
def smollm2_q2_k(smollm2: Path) -> Path:
    """SmolLM2-135M-Instruct Q4_1 requantized to Q2_K (88 MB: 180 of 272 tensors fall back to Q4_0), made
    through ``P.Quantize`` once and cached."""
    return requantized(smollm2, QuantType.Q2_K)

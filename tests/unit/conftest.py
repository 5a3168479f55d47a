"""Fixtures the unit tests share: the Hub, download and library fixtures of tests/support/fixtures.py,
and the header twins of the two real test models (tests/support/model_twins.py), so no test here
needs a model file.

Listed here once, so test modules take them as parameters without importing them
(an imported fixture shadowed by a parameter of the same name is a lint error, F811).
"""

from __future__ import annotations

import pytest

from tests.support.fixtures import fake_hub, gb_paths, hf_isolated, hub_endpoint, no_leaks
from tests.support.model_twins import TwinFile, write_gemma_twin, write_smollm2_twin

__all__ = ["fake_hub", "gb_paths", "hf_isolated", "hub_endpoint", "no_leaks"]


@pytest.fixture(scope="session")
def smollm2_twin(tmp_path_factory: pytest.TempPathFactory) -> TwinFile:
    """The SmolLM2 135M Instruct Q4_1 twin: its header, its size (98,362,432 bytes), seeded random data.

    Read-only: a test that changes it copies or links it first.
    """
    return write_smollm2_twin(tmp_path_factory.mktemp("twins") / "SmolLM2-135M-Instruct.Q4_1.gguf", seed=135)


@pytest.fixture(scope="session")
def gemma_twin(tmp_path_factory: pytest.TempPathFactory) -> TwinFile:
    """The Gemma 3 270M Q4_K_M twin: its header and size (253,113,024 bytes), zeros for data (a sparse file). Read-only."""
    return write_gemma_twin(tmp_path_factory.mktemp("twins") / "gemma-3-270m-q4_k_m.gguf")

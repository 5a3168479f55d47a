"""n_ubatch_for: the physical batch llama.cpp runs for a given n_batch (and n_ctx)."""

from __future__ import annotations

import pytest

from app.core.hardware.memory import DEFAULT_N_UBATCH, n_ubatch_for


@pytest.mark.parametrize(
    "n_batch,n_ctx,expected",
    [
        (16, None, 16),
        (256, None, 256),
        (512, None, 512),
        (2048, None, 512),  # llama.cpp's default n_ubatch caps it
        (2048, 0, 512),  # n_ctx unknown: no cap
        (2048, 256, 256),  # n_batch (and so n_ubatch) is capped at n_ctx
        (128, 256, 128),
    ],
)
def test_n_ubatch_rule(n_batch: int, n_ctx: int | None, expected: int) -> None:
    assert n_ubatch_for(n_batch, n_ctx) == expected


def test_default_is_llama_cpps() -> None:
    assert DEFAULT_N_UBATCH == 512

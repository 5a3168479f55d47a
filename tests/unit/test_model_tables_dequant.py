"""The lens tables' dequantizer: whole chunks through the gguf package's per-type dequantizer give
exactly what ``gguf.quants.dequantize`` gives (it runs the same code 16 rows at a time)."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from app.engine.inspection.model_tables import _dequantize_chunk

T = gguf.GGMLQuantizationType


@pytest.mark.parametrize("qtype", [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q4_K, T.Q6_K, T.Q5_K, T.IQ4_NL, T.F16, T.BF16])
def test_whole_chunks_match_the_gguf_package(qtype):
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n_cols = 512 if block <= 256 else block
    rng = np.random.default_rng(int(qtype))
    row_bytes = n_cols // block * type_size
    raw = rng.integers(0, 256, size=(40, row_bytes), dtype=np.uint8)
    if qtype in (T.F16, T.BF16):
        raw = raw.copy()
        raw[:, 1::2] &= 0x3F  # finite, moderate values
    with np.errstate(all="ignore"):  # random bytes: some float16 scales are inf or NaN, in both
        got = _dequantize_chunk(raw, qtype).reshape(40, n_cols)
        want = np.asarray(gguf.quants.dequantize(raw, qtype), dtype=np.float32).reshape(40, n_cols)
    assert got.dtype == np.float32
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isfinite(got).mean() > 0.5  # mostly real numbers: the comparison means something

"""The depth sweep in plain Python: its plan, the roofline per depth, and the runs kept (store round trip, damage)."""

from __future__ import annotations

import json

import pytest

from app.core.depth_sweep.plan import DepthPoint, check_plan, default_depths, mean_std, parse_depths, time_left_s
from app.core.depth_sweep.roofline import depth_bounds
from app.core.depth_sweep.store import FILE_NAME, ModelFile, SweepKey, SweepRecord, SweepStore, export_csv
from app.core.gguf.architecture import describe_architecture
from app.core.gguf.gguf_info import read_gguf_info
from app.core.hardware.memory import KVCacheType, kv_cache_layout


def test_default_depths_double_from_512_and_end_at_the_deepest_that_fits():
    assert default_depths(4096, 128, 32) == (0, 512, 1024, 2048, 3936)
    assert default_depths(4096 + 512 + 128, 512, 128) == (0, 512, 1024, 2048, 4096)
    assert default_depths(256, 128, 32) == (0, 96)


def test_depths_typed_with_k_and_refused_in_words():
    assert parse_depths("2k, 0 512;1k 512") == (0, 512, 1024, 2048)
    with pytest.raises(ValueError, match="“1m” is not a depth"):
        parse_depths("0, 1m")
    assert "n_ctx is 4,096" in check_plan((0, 4000), 128, 32, 1, 4096)
    assert check_plan((0, 3936), 128, 32, 1, 4096) == ""
    assert check_plan((512, 0), 128, 32, 1, 4096) != ""  # not ascending


def test_mean_and_sd_as_llama_bench_and_time_left():
    assert mean_std([10.0, 12.0]) == (11.0, pytest.approx(1.41421356))
    assert mean_std([10.0]) == (10.0, 0.0)
    points = [DepthPoint(0, 100.0, 0, 50.0, 0), DepthPoint(512, 100.0, 0, 50.0, 0, fill_s=5.12)]
    # Left: 1024 (512 more tokens to fill at 100 tok/s, then 2 × (100/100 + 50/50) s) and 2048 (10.24 + 4).
    assert time_left_s(points, (0, 512, 1024, 2048), 100, 50, 2) == pytest.approx(5.12 + 4 + 10.24 + 4)
    assert time_left_s([], (0, 512), 100, 50, 2) is None


def test_the_roofline_falls_with_depth_as_the_kv_cache_read_grows(smollm2):
    info = read_gguf_info(smollm2)
    layout = kv_cache_layout(info, 8192)
    rates = {"Q4_1": 100e9, "Q8_0": 100e9}
    f16 = depth_bounds(info, describe_architecture(info), layout, (0, 1024, 4096), 128, 32, 512, 20e9, rates)
    assert f16[0].decode_tok_s > f16[1].decode_tok_s > f16[2].decode_tok_s
    assert f16[0].kv_bytes < f16[1].kv_bytes < f16[2].kv_bytes
    assert f16[2].decode_tok_s == pytest.approx(20e9 / (f16[2].weight_bytes + f16[2].kv_bytes))
    assert all(b.prefill_tok_s > 0 for b in f16)
    # A q8_0 KV cache reads about half the bytes of f16 at the same depth: a higher bound.
    q8 = kv_cache_layout(info, 8192, type_k=KVCacheType.Q8_0, type_v=KVCacheType.Q8_0)
    (deep,) = depth_bounds(info, describe_architecture(info), q8, (4096,), 128, 32, 512, 20e9, {})
    assert deep.kv_bytes == pytest.approx(f16[2].kv_bytes * 34 / 64, rel=0.01)
    assert deep.decode_tok_s > f16[2].decode_tok_s and deep.prefill_tok_s == 0.0  # matmul rates not measured


def _record(path: str, **key) -> SweepRecord:
    k = SweepKey(ModelFile.of(path), "0.3.36", "CPU : AVX2 = 1", 4096, 2, 2, 512, 512, False, "f16", "f16", 0)
    k = SweepKey(**{**k.__dict__, **key})
    return SweepRecord(
        k, 128, 32, 2, (DepthPoint(0, 150.0, 1.0, 50.0, 0.5), DepthPoint(512, 140.0, 1.0, 45.0, 0.4)), False, 1.0e9
    )


def test_runs_are_kept_per_model_and_settings_and_read_back(tmp_path, smollm2, gemma):
    path = tmp_path / FILE_NAME
    store = SweepStore(path)
    a, b = _record(str(smollm2)), _record(str(smollm2), type_k="q8_0", type_v="q8_0", flash_attn=True)
    c = _record(str(gemma))
    for r in (a, b, c):
        store.add(r)
    again = SweepStore(path)
    assert again.notice is None and again.runs == (a, b, c)
    assert again.runs_for(ModelFile.of(str(smollm2))) == (a, b)
    assert "FA on · KV q8_0" in b.label() and "pp128 tg32 ×2" in b.label()
    again.remove(a.run_id)
    assert SweepStore(path).runs == (b, c)
    assert not list(tmp_path.glob(f".{FILE_NAME}.*.tmp"))  # written through a temporary file, none left
    csv_text = export_csv((b,))
    assert csv_text.splitlines()[1].startswith(f"{smollm2.name},") and ",512,140.000,1.000,45.000," in csv_text


@pytest.mark.parametrize("damage", [b"{not json", b'{"version": 1, "runs": [{"key": 3}]}', b"\xff\xfe"])
def test_a_damaged_file_is_set_aside_with_a_message(tmp_path, damage):
    path = tmp_path / FILE_NAME
    path.write_bytes(damage)
    store = SweepStore(path)
    assert store.runs == () and store.notice is not None and "was damaged" in store.notice
    aside = list(tmp_path.glob(f"{FILE_NAME}.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == damage
    store.add(_record("/nowhere/model.gguf"))  # a new file is started
    assert json.loads(path.read_text())["runs"][0]["key"]["model"]["size"] == 0

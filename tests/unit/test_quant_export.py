"""A comparison's exports (app/core/quant/export.py), the run the window follows
(app/core/quant/compare_run.py) and the reference figures (app/core/quant/reference.py)."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pytest

from app.core.quant import export
from app.core.quant.compare_run import ComparisonRun
from app.core.quant.comparison import Candidate, ComparisonSummary, ModelFigures, ScoredToken
from app.core.quant.reference import REFERENCES, place_kl, reference_line


def _tok(index: int, kl: float, *, p_a: float = 0.5, p_b: float = 0.25, same: bool = True) -> ScoredToken:
    top = (Candidate(7, 'é,"x"\n', 0.5), Candidate(8, " b", 0.125))
    return ScoredToken(index, 7, 'é,"x"\n', kl, same, p_a, p_b, top, top[::-1] if not same else top)


def _summary() -> ComparisonSummary:
    fig = ModelFigures("/m/a.gguf", 10, 9, 100.0, 20.0, 5.0, 0.1)
    return ComparisonSummary(
        fig, fig, 2, 1, 512, 1.0, 0.0, 0.0, 0.0, 0.01, 0.001, 0.1, 0.2, 0.3, 0.005, 0.5, 0.35, 0.02, 0.001, 1.0
    )


def test_csv_has_one_row_per_token_in_order_with_the_figures() -> None:
    text = export.csv_text([_tok(12, 0.5, same=False), _tok(3, 0.0)])
    rows = list(csv.reader(text.splitlines(keepends=True)))
    assert tuple(rows[0]) == export.CSV_COLUMNS
    body = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert [r["position"] for r in body] == ["3", "12"]  # counted from 0, as llama.cpp counts positions
    assert [r["token_number"] for r in body] == ["4", "13"]  # counted from 1, as the window numbers them
    r = body[1]
    assert r["text"] == 'é,"x"\n'  # commas, quotes and newlines survive the round trip
    assert float(r["kl_nats"]) == 0.5 and r["same_top1"] == "0"
    assert float(r["dp"]) == -0.25
    assert float(r["surprisal_a_bits"]) == 1.0 and float(r["surprisal_b_bits"]) == 2.0  # -log2 0.5, -log2 0.25
    assert (r["top1_a_id"], r["top1_b_id"], r["top1_b_text"]) == ("7", "8", " b")
    assert json.loads(r["top5_b"]) == [[8, " b", 0.125], [7, 'é,"x"\n', 0.5]]


def test_an_infinite_surprisal_is_an_empty_cell_and_json_null() -> None:
    t = _tok(1, 0.1, p_b=0.0)
    assert math.isinf(t.surprisal_b)
    row = next(csv.DictReader(export.csv_text([t]).splitlines()))
    assert row["surprisal_b_bits"] == ""
    doc = json.loads(export.json_text(None, [t]))
    assert doc["tokens"][0]["surprisal_b"] is None and doc["tokens"][0]["p_b"] == 0.0


def test_json_holds_the_summary_the_tokens_and_the_text() -> None:
    doc = json.loads(export.json_text(_summary(), [_tok(5, 0.2), _tok(4, 0.1)], ("a", "b", "c", "d", "e", "f")))
    assert doc["format"] == export.JSON_FORMAT and doc["version"] == export.JSON_VERSION
    assert doc["summary"]["kl_mean"] == 0.01 and doc["summary"]["a"]["path"] == "/m/a.gguf"
    assert [t["index"] for t in doc["tokens"]] == [4, 5]
    assert doc["tokens"][0]["dp"] == -0.25 and doc["tokens"][0]["top_a"][0] == {
        "token_id": 7,
        "text": 'é,"x"\n',
        "p": 0.5,
    }
    assert doc["token_texts"][5] == "f"


def test_writes_are_whole_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "out.csv"
    export.write_csv(dest, [_tok(1, 0.1)])
    before = dest.read_text(encoding="utf-8")
    assert before.startswith("position,token_number,") and not (tmp_path / "out.csv.part").exists()

    def fail(*_a: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space"):
        export.write_json(dest, _summary(), [_tok(2, 0.2)])
    assert dest.read_text(encoding="utf-8") == before  # the old file untouched
    assert list(tmp_path.iterdir()) == [dest]  # no .part left
    with pytest.raises(OSError):
        export.write_csv(tmp_path / "no-such-folder" / "x.csv", [])


def test_the_run_knows_what_is_scored_the_worst_tokens_and_the_time_left() -> None:
    run = ComparisonRun(n_ctx=8)
    run.begin([f"t{i}" for i in range(16)], [(13, 16), (5, 8)])
    assert run.scored == ((5, 8), (13, 16)) and run.n_scored_expected == 6
    assert [i for i in range(16) if run.is_scored(i)] == [5, 6, 7, 13, 14, 15]
    assert run.chunk_of(7) == 0 and run.chunk_of(8) == 1
    assert run.eta_s() is None
    run.add(3, 6, 2.0, [_tok(5, 0.3), _tok(6, 0.9, same=False), _tok(7, 0.3)])
    assert run.eta_s() == pytest.approx(2.0)  # 3 left at 2 s per 3
    assert [t.index for t in run.worst(2)] == [6, 5]  # highest first, ties by position
    assert run.flips() == 1
    run.finish(_summary())
    assert run.done == run.total and run.elapsed_s == 1.0


def test_reference_figures_place_a_mean_kl() -> None:
    assert [r.kl_mean for r in REFERENCES] == sorted(r.kl_mean for r in REFERENCES)
    assert place_kl(0.0001) == "below Q8_0 (0.0014)"
    assert place_kl(0.003) == "between Q8_0 (0.0014) and Q6_K (0.0055)"
    assert place_kl(2.0) == "above Q2_K (0.45)"
    assert reference_line("same_top1") == "Q8_0 97.7%, Q6_K 96.0%, Q4_K_M 91.9%, Q2_K 71.1%"

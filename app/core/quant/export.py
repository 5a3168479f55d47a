"""A comparison of two quantizations written to a file: CSV (one row per scored token) and JSON
(the summary and the tokens). Plain Python; the Compare window calls these through the shared file
dialogs (:mod:`app.ui.quant.compare_export`).

Both writers write to ``<path>.part`` and rename it over ``path`` only when every byte is written,
so a failed or interrupted export never leaves a half-written file (the ``.part`` is removed).
Figures are written as they were measured (KL divergence in nats, probabilities 0-1, surprisal in
bits); a value that is not finite (a probability of 0 gives an infinite surprisal) is written as an
empty CSV cell and as ``null`` in JSON, since JSON has no infinity.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.core.quant.comparison import Candidate, ComparisonSummary, ScoredToken

JSON_FORMAT = "glassbox-quant-comparison"  # the JSON file's "format" field
JSON_VERSION = 1

CSV_COLUMNS = (
    "position",
    "token_number",
    "token_id",
    "text",
    "kl_nats",
    "same_top1",
    "p_a",
    "p_b",
    "dp",
    "surprisal_a_bits",
    "surprisal_b_bits",
    "top1_a_id",
    "top1_a_text",
    "top1_a_p",
    "top1_b_id",
    "top1_b_text",
    "top1_b_p",
    "top5_a",
    "top5_b",
)


def _finite(x: float) -> float | None:
    """``x``, or None when it is NaN or infinite (JSON has neither)."""
    return x if math.isfinite(x) else None


def _cell(x: float) -> str:
    """A float for a CSV cell: ``repr`` precision, empty when not finite."""
    return repr(x) if math.isfinite(x) else ""


def _top5_cell(cands: Sequence[Candidate]) -> str:
    """A model's top 5 in one CSV cell: a JSON list of ``[token_id, text, p]``."""
    return json.dumps([[c.token_id, c.text, c.p] for c in cands], ensure_ascii=False)


def csv_text(tokens: Iterable[ScoredToken]) -> str:
    """The CSV of ``tokens``: a header row (:data:`CSV_COLUMNS`), then one row per scored token in order.

    ``position`` is the token's position in the tokenized text counted from 0, as llama.cpp counts positions
    (BOS, when the vocabulary adds it, is position 0); ``token_number`` is the same token counted from 1, as
    the Compare window's worst-tokens list numbers it (``position + 1``). ``token_id`` and ``text`` are the
    token that actually comes next there, the one both models were scored on.
    ``top1_*`` is each model's most likely token there; ``top5_*`` the model's top five as a JSON list
    of ``[token_id, text, p]``; ``dp`` = p_b - p_a of the token that actually comes next.
    """
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for t in sorted(tokens, key=lambda t: t.index):
        a1 = t.top_a[0] if t.top_a else Candidate(-1, "", math.nan)
        b1 = t.top_b[0] if t.top_b else Candidate(-1, "", math.nan)
        w.writerow(
            (
                t.index,
                t.index + 1,
                t.token_id,
                t.text,
                _cell(t.kl),
                int(t.same_top1),
                _cell(t.p_a),
                _cell(t.p_b),
                _cell(t.dp),
                _cell(t.surprisal_a),
                _cell(t.surprisal_b),
                a1.token_id,
                a1.text,
                _cell(a1.p),
                b1.token_id,
                b1.text,
                _cell(b1.p),
                _top5_cell(t.top_a),
                _top5_cell(t.top_b),
            )
        )
    return out.getvalue()


def _clean(value: Any) -> Any:
    """``value`` (from :func:`dataclasses.asdict`) with every non-finite float made None."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def token_record(t: ScoredToken) -> dict[str, Any]:
    """One scored token as a JSON object: its fields, and ``dp``, ``surprisal_a``, ``surprisal_b`` (bits)."""
    rec = asdict(t)
    rec.update(dp=t.dp, surprisal_a=t.surprisal_a, surprisal_b=t.surprisal_b)
    return dict(_clean(rec))


def json_document(
    summary: ComparisonSummary | None,
    tokens: Iterable[ScoredToken],
    token_texts: Sequence[str] = (),
) -> dict[str, Any]:
    """The JSON export as a dict: ``format``, ``version``, ``summary`` (None for a run cancelled before
    it ended), ``tokens`` (the scored ones, in order) and ``token_texts`` (every token of the text,
    scored or not, by position; ``tokens[i].index`` points into it: the position counted from 0, as
    llama.cpp counts; the window numbers tokens from 1, ``index + 1``)."""
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "summary": None if summary is None else _clean(asdict(summary)),
        "tokens": [token_record(t) for t in sorted(tokens, key=lambda t: t.index)],
        "token_texts": list(token_texts),
    }


def json_text(summary: ComparisonSummary | None, tokens: Iterable[ScoredToken], token_texts: Sequence[str] = ()) -> str:
    """:func:`json_document` as text (UTF-8 characters kept, indented; strict JSON: no NaN)."""
    return json.dumps(json_document(summary, tokens, token_texts), ensure_ascii=False, indent=1, allow_nan=False)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through ``<path>.part`` and a rename.

    Raises:
        OSError: the folder is missing or not writable, the disk is full...; ``path`` is then
            untouched and no ``.part`` is left.
    """
    dest = Path(path)
    part = dest.with_name(dest.name + ".part")
    try:
        with open(part, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def write_csv(path: str | os.PathLike[str], tokens: Iterable[ScoredToken]) -> None:
    """Write :func:`csv_text` to ``path`` atomically (:func:`write_text_atomic`; OSError as it says)."""
    write_text_atomic(path, csv_text(tokens))


def write_json(
    path: str | os.PathLike[str],
    summary: ComparisonSummary | None,
    tokens: Iterable[ScoredToken],
    token_texts: Sequence[str] = (),
) -> None:
    """Write :func:`json_text` to ``path`` atomically (:func:`write_text_atomic`; OSError as it says)."""
    write_text_atomic(path, json_text(summary, tokens, token_texts))

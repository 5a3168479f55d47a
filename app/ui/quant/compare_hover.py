"""What hovering a token of the Compare window's strip shows: both models' top five there, its KL
divergence, Δp and surprisals (rich text for a tooltip); and why a grey token was not scored."""

from __future__ import annotations

import math
from collections.abc import Sequence

from app.core.quant.comparison import Candidate, ScoredToken
from app.ui.common import palette
from app.ui.common.token_label import visible_html
from app.ui.quant.compare_scale import FLIP_COLOUR, kl_colour


def pct(p: float) -> str:
    """A probability as a percentage: 1 decimal, or 2 significant digits below 0.1%."""
    if not math.isfinite(p):
        return "–"
    v = 100.0 * p
    return f"{v:.1f}%" if abs(v) >= 0.1 or v == 0 else f"{v:.2g}%"


def signed_pct(dp: float) -> str:
    """A change of probability in percentage points, with its sign (+1.2 pp, −0.4 pp)."""
    if not math.isfinite(dp):
        return "–"
    v = 100.0 * dp
    body = f"{abs(v):.1f}" if abs(v) >= 0.1 or v == 0 else f"{abs(v):.2g}"
    return ("+" if v > 0 else "−" if v < 0 else "±") + body + " pp"


def bits(x: float) -> str:
    return f"{x:.2f} bits" if math.isfinite(x) else "∞ bits (p = 0)"


def _column(cands: Sequence[Candidate], actual: int) -> list[str]:
    """One model's top five as table cells (text, p); the token that actually comes next in bold with ▶."""
    cells = []
    for c in cands[:5]:
        mine = c.token_id == actual
        style = "font-weight:bold;" if mine else ""
        mark = "▶ " if mine else ""
        cells.append(
            f"<td style='{style}'>{mark}{visible_html(c.text)}</td><td align='right' style='{style}'>{pct(c.p)}</td>"
        )
    return cells


def token_tooltip(t: ScoredToken, name_a: str, name_b: str) -> str:
    """The hover of scored token ``t``: its figures, then A's and B's top five side by side."""
    flip = (
        f"<span style='color:{FLIP_COLOUR}'>top-1 differs</span>"
        if not t.same_top1
        else f"<span style='color:{palette.GREEN}'>same top-1</span>"
    )
    swatch = f"<span style='background-color:{kl_colour(t.kl)}'>&nbsp;&nbsp;&nbsp;</span>"
    col_a, col_b = _column(t.top_a, t.token_id), _column(t.top_b, t.token_id)
    rows = []
    for i in range(max(len(col_a), len(col_b))):
        a = col_a[i] if i < len(col_a) else "<td></td><td></td>"
        b = col_b[i] if i < len(col_b) else "<td></td><td></td>"
        rows.append(f"<tr>{a}<td>&nbsp;&nbsp;&nbsp;</td>{b}</tr>")
    head = (
        f"<tr><td colspan='2'><b>A</b> {_short(name_a)}</td><td></td>"
        f"<td colspan='2'><b>B</b> {_short(name_b)}</td></tr>"
    )
    return (
        f"<b>token {t.index + 1:,}: {visible_html(t.text)}</b><br>"
        f"{swatch} KL divergence <b>{t.kl:.4g}</b> nats · {flip}<br>"
        f"p of this token: A {pct(t.p_a)}, B {pct(t.p_b)} (Δp {signed_pct(t.dp)})<br>"
        f"surprisal: A {bits(t.surprisal_a)}, B {bits(t.surprisal_b)}"
        f"<table cellspacing='0' cellpadding='1' style='margin-top:4px'>{head}{''.join(rows)}</table>"
        f"<span style='color:{palette.MUTED}'>▶ the token that actually comes next</span>"
    )


def unscored_tooltip(index: int, text: str, chunk: int, n_ctx: int) -> str:
    """The hover of a token that is context only (the first half of its chunk)."""
    return (
        f"<b>token {index + 1:,}: {visible_html(text)}</b><br>"
        f"<span style='color:{palette.TEXT_DIM}'>Context only, not scored: it is in the first half of chunk "
        f"{chunk + 1} (n_ctx {n_ctx}). Each chunk is evaluated from scratch, and only its second half is "
        "scored, so every scored token has at least n_ctx/2 tokens before it — as "
        "<code>llama-perplexity --kl-divergence</code> scores.</span>"
    )


def tail_tooltip(index: int, text: str) -> str:
    """The hover of a token after the last whole chunk (not scored)."""
    return (
        f"<b>token {index + 1:,}: {visible_html(text)}</b><br>"
        f"<span style='color:{palette.TEXT_DIM}'>Not scored: it is after the last whole chunk of n_ctx tokens. "
        "As <code>llama-perplexity</code>, the comparison scores whole chunks only; a longer text, or a "
        "smaller n_ctx, scores more of it.</span>"
    )


def pending_tooltip(index: int, text: str) -> str:
    """The hover of a scored position whose figures have not arrived yet."""
    return f"<b>token {index + 1:,}: {visible_html(text)}</b><br>Not compared yet."


def _short(name: str, limit: int = 38) -> str:
    """A file name cut in the middle to ``limit`` characters."""
    if len(name) <= limit:
        return visible_html(name)
    half = (limit - 1) // 2
    return visible_html(name[:half] + "…" + name[-half:])

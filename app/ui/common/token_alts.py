"""A reply's tokens with their alternatives, as the chat and the Tokens panel show them.

One look for both places: a token's colour (by the probability the raw model gave it, or by
the entropy of the model's distribution at that step, :class:`~app.core.sampling.alternatives.TokenColour`),
the hover (the top-N candidates with probabilities, the drawn one marked), and the click menu
(show the step in the funnel; continue the reply from that token with another candidate: a new
branch). The numbers come from :class:`~app.core.sampling.alternatives.ReplyAlternatives`; this module
only draws them.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from app.core.sampling.alternatives import ReplyAlternatives, StepView, TokenColour, entropy_colour_level
from app.ui.common import palette
from app.ui.common.token_label import visible as visible_plain
from app.ui.common.token_label import visible_html

STEP_SCHEME = "step"  # anchors of token chips: "step:<index>"
_P_FLOORS = (0.8, 0.5, 0.25, 0.1)  # probability floors of palette.PROB_BG's first four colours


def prob_colour(p: float | None) -> str:
    """Green for likely tokens, through amber, to red for unlikely ones (the first colour when unknown)."""
    if p is None:
        return palette.PROB_BG[0]
    for floor, colour in zip(_P_FLOORS, palette.PROB_BG, strict=False):
        if p >= floor:
            return colour
    return palette.PROB_BG[-1]


def entropy_colour(bits: float) -> str:
    """Green where the model was sure (entropy near 0 bits), to red where it hesitated (4 bits and more)."""
    level = entropy_colour_level(bits)
    return palette.PROB_BG[min(len(palette.PROB_BG) - 1, int(level * len(palette.PROB_BG)))]


def step_colour(alts: ReplyAlternatives, step: int, mode: TokenColour) -> str:
    """The background of token ``step`` in ``mode``."""
    if TokenColour(mode) is TokenColour.ENTROPY:
        return entropy_colour(alts.entropy_bits[step])
    return prob_colour(alts.p(step))


def visible(text: str) -> str:
    """A token's text with its white space visible (· space, ⏎ newline, → tab), HTML-escaped, isolated
    (:mod:`app.ui.common.token_label`: a right-to-left token stays before its probability)."""
    return visible_html(text)


def menu_text(text: str) -> str:
    """A token's text for a menu item: white space visible, isolated, ``&`` not taken for a shortcut."""
    return visible_plain(text).replace("&", "&&")


def step_anchor(step: int) -> str:
    return f"{STEP_SCHEME}:{step}"


def anchor_step(href: str) -> int | None:
    """The step of a token chip's anchor (None for another link)."""
    scheme, _, rest = href.partition(":")
    return int(rest) if scheme == STEP_SCHEME and rest.isdigit() else None


def _pct(p: float | None) -> str:
    if p is None:
        return "not among the kept"
    v = 100.0 * p
    return f"{v:.1f}%" if v >= 0.1 else f"{v:.2g}%"


def tooltip_html(view: StepView) -> str:
    """The hover of one token: the drawn token, its probability and the entropy, then the top-N."""
    rows = []
    for c in view.candidates:
        mark = "▶ " if c.token_id == view.token_id else ""
        weight = "font-weight:bold;" if mark else ""
        rows.append(
            f"<tr><td style='{weight}'>{mark}{visible(c.text)}</td>"
            f"<td align='right' style='{weight}'>&nbsp;{_pct(c.p)}</td></tr>"
        )
    return (
        f"<b>token {view.step + 1}: {visible(view.text)}</b> — {_pct(view.p)}, "
        f"entropy {view.entropy_bits:.2f} bits<br>"
        f"<table cellspacing='0' cellpadding='1'>{''.join(rows)}</table>"
        f"<span style='color:{palette.MUTED}'>others: {_pct(view.outside)} · click: the funnel, or continue from here "
        "with another token</span>"
    )


def chips_html(
    alts: ReplyAlternatives,
    mode: TokenColour,
    underlined: frozenset[int] = frozenset(),
    flagged: frozenset[int] = frozenset(),
) -> str:
    """Every token of a reply as a coloured chip that links to its step (for a rich-text label).

    ``underlined``: steps drawn underlined and bold (a speculated reply's accepted drafts);
    ``flagged``: steps led by a red ▾ inside their chip (where a draft was rejected).
    """
    parts = []
    for i, tok in enumerate(alts.tokens):
        text = alts.texts.get(tok, "")
        body = html.escape(text).replace("\n", "⏎<br>") or "∅"
        deco = "underline; font-weight:600" if i in underlined else "none"
        if i in flagged:
            body = f"<span style='color:{palette.RED}; font-weight:bold'>▾</span>{body}"
        parts.append(
            f"<a href='{step_anchor(i)}' style='text-decoration:{deco}; color:{palette.TEXT}; "
            f"background-color:{step_colour(alts, i, mode)}'>{body}</a>"
        )
    return "<span style='white-space:pre-wrap'>" + "".join(parts) + "</span>"


def alternatives_menu(
    parent: QWidget,
    view: StepView,
    on_funnel: Callable[[int], None],
    on_branch: Callable[[int, int], None] | None,
) -> QMenu:
    """The click menu of one token: show it in the funnel; continue with another candidate.

    Args:
        view: the step.
        on_funnel: called with the step.
        on_branch: called with ``(step, token_id)``; None: branching is not offered (a reply in flight).
    """
    menu = QMenu(parent)
    menu.setObjectName("tokenMenu")
    show = QAction(f"Show token {view.step + 1} in the funnel", menu)
    show.triggered.connect(lambda: on_funnel(view.step))
    menu.addAction(show)
    menu.addSeparator()
    head = menu.addAction("Continue from here with… (a new branch)")
    head.setEnabled(False)
    if all(c.token_id != view.token_id for c in view.candidates):
        # Drawn from below the kept candidates (a red token): named first, so the menu says what was drawn.
        least = min((c.p for c in view.candidates), default=None)
        below = f"below {_pct(least)}" if least is not None else _pct(None)
        drawn = menu.addAction(
            f"{menu_text(view.text)}    {below}   (drawn; not among the {len(view.candidates)} kept)"
        )
        drawn.setData(view.token_id)
        drawn.setEnabled(False)
    for c in view.candidates:
        act = QAction(f"{menu_text(c.text)}    {_pct(c.p)}", menu)
        act.setData(c.token_id)
        if c.token_id == view.token_id:
            act.setText(act.text() + "   (drawn)")
            act.setEnabled(False)
        elif on_branch is None:
            act.setEnabled(False)
        else:
            act.triggered.connect(lambda _=False, t=c.token_id: on_branch(view.step, t))
        menu.addAction(act)
    return menu

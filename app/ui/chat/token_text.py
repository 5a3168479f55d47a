"""A finished reply shown as its tokens: coloured chips with their alternatives on hover and a menu on click.

Built only when the person asks for it (the reply's Tokens button), never while a reply streams,
so the chat's streaming cost is unchanged. The look is :mod:`app.ui.common.token_alts`' (shared
with the Tokens panel).
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QLabel, QMenu, QSizePolicy, QToolTip, QWidget

from app.core.sampling.alternatives import ReplyAlternatives, TokenColour
from app.ui.common.token_alts import alternatives_menu, anchor_step, chips_html, tooltip_html
from app.ui.common.token_label import LTR_OPEN
from app.ui.speculative.figures import DraftMarks


class TokenText(QLabel):
    """A reply's tokens (see the module docstring).

    Signals:
        funnel_requested(int): show this step (0-based token of the reply) in the funnel.
        branch_requested(int, int): continue the reply from ``(step, token_id)`` (a new branch).
    """

    funnel_requested = Signal(int)
    branch_requested = Signal(int, int)

    def __init__(
        self,
        alts: ReplyAlternatives,
        colour: TokenColour,
        marks: DraftMarks | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.alts = alts
        self.colour = colour
        self.marks = marks  # a speculated reply's drafted tokens (app/ui/speculative/figures.py)
        self.marks_shown = marks is not None
        self.menu: QMenu | None = None  # the last token menu built
        self.setObjectName("tokenText")
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.linkHovered.connect(self._hovered)
        self.linkActivated.connect(self._clicked)
        self._render()

    def set_colour(self, colour: TokenColour) -> None:
        """Colour the chips by ``colour`` (the Tokens panel's choice changed)."""
        self.colour = colour
        self._render()

    def set_marks_shown(self, on: bool) -> None:
        """Mark the drafted-and-accepted tokens and the rejected drafts (``on``), or not."""
        self.marks_shown = on and self.marks is not None
        self._render()

    def _render(self) -> None:
        m = self.marks if self.marks_shown else None
        if m is None:
            chips = chips_html(self.alts, self.colour)
        else:
            chips = chips_html(self.alts, self.colour, m.accepted, frozenset(i for i, _t in m.rejected))
        self.setText(f"{LTR_OPEN}{chips}</div>")  # left to right, whatever the first token's script

    def hover_html(self, step: int) -> str:
        """The hover of token ``step``: its alternatives, and what was drafted there while the marks are shown."""
        text = tooltip_html(self.alts.view(step))
        if self.marks is not None and self.marks_shown:
            extra = self.marks.hover(step)
            if extra:
                text += f"<br><b>{html.escape(extra)}</b>"
        return text

    def _hovered(self, href: str) -> None:
        step = anchor_step(href)
        if step is None or step >= self.alts.n_steps:
            QToolTip.hideText()
            return
        QToolTip.showText(QCursor.pos(), self.hover_html(step), self)

    def _clicked(self, href: str) -> None:
        step = anchor_step(href)
        if step is not None:
            self.open_token(step, show=True)

    def open_token(self, step: int, show: bool = False) -> QMenu | None:
        """Token ``step`` was clicked: its funnel is asked for, and its menu (the other candidates, to
        continue the reply from there) pops up (``show``; otherwise only built, for tests)."""
        if not 0 <= step < self.alts.n_steps:
            return None
        self.funnel_requested.emit(step)
        self.menu = alternatives_menu(
            self, self.alts.view(step), self.funnel_requested.emit, lambda s, tok: self.branch_requested.emit(s, tok)
        )
        if show:
            self.menu.popup(QCursor.pos())
        return self.menu

"""Tokens panel: the turn as the model sees it, token by token.

The prompt's new tokens (chat-template special tokens included), the prefix
reused from the KV cache as one chip, then each generated token shaded by the
probability the model gave it. Clicking a token asks to inspect it
(:attr:`TokensPanel.inspect_requested`, handled by :mod:`app.ui.inspect_controller`).
"""

from __future__ import annotations

import html

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.core.chat import StopReason
from app.ui.common import palette
from app.ui.turn import LiveTurn

MAX_PROMPT_CHIPS = 400


def _chip_text(text: str) -> str:
    t = html.escape(text).replace(" ", "·").replace("\n", "⏎").replace("\t", "→")
    return t or "∅"


def _is_special(text: str) -> bool:
    """Chat-template control tokens look like ``<|im_end|>``, ``<start_of_turn>``, ``<eos>``."""
    return len(text) > 2 and text.startswith("<") and text.endswith(">") and " " not in text


def _prob_color(p: float | None) -> str:
    """Green for likely tokens, through amber, to red for unlikely ones."""
    if p is None:
        return palette.PROB_BG[0]
    for floor, color in zip((0.8, 0.5, 0.25, 0.1), palette.PROB_BG, strict=False):
        if p >= floor:
            return color
    return palette.PROB_BG[-1]


INSPECT_SCHEME = "inspect"  # a chip's link: inspect:<position>:<token id>


class TokensPanel(QWidget):
    """The current turn's tokens (refreshed by the window's repaint clock).

    Signals:
        template_requested(): the person asked for the chat template and the whole prompt
            (:class:`app.ui.panels.template.TemplateDialog`).
        inspect_requested(int, int, int): a token was clicked: its context position, its id,
            and the turn's first position (for :meth:`app.ui.engine_client.EngineClient.inspect_token`).
    """

    template_requested = Signal()
    inspect_requested = Signal(int, int, int)

    def __init__(self, turn: LiveTurn, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tokensPanel")
        self.turn = turn
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 6)
        lay.setSpacing(4)
        top = QHBoxLayout()
        self.summary = QLabel("Tokens of the current turn appear here.")
        self.summary.setObjectName("detailLabel")
        self.summary.setWordWrap(True)
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        top.addWidget(self.summary, 1)
        self.show_ids = QCheckBox("token ids")
        self.show_ids.toggled.connect(self._rebuild)
        top.addWidget(self.show_ids)
        self.template_button = QPushButton("Template…")
        self.template_button.setToolTip("The chat template and the whole prompt as the model sees it; override it")
        self.template_button.clicked.connect(self.template_requested)
        top.addWidget(self.template_button)
        lay.addLayout(top)
        self.view = QTextBrowser()
        self.view.setObjectName("tokenView")
        self.view.setOpenLinks(False)
        self.view.anchorClicked.connect(self._clicked)
        lay.addWidget(self.view)
        self._seen_version = -1
        self._prompt_shown = None
        self._gen_shown = 0

    def _chip(self, token_id: int, text: str, bg: str, fg: str = palette.TEXT, position: int = -1) -> str:
        ids = f"<sub style='color:{palette.MUTED}'>{token_id}</sub>" if self.show_ids.isChecked() else ""
        chip = f"<span style='background-color:{bg}; color:{fg}'>&#8202;{_chip_text(text)}&#8202;</span>"
        if position >= 0:
            chip = (
                f"<a href='{INSPECT_SCHEME}:{position}:{token_id}' title='Inspect this token' "
                f"style='text-decoration:none; color:{fg}'>{chip}</a>"
            )
        return f"{chip}{ids} "

    def _clicked(self, url: QUrl) -> None:
        """A chip was clicked: ask to inspect its position."""
        parts = url.toString().split(":")
        prompt = self.turn.prompt
        if len(parts) != 3 or parts[0] != INSPECT_SCHEME or prompt is None:
            return
        self.inspect_requested.emit(int(parts[1]), int(parts[2]), prompt.cached_tokens)

    def _rebuild(self) -> None:
        self._prompt_shown = None
        self._gen_shown = 0
        self._seen_version = -1
        self.refresh()

    def refresh(self) -> None:
        t = self.turn
        if t.version == self._seen_version:
            return
        self._seen_version = t.version
        if t.prompt is None and self._prompt_shown is not None:
            self.summary.setText("Tokens of the current turn appear here.")
        if t.prompt is not self._prompt_shown:
            self._prompt_shown = t.prompt
            self._gen_shown = 0
            self.view.clear()
            if t.prompt is not None:
                parts = []
                if t.prompt.cached_tokens:
                    parts.append(
                        f"<span style='background-color:{palette.CACHED_BG}; color:{palette.CACHED_TEXT}'>&nbsp;⟲ {t.prompt.cached_tokens:,} tokens "
                        "reused from the KV cache&nbsp;</span> "
                    )
                toks = t.prompt.new_tokens
                first = t.prompt.prompt_tokens - len(toks)  # context position of toks[0]
                if len(toks) > MAX_PROMPT_CHIPS:
                    skipped = len(toks) - MAX_PROMPT_CHIPS
                    parts.append(f"<span style='color:{palette.MUTED}'>… {skipped:,} more prompt tokens …</span> ")
                    toks = toks[-MAX_PROMPT_CHIPS:]
                    first += skipped
                for i, (tid, text) in enumerate(toks):
                    parts.append(
                        self._chip(
                            tid,
                            text,
                            palette.SPECIAL_TOKEN_BG if _is_special(text) else palette.PROMPT_TOKEN_BG,
                            position=first + i,
                        )
                    )
                self.view.setHtml("<div style='line-height:160%'>" + "".join(parts) + "</div>")
        new = t.tokens[self._gen_shown :]
        if new:
            cur = self.view.textCursor()
            cur.movePosition(QTextCursor.MoveOperation.End)
            base = t.prompt.prompt_tokens + self._gen_shown if t.prompt is not None else -1
            cur.insertHtml(
                "".join(
                    self._chip(
                        r.token_id,
                        r.piece,
                        palette.SPECIAL_TOKEN_BG if _is_special(r.piece) else _prob_color(r.p),
                        position=base + i if base >= 0 else -1,
                    )
                    for i, r in enumerate(new)
                )
            )
            self._gen_shown = len(t.tokens)
            bar = self.view.verticalScrollBar()
            bar.setValue(bar.maximum())
        if t.prompt is not None:
            end = ""
            if t.final is not None and StopReason(t.final.stop_reason) is StopReason.EOS:
                end = "; the last, the end-of-turn token, ends the reply and is not added to the context"
            self.summary.setText(
                f"Prompt: {t.prompt.prompt_tokens:,} tokens ({t.prompt.cached_tokens:,} reused, "
                f"{t.prompt.to_evaluate:,} new — amber; chat-template specials — purple) · "
                f"generated: {len(t.tokens):,} (green = likely … red = unlikely{end})"
            )

"""Tokens panel: the turn as the model sees it, token by token.

The prompt's new tokens (chat-template special tokens included), the prefix
reused from the KV cache as one chip, then each generated token shaded by the
probability the model gave it (or, once the reply ended, by the entropy of the model's
distribution at that step: "by entropy"). Once the reply ended, hovering a generated
token shows its alternatives (:mod:`app.ui.common.token_alts`), and clicking it offers the
funnel for that step and a new branch from any alternative (:attr:`TokensPanel.funnel_requested`,
:attr:`TokensPanel.branch_requested`). "alternatives kept" is how many candidates each reply
keeps per token (the setting; the engine sends them when the reply ends). Clicking a prompt token
asks to inspect it (:attr:`TokensPanel.inspect_requested`, handled by :mod:`app.ui.inspect.controller`);
a generated token's menu offers that too.

It shows the turn of the chat shown (:attr:`ShownChat.turn <app.ui.chat.shown.ShownChat.turn>`):
another chat opened, or its reply deleted, takes the chips away. A stored reply (after a restart, another
chat or branch shown) shows the tokens it drew, from the alternatives kept with it; it keeps no prompt
tokens: those show with the next turn.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QUrl, Signal
from PySide6.QtGui import QCursor, QResizeEvent, QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTextBrowser,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.sampling.alternatives import DEFAULT_PER_TOKEN, MAX_PER_TOKEN, StepView, TokenColour
from app.ui.chat.shown import ShownChat
from app.ui.chat.turn import LiveTurn
from app.ui.common import palette
from app.ui.common.token_alts import (
    alternatives_menu,
    anchor_step,
    prob_colour,
    step_anchor,
    step_colour,
    tooltip_html,
)
from app.ui.common.token_label import ltr_lines, visible_html

MAX_PROMPT_CHIPS = 400
EMPTY = (
    "The next reply's tokens appear here as it is written: its prompt's new tokens, then each token drawn; "
    "the chat's last reply shows its stored tokens here."
)
# The caption's least width beside the controls, pixels: a narrower dock (800x500) puts it on a line of
# its own above them, where it has the panel's width (beside them it was squeezed into a 20 px column).
CAPTION_LEAST = 240
CHIPS_PER_REFRESH = 500  # generated chips added per refresh at most (see TokensPanel.refresh)
BLOCK_CHIPS = 64  # generated chips per paragraph at most (see TokensPanel._append_generated)


def _chip_text(text: str) -> str:
    """A chip's text: white space visible, HTML-escaped, isolated (a right-to-left token keeps its place
    among the chips and its id stays after it: :mod:`app.ui.common.token_label`)."""
    return visible_html(text)


def _is_special(text: str) -> bool:
    """Chat-template control tokens look like ``<|im_end|>``, ``<start_of_turn>``, ``<eos>``."""
    return len(text) > 2 and text.startswith("<") and text.endswith(">") and " " not in text


INSPECT_SCHEME = "inspect"  # a prompt chip's link: inspect:<position>:<token id>


class TokensPanel(QWidget):
    """The current turn's tokens (refreshed by the window's repaint clock).

    Signals:
        template_requested(): the person asked for the chat template and the whole prompt
            (:class:`app.ui.panels.template.TemplateDialog`).
        inspect_requested(int, int, int): a token was clicked: its context position, its id,
            and the turn's first position (for :meth:`app.ui.engine.client.EngineClient.inspect_token`).
        funnel_requested(int): show this step (0-based token of the reply) in the funnel.
        branch_requested(int, int): continue the reply from step ``(step, token_id)`` with that
            token instead (a new branch).
        token_hovered(): the pointer is on a token chip (an inspection may follow: the engine
            prepares for it, :meth:`app.ui.engine.client.EngineClient.prepare_inspect`).
        colour_changed(object): the person chose a :class:`TokenColour`.
        per_token_changed(int): the person chose how many alternatives replies keep per token.
    """

    template_requested = Signal()
    inspect_requested = Signal(int, int, int)
    funnel_requested = Signal(int)
    branch_requested = Signal(int, int)
    token_hovered = Signal()
    colour_changed = Signal(object)  # TokenColour
    per_token_changed = Signal(int)

    def __init__(self, shown: ShownChat, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tokensPanel")
        self._chat_shown = shown
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 6)
        lay.setSpacing(4)
        top = QHBoxLayout()
        self.summary = QLabel(EMPTY)
        self.summary.setObjectName("detailLabel")
        self.summary.setWordWrap(True)
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        top.addWidget(self.summary, 1)
        self._top = top
        self._lay = lay
        self.show_ids = QCheckBox("ids")  # short labels: the bottom dock fits under a narrow chat (1024 px)
        self.show_ids.setToolTip("Show each token's id under it")
        self.show_ids.setAccessibleName("Show token ids")
        self.show_ids.toggled.connect(self._rebuild)
        top.addWidget(self.show_ids)
        self.template_button = QPushButton("Template…")
        self.template_button.setToolTip("The chat template and the whole prompt as the model sees it; override it")
        self.template_button.clicked.connect(self.template_requested)
        top.addWidget(self.template_button)
        self.by_entropy = QCheckBox("by entropy")
        self.by_entropy.setAccessibleName("Colour tokens by entropy")
        self.by_entropy.setToolTip(
            "Colour each generated token by how unsure the model was at that step (the entropy of its "
            "distribution: green near 0 bits, red at 4 bits and more) instead of the probability it gave "
            "the token drawn. Shown once the reply ended."
        )
        self.by_entropy.toggled.connect(self._colour_toggled)
        top.addWidget(self.by_entropy)
        self.per_token = QSpinBox()
        self.per_token.setRange(1, MAX_PER_TOKEN)
        self.per_token.setValue(DEFAULT_PER_TOKEN)
        self.per_token.setPrefix("kept: ")
        self.per_token.setAccessibleName("Alternatives kept per token")
        self.per_token.setToolTip(
            "How many candidates each reply keeps per generated token, with their probabilities, "
            "stored with the chat (hover a token to see them)."
        )
        self.per_token.valueChanged.connect(self.per_token_changed.emit)
        top.addWidget(self.per_token)
        lay.addLayout(top)
        self._controls = (self.show_ids, self.template_button, self.by_entropy, self.per_token)
        self.view = QTextBrowser()
        self.view.setObjectName("tokenView")
        self.view.setOpenLinks(False)
        self.view.document().setUndoRedoEnabled(False)  # appended to for every token: no undo stack to grow
        self.view.document().setDefaultTextOption(ltr_lines(self.view.document().defaultTextOption()))
        self.view.highlighted.connect(self._hovered)
        self.view.anchorClicked.connect(self._clicked)
        lay.addWidget(self.view)
        self.menu: QMenu | None = None  # the last token menu shown
        self._seen_version = -1
        self._serial_shown = -1  # the turn drawn (LiveTurn.serial): another turn is drawn from nothing
        self._empty = True  # nothing is drawn
        self._prompt_shown: P.PromptPrepared | None = None  # the prompt whose chips are drawn
        self._gen_shown = 0
        self._alts_shown: object | None = None  # the alternatives the generated chips are coloured with
        self._drawn_bg: list[str] = []  # the background of each generated chip drawn
        self._block_chips = 0  # chips in the view's last paragraph (see _append_generated)

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._place_caption(e.size().width())

    def caption_on_own_line(self) -> bool:
        """Whether the caption sits on a line of its own above the controls (a narrow panel)."""
        return self._top.indexOf(self.summary) < 0

    def _place_caption(self, width: int) -> None:
        """Beside the controls when ``width`` (px) leaves it :data:`CAPTION_LEAST` there, else above them."""
        m = self._lay.contentsMargins()
        spacing = self._top.spacing()
        controls = sum(w.sizeHint().width() + spacing for w in self._controls)
        own_line = width - m.left() - m.right() - controls < CAPTION_LEAST
        # On its own line never shorter than its wrapped lines (a short dock shortens the token view).
        inner = width - m.left() - m.right()
        self.summary.setMinimumHeight(self.summary.heightForWidth(inner) if own_line else 0)
        if own_line == self.caption_on_own_line():
            return
        if own_line:
            self._top.removeWidget(self.summary)
            self._top.insertStretch(0, 1)
            self._lay.insertWidget(0, self.summary)
        else:
            self._lay.removeWidget(self.summary)
            self._top.takeAt(0)  # the stretch that stood in the caption's place
            self._top.insertWidget(0, self.summary, 1)

    def _set_summary(self, text: str) -> None:
        """Show ``text`` as the caption (its least height follows its lines on a line of its own)."""
        if text != self.summary.text():
            self.summary.setText(text)
            self._place_caption(self.width())

    def _chip(self, token_id: int, text: str, bg: str, fg: str = palette.TEXT, href: str = "") -> str:
        ids = f"<sub style='color:{palette.MUTED}'>{token_id}</sub>" if self.show_ids.isChecked() else ""
        chip = f"<span style='background-color:{bg}; color:{fg}'>&#8202;{_chip_text(text)}&#8202;</span>"
        if href:
            chip = f"<a href='{href}' style='text-decoration:none'>{chip}</a>"
        return f"{chip}{ids} "

    @property
    def turn(self) -> LiveTurn:
        """The turn shown (the chat shown's)."""
        return self._chat_shown.turn

    # -------------------------------------------------------------------- alternatives
    @property
    def colour(self) -> TokenColour:
        """What the generated tokens' colour shows."""
        return TokenColour.ENTROPY if self.by_entropy.isChecked() else TokenColour.PROBABILITY

    def set_colour(self, mode: TokenColour) -> None:
        """Show ``mode`` (the setting), without emitting :attr:`colour_changed`."""
        self.by_entropy.blockSignals(True)
        self.by_entropy.setChecked(TokenColour(mode) is TokenColour.ENTROPY)
        self.by_entropy.blockSignals(False)
        self._rebuild()

    def set_per_token(self, n: int) -> None:
        """Show the setting ``n`` (alternatives kept per token), without emitting :attr:`per_token_changed`."""
        self.per_token.blockSignals(True)
        self.per_token.setValue(n)
        self.per_token.blockSignals(False)

    def _colour_toggled(self) -> None:
        self._rebuild()
        self.colour_changed.emit(self.colour)

    def _gen_bg(self, i: int) -> str:
        """Generated token ``i``'s background: by the mode once the alternatives are in, else by its probability."""
        t = self.turn
        r = t.tokens[i]
        if _is_special(r.piece):
            return palette.SPECIAL_TOKEN_BG
        step, alts = i + t.alternatives_offset, t.alternatives
        if alts is not None and 0 <= step < alts.n_steps:
            if self.colour is TokenColour.ENTROPY:
                return step_colour(alts, step, TokenColour.ENTROPY)
            if r.p is None:  # a stream without probabilities (some remote servers)
                return step_colour(alts, step, TokenColour.PROBABILITY)
        # The stream's probability is exact; the kept alternatives lack it when the drawn token
        # was not among their top N (a high temperature).
        return prob_colour(r.p)

    def _gen_chip(self, i: int, bg: str) -> str:
        """Generated token ``i`` of the turn on ``bg``, linked to its step."""
        r = self.turn.tokens[i]
        return self._chip(r.token_id, r.piece, bg, href=step_anchor(i))

    def _append_generated(self, steps: range) -> None:
        """Add the chips of generated tokens ``steps`` at the end of the view.

        A paragraph (text block) is laid out whole each time something is added to it, so the
        chips go in short paragraphs: a new one after each token with a newline in it (the reply's
        own lines) and after ``BLOCK_CHIPS`` chips. In one paragraph, adding to a 5,000-token reply
        cost 6.5 ms per repaint on average and grew with the reply (bench/stream_render.py).
        """
        cur = self.view.textCursor()
        cur.movePosition(QTextCursor.MoveOperation.End)
        cur.beginEditBlock()
        if not self._drawn_bg and self._prompt_shown is not None:
            cur.insertBlock()  # the reply starts on a line of its own, under the prompt
            self._block_chips = 0
        run: list[str] = []
        for i in steps:
            bg = self._gen_bg(i)
            self._drawn_bg.append(bg)
            run.append(self._gen_chip(i, bg))
            self._block_chips += 1
            if "\n" in self.turn.tokens[i].piece or self._block_chips >= BLOCK_CHIPS:
                cur.insertHtml("".join(run))
                cur.insertBlock()
                run, self._block_chips = [], 0
        if run:
            cur.insertHtml("".join(run))
        cur.endEditBlock()

    def step_view(self, i: int) -> StepView | None:
        """Generated token ``i``'s alternatives (None until the reply ended with them)."""
        t = self.turn
        alts = t.alternatives
        if alts is None or not 0 <= i + t.alternatives_offset < alts.n_steps:
            return None
        return alts.view(i + t.alternatives_offset)

    def _hovered(self, url: QUrl) -> None:
        link = url.toString()
        if link:
            self.token_hovered.emit()
        i = anchor_step(link)
        if i is None:
            QToolTip.hideText()
            return
        view = self.step_view(i)
        text = tooltip_html(view) if view is not None else "Its alternatives appear here when the reply ends."
        QToolTip.showText(QCursor.pos(), text, self.view)

    def _clicked(self, url: QUrl) -> None:
        link = url.toString()
        parts = link.split(":")
        prompt = self.turn.prompt
        if len(parts) == 3 and parts[0] == INSPECT_SCHEME:  # a prompt token: inspect it
            if prompt is not None:
                self.inspect_requested.emit(int(parts[1]), int(parts[2]), prompt.cached_tokens)
            return
        i = anchor_step(link)
        if i is not None:
            self.open_token(i, QCursor.pos())

    def _gen_position(self, i: int) -> int:
        """Generated token ``i``'s position in the context (-1: unknown)."""
        pos = self.turn.context_position(i + self.turn.alternatives_offset)
        return -1 if pos is None else pos

    def open_token(self, i: int, where: QPoint | None = None) -> QMenu | None:
        """Generated token ``i`` was clicked: its funnel is asked for, and its menu (other candidates
        to continue with) pops up at ``where`` (None: built, not shown; tests use that)."""
        view = self.step_view(i)
        if view is None:
            return None
        self.funnel_requested.emit(view.step)
        self.menu = alternatives_menu(
            self, view, self.funnel_requested.emit, lambda step, tok: self.branch_requested.emit(step, tok)
        )
        pos, prompt = self._gen_position(i), self.turn.prompt
        if pos >= 0 and prompt is not None:
            token_id = self.turn.tokens[i].token_id
            self.menu.addSeparator()
            self.menu.addAction(
                "Inspect this token (logit lens, attention, embedding…)",
                lambda: self.inspect_requested.emit(pos, token_id, prompt.cached_tokens),
            )
        if where is not None:
            self.menu.popup(where)
        return self.menu

    def _rebuild(self) -> None:
        self._prompt_shown = None
        self._gen_shown = 0
        self._seen_version = -1
        self.refresh()

    def _colour_key(self) -> str:
        """What the generated tokens' colours mean, in a few words."""
        if self.turn.alternatives is not None and self.colour is TokenColour.ENTROPY:
            return "green = sure … red = unsure (entropy)"
        return "green = likely … red = unlikely"

    def refresh(self) -> None:
        t = self.turn
        if t.version == self._seen_version:
            return
        self._seen_version = t.version
        if t.serial != self._serial_shown:  # another turn (a new one, another chat's, none): nothing of the last
            self._serial_shown = t.serial
            self._prompt_shown = None
            self._gen_shown = 0
            self._drawn_bg = []
            self._alts_shown = None
            if not self._empty:
                self.view.clear()
                self._empty = True
            self._set_summary(EMPTY)
            self.summary.setToolTip("")
        if t.prompt is None and self._prompt_shown is not None:
            self._set_summary(EMPTY)
        if t.alternatives is not self._alts_shown:
            # The reply ended with its alternatives: its tokens are drawn again only when that changes
            # a colour (by entropy; a probability the stream did not have). A 5,000-token reply's
            # chips took 130 ms to draw again: a stall as the reply ends, for the same picture.
            self._alts_shown = t.alternatives
            drawn = self._drawn_bg
            if len(drawn) > len(t.tokens) or drawn != [self._gen_bg(i) for i in range(len(drawn))]:
                self._prompt_shown = None
        if t.prompt is not self._prompt_shown:
            self._prompt_shown = t.prompt
            self._gen_shown = 0
            self._drawn_bg = []
            self.view.clear()
            self._empty = True
            if t.prompt is not None:
                self._empty = False
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
                            href=f"{INSPECT_SCHEME}:{first + i}:{tid}",
                        )
                    )
                self.view.setHtml("<div style='line-height:160%'>" + "".join(parts) + "</div>")
        if len(t.tokens) > self._gen_shown:
            # At most CHIPS_PER_REFRESH a time: a long reply drawn again (by entropy, with ids) fills
            # in over a few ticks of the repaint clock instead of stalling the window (0.1 s for 5,000).
            end = min(len(t.tokens), self._gen_shown + CHIPS_PER_REFRESH)
            self._append_generated(range(self._gen_shown, end))
            self._empty = False
            self._gen_shown = end
            if end < len(t.tokens):
                self._seen_version = -1  # the rest on the next ticks
            bar = self.view.verticalScrollBar()
            bar.setValue(bar.maximum())
        if t.prompt is None and t.stored and t.tokens:
            self._set_summary(
                f"Stored reply: {len(t.tokens):,} tokens ({self._colour_key()}) · its prompt shows with the next reply"
            )
            self.summary.setToolTip(
                "The chat's last reply as it was stored: each token it drew, with the candidates it kept.\n"
                "Hover a token for its alternatives; click it for the funnel or a new branch.\n"
                "A stored reply keeps no prompt tokens: they show when the next reply is written."
            )
        if t.prompt is not None:
            # The line keeps to the figures and the colour key (two lines in the bottom dock at
            # 1366x768); how to use the tokens is in its tooltip.
            self._set_summary(
                f"Prompt: {t.prompt.prompt_tokens:,} tokens ({t.prompt.cached_tokens:,} reused, "
                f"{t.prompt.to_evaluate:,} new — amber; specials — purple) · generated: {len(t.tokens):,} "
                f"({self._colour_key()})"
            )
            help_lines = ["Amber: the prompt's new tokens; purple: chat-template special tokens."]
            if t.alternatives is not None:
                help_lines.append(
                    "Hover a token for its alternatives; click it for the funnel, a new branch or Inspect."
                )
            if t.final is not None and StopReason(t.final.stop_reason) is StopReason.EOS:
                help_lines.append(
                    "The last token, the end-of-turn token, ends the reply and is not added to the context."
                )
            self.summary.setToolTip("\n".join(help_lines))

"""One chat message as a widget: header with actions, the body (plain text for the person,
Markdown with highlighted code blocks for replies), and a stats footer."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase, QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.chat.context import Role
from app.core.sampling.alternatives import ReplyAlternatives, TokenColour
from app.ui.chat.header import MessageHeader
from app.ui.chat.markdown import TEXT_CSS, Segment, SegmentKind, StreamingDocument, plain_to_html, warm_up
from app.ui.chat.token_text import TokenText
from app.ui.common import dialogs
from app.ui.common.elided_label import ElidedLabel

# The formula renderer and the common code lexers load on background threads as soon as the window's
# message widgets are imported (window creation), long before a reply can need them (markdown.warm_up).
warm_up()


class MessageAction(str, enum.Enum):
    """What a message's buttons ask for (the payload each carries, if any)."""

    EDIT = "edit"  # payload: the new text
    REGENERATE = "regenerate"
    CONTINUE = "continue"
    DELETE = "delete"
    BRANCH_STEP = "branch_step"  # payload: -1 (previous version) or +1 (next version)
    TOKENS = "tokens"  # payload: True to show the reply's tokens with their alternatives, False for the text
    TOKEN_FUNNEL = "token_funnel"  # payload: the step (0-based token of the reply) to show in the funnel
    BRANCH_FROM = "branch_from"  # payload: (step, token_id): continue the reply from that step with that token


class BadgeKind(str, enum.Enum):
    """The look of a message's badge (the stylesheet's ``kind`` property)."""

    NONE = ""
    LIVE = "live"  # thinking…, prefill…, stopping…
    WARN = "warn"  # stopped, context full, max_tokens reached
    ERROR = "error"  # cut off, engine stopped


class RichLabel(QLabel):
    """A word-wrapped rich-text label that remembers its height for each width until its text changes.

    QLabel lays its document out again (twice: ideal width, then the given width) each time
    a layout asks ``heightForWidth``; a layout asks every child whenever one child changes.
    While a reply streams, its last label changes 30 times a second: without this cache every
    finished segment above it (tables above all) would be laid out again each time, a cost
    that grows with the reply.
    """

    def __init__(self) -> None:
        super().__init__()
        self._heights: dict[int, int] = {}

    def setText(self, text: str) -> None:
        self._heights.clear()
        super().setText(text)

    def heightForWidth(self, width: int) -> int:
        h = self._heights.get(width)
        if h is None:
            h = self._heights[width] = super().heightForWidth(width)
        return h

    def changeEvent(self, e: QEvent) -> None:
        if e.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._heights.clear()
        super().changeEvent(e)


def _rich_label(html: str, obj_name: str = "msgText") -> QLabel:
    label = RichLabel()
    label.setObjectName(obj_name)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
    label.setOpenExternalLinks(False)
    label.linkActivated.connect(lambda url: QDesktopServices.openUrl(url))
    label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
    label.setText(html)
    return label


class CodeBlock(QFrame):
    """A highlighted code block with its language and a Copy button.

    The code is shown as one label per chunk of ``CODE_CHUNK`` lines (segments of
    :mod:`app.ui.chat.markdown`): while a block streams only its last label changes.
    """

    def __init__(self, seg: Segment, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeBlock")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        head = QFrame()
        head.setObjectName("codeHeader")
        hl = QHBoxLayout(head)
        hl.setContentsMargins(10, 3, 4, 3)
        self.lang = QLabel(seg.language or "text")
        self.lang.setObjectName("codeLang")
        self.copy_btn = QToolButton()
        self.copy_btn.setText("Copy")
        self.copy_btn.setObjectName("codeCopy")
        self.copy_btn.clicked.connect(self._copy)
        hl.addWidget(self.lang)
        hl.addStretch(1)
        hl.addWidget(self.copy_btn)
        lay.addWidget(head)
        self.body = QWidget()
        self.body.setObjectName("codeBody")
        self._body_lay = QVBoxLayout(self.body)
        self._body_lay.setContentsMargins(0, 0, 0, 0)  # the theme pads the scroll area (QScrollArea#codeScroll)
        self._body_lay.setSpacing(0)
        self._chunks: list[QLabel] = []
        self._codes: list[str] = []
        self._heights: list[int] = []  # each chunk label's sizeHint height, px (so _fit asks only the changed one)
        self.scroll = QScrollArea()
        self.scroll.setObjectName("codeScroll")
        self.scroll.setWidget(self.body)
        self.scroll.setWidgetResizable(True)
        self.scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        lay.addWidget(self.scroll)
        self.add_chunk(seg)

    @property
    def code(self) -> str:
        """The whole code (what Copy copies)."""
        return "\n".join(self._codes)

    def add_chunk(self, seg: Segment) -> int:
        """Append a chunk of lines; returns its index."""
        label = QLabel()
        label.setObjectName("codeChunk")
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._body_lay.addWidget(label)
        self._chunks.append(label)
        self._codes.append("")
        self._heights.append(0)
        self.set_chunk(len(self._chunks) - 1, seg)
        return len(self._chunks) - 1

    def set_chunk(self, index: int, seg: Segment) -> None:
        """Show ``seg`` as chunk ``index`` (the growing last chunk while streaming)."""
        self._codes[index] = seg.code
        self._chunks[index].setText(seg.html)
        self._heights[index] = self._chunks[index].sizeHint().height()
        self._fit()

    def remove_chunk(self, index: int) -> None:
        discard(self._chunks.pop(index))
        self._codes.pop(index)
        self._heights.pop(index)
        self._fit()

    def chunk_count(self) -> int:
        return len(self._chunks)

    def set_segment(self, seg: Segment) -> None:
        """Show ``seg`` as the last chunk."""
        self.lang.setText(seg.language or "text")
        self.set_chunk(len(self._chunks) - 1, seg)

    SCROLL_PADDING = 12  # px: the theme's vertical padding of QScrollArea#codeScroll (6 px top and bottom)

    def _measure(self) -> None:
        """Ask every chunk label its height again (the theme's font and padding apply once shown)."""
        self._heights = [c.sizeHint().height() for c in self._chunks]
        self._fit()

    def showEvent(self, e: QShowEvent) -> None:
        self._measure()
        super().showEvent(e)

    def changeEvent(self, e: QEvent) -> None:
        if e.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._measure()
        super().changeEvent(e)

    def _fit(self) -> None:
        height = sum(self._heights)
        bar = self.scroll.horizontalScrollBar().sizeHint().height()
        self.scroll.setFixedHeight(height + bar + self.SCROLL_PADDING + 4)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copy_btn.setText("Copied")
        QTimer.singleShot(1200, lambda: self.copy_btn.setText("Copy"))


def discard(w: QWidget) -> None:
    """Take a widget out of its layout now and free it on the next event-loop turn."""
    w.hide()
    w.setParent(None)
    w.deleteLater()


@dataclass
class _Placed:
    """Where a segment is shown: its own widget, or chunk ``index`` of a code block."""

    seg: Segment
    widget: QWidget
    index: int = -1  # a code chunk's index in its CodeBlock; -1: the widget is the segment's own


class MarkdownView(QWidget):
    """A reply rendered as segment widgets; while streaming only the last one changes.

    A segment that continues a block (``Segment.cont``: a cut table's later rows, a code
    block's later lines) is shown joined to the previous one: a code chunk goes into the
    same :class:`CodeBlock`, a table chunk sits right under the previous one.
    """

    GAP = 6  # px between blocks

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self._lay.setSpacing(0)
        self._doc = StreamingDocument()
        self._widgets: list[QWidget] = []  # top-level widgets, in order
        self._tail: _Placed | None = None
        self.source = ""
        self._streaming = False
        warm_up()  # the formula renderer loads off the UI thread before a reply needs it

    def set_markdown(self, source: str, streaming: bool = False) -> None:
        """Show ``source`` (the whole reply so far); cost depends on the unfinished tail only.

        ``streaming``: more text is coming (a table's row being written waits for its line's end).
        """
        if source == self.source and streaming == self._streaming:
            return
        if not source.startswith(self.source):
            self._clear()
        self.source = source
        self._streaming = streaming
        newly, tail = self._doc.update(source, streaming)
        if newly:
            if self._tail is not None and self._show_in(self._tail, newly[0]):
                self._tail = None  # the tail's widget now shows the finished segment: keep it
                newly = newly[1:]
            self._drop_tail()
            for seg in newly:
                self._place(seg)
        if not tail:
            self._drop_tail()
            return
        if self._tail is not None and self._show_in(self._tail, tail[0]):
            return
        self._drop_tail()
        self._tail = self._place(tail[0])

    @staticmethod
    def _show_in(placed: _Placed, seg: Segment) -> bool:
        """Show ``seg`` in the widget that shows ``placed`` when it can (same kind of segment:
        no new widget, only a new text to lay out). Returns False when a new widget is needed."""
        old = placed.seg
        if (old.kind, old.cont) != (seg.kind, seg.cont):
            return False
        if (old.html, old.code) != (seg.html, seg.code):
            if placed.index >= 0 and isinstance(placed.widget, CodeBlock):
                placed.widget.set_chunk(placed.index, seg)
            elif isinstance(placed.widget, CodeBlock):
                placed.widget.set_segment(seg)
            elif isinstance(placed.widget, QLabel):
                placed.widget.setText(_label_html(seg))
            else:
                return False
        placed.seg = seg
        return True

    def _place(self, seg: Segment) -> _Placed:
        last = self._widgets[-1] if self._widgets else None
        if seg.kind is SegmentKind.CODE and seg.cont and isinstance(last, CodeBlock):
            return _Placed(seg, last, last.add_chunk(seg))
        w: QWidget = CodeBlock(seg) if seg.kind is SegmentKind.CODE else _rich_label(_label_html(seg))
        w.setContentsMargins(0, 0 if (seg.cont or not self._widgets) else self.GAP, 0, 0)
        self._lay.addWidget(w)
        self._widgets.append(w)
        return _Placed(seg, w)

    def _drop_tail(self) -> None:
        t, self._tail = self._tail, None
        if t is None:
            return
        if t.index >= 0 and isinstance(t.widget, CodeBlock):
            t.widget.remove_chunk(t.index)
        else:
            self._widgets.remove(t.widget)
            discard(t.widget)

    def _clear(self) -> None:
        for w in self._widgets:
            discard(w)
        self._widgets, self._tail = [], None
        self._doc = StreamingDocument()
        self.source = ""


def _label_html(seg: Segment) -> str:
    css = TEXT_CSS
    if seg.cont:  # a long list's later items (or a table's later rows): no gap above
        css += "ul, ol { margin-top: 0px; }"
    if seg.list_cut:  # the list goes on in the next segment: no gap below
        css += "ul, ol { margin-bottom: 0px; }"
    return f"<style>{css}</style>{seg.html}"


class MessageWidget(QFrame):
    """One chat message: header with actions, body, and (for replies) a stats footer.

    Args:
        role: :class:`~app.core.chat.context.Role` (or its value) of the message.

    Signals:
        action_requested(object, int, object): ``(MessageAction, message_id, payload)``; the
            payload is described on :class:`MessageAction`.
    """

    action_requested = Signal(object, int, object)

    def __init__(
        self,
        role: Role | str,
        text: str = "",
        title: str = "",
        message_id: int | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        role = Role(role)
        self.role = role
        self.message_id = message_id
        self.setObjectName("userMessage" if role is Role.USER else "assistantMessage")
        # The width is the chat column's, never the header's minimum: a layout lays out a
        # height-for-width item at max(its minimum width, the width given), so a header wider
        # than the column made the body's height be measured too wide and its last lines cut.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 10, 14, 10)
        lay.setSpacing(6)
        self.title = ElidedLabel(title or ("You" if role is Role.USER else "Assistant"))  # "…" where cut
        self.title.setObjectName("msgRole")
        self.title.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.badge = QLabel("")
        self.badge.setObjectName("msgBadge")
        self.badge.hide()
        # The actions that do not fit the column's width go into the header's "⋯" menu. The header
        # adds nothing to the message's minimum width (Ignored, like the message itself): otherwise
        # showing Continue or Edit at a reply's end changed that minimum, and the layout measured
        # every label of the reply again at the new width (130-240 ms for a 2,500-token table).
        self.header = MessageHeader(self.title, self.badge)
        self.prev_btn = self._action_button("‹", "Previous version", lambda: self._emit(MessageAction.BRANCH_STEP, -1))
        self.branch_label = QLabel("")
        self.branch_label.setObjectName("branchLabel")
        self.next_btn = self._action_button("›", "Next version", lambda: self._emit(MessageAction.BRANCH_STEP, 1))
        # Continue comes first (left of Details): it appears only when a reply ends cut off, and
        # the header is right-aligned, so it moves nothing the person may be about to click.
        self.continue_btn = self._action_button(
            "Continue", "Continue this reply where it stopped", lambda: self._emit(MessageAction.CONTINUE)
        )
        self.info_btn = self._action_button("Details", "", self.show_details)
        self.details_dialog: dialogs.TextDialog | None = None
        self._how_made = ""
        self.tokens_btn = self._action_button(
            "Tokens",
            "Show this reply's tokens coloured by probability (or entropy): hover one for its alternatives, "
            "click it for the funnel or to continue from there with another token",
            self._tokens_toggled,
        )
        self.tokens_btn.setCheckable(True)
        self.token_text: TokenText | None = None  # the reply as its tokens, while shown
        self.copy_btn = self._action_button("Copy", "Copy this message's text", self._copy)
        self.edit_btn = self._action_button("Edit", "Edit (the current version stays as a branch)", self._start_edit)
        self.regen_btn = self._action_button(
            "Regenerate", "A new reply; this one stays as a branch", lambda: self._emit(MessageAction.REGENERATE)
        )
        self.delete_btn = self._action_button(
            "✕", "Delete this message and what follows it in this branch", lambda: self._emit(MessageAction.DELETE)
        )
        stored = message_id is not None
        branch = self.branch_label
        h = self.header
        # Row order, left to right; the priority (lower stays on the row longer) decides what goes to "⋯" first.
        h.add_item(
            (self.prev_btn, branch, self.next_btn),
            (
                (self.prev_btn, lambda: f"Previous version (this is {branch.text()})"),
                (self.next_btn, lambda: f"Next version (this is {branch.text()})"),
            ),
            priority=4,
            offered=False,
        )
        h.add_item((self.continue_btn,), ((self.continue_btn, self.continue_btn.text),), priority=0, offered=False)
        h.add_item((self.info_btn,), ((self.info_btn, lambda: "Details…"),), priority=5, offered=False)
        h.add_item((self.tokens_btn,), ((self.tokens_btn, self.tokens_btn.text),), priority=6, offered=False)
        h.add_item((self.copy_btn,), ((self.copy_btn, self.copy_btn.text),), priority=2)
        h.add_item((self.edit_btn,), ((self.edit_btn, self.edit_btn.text),), priority=3, offered=stored)
        # A user message's is "Reply" (set_can_reply).
        h.add_item(
            (self.regen_btn,),
            ((self.regen_btn, self.regen_btn.text),),
            priority=1,
            offered=stored and role is Role.ASSISTANT,
        )
        h.add_item((self.delete_btn,), ((self.delete_btn, lambda: "Delete"),), priority=7, offered=stored)
        lay.addWidget(self.header)
        if role is Role.USER:
            self.body: QWidget = _rich_label(plain_to_html(text), "userText")
        else:
            self.body = MarkdownView()
            if text:
                self.body.set_markdown(text)
        lay.addWidget(self.body)
        self.editor: QPlainTextEdit | None = None
        self._edit_bar: QWidget | None = None
        self.footer = QLabel("")
        self.footer.setObjectName("msgFooter")
        self.footer.setWordWrap(True)
        self.footer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.footer.hide()
        lay.addWidget(self.footer)
        self._text = text
        self._shown = text
        self._streaming = False

    def _action_button(self, text: str, tip: str, slot=None) -> QToolButton:
        b = QToolButton()
        b.setObjectName("msgAction")
        b.setText(text)
        b.setToolTip(tip)
        b.setAccessibleName(tip or text)
        b.setCursor(Qt.CursorShape.PointingHandCursor)
        if slot is not None:
            b.clicked.connect(slot)
        return b

    def _emit(self, action: MessageAction, payload: object = None) -> None:
        if self.message_id is not None:
            self.action_requested.emit(action, self.message_id, payload)

    @property
    def text(self) -> str:
        return self._text

    def set_text(self, text: str) -> None:
        """Set the message's text; the view catches up on :meth:`refresh` (the repaint clock)."""
        self._text = text

    def refresh(self) -> bool:
        """Render pending text. Returns True if anything changed."""
        if self._shown == self._text:
            return False
        self._shown = self._text
        if isinstance(self.body, MarkdownView):
            self.body.set_markdown(self._text, self._streaming)
        else:
            self.body.setText(plain_to_html(self._text))
        return True

    def render_part(self, max_chars: int) -> bool:
        """Render some more of the pending text: a reply up to the first paragraph break at least
        ``max_chars`` characters further (the rest stays pending), anything else whole. The chat
        view builds an older message of a long chat this way, a part per event-loop turn, before
        it shows the message (showing a widget lays out every window layout above it, so the
        message is shown once, whole).

        Returns:
            True when the whole text is shown.
        """
        if self._shown == self._text:
            return True
        body = self.body
        if not isinstance(body, MarkdownView) or self._streaming or not self._text.startswith(self._shown):
            self.refresh()
            return True
        cut = self._text.find("\n\n", len(self._shown) + max_chars)
        if cut < 0:
            self.refresh()
        else:
            self._shown = self._text[:cut]
            body.set_markdown(self._shown, streaming=True)
        return cut < 0

    def set_footer(self, text: str) -> None:
        self.footer.setText(text)
        self.footer.setVisible(bool(text))

    def set_badge(self, text: str, kind: BadgeKind = BadgeKind.NONE) -> None:
        """A small label next to the title (``stopped``, ``context full``...); empty text hides it."""
        self.badge.setText(text)
        self.badge.setProperty("kind", BadgeKind(kind).value)
        self.badge.style().unpolish(self.badge)
        self.badge.style().polish(self.badge)
        self.badge.setVisible(bool(text))
        self.header.refit()  # the badge takes some of the row's width

    def set_branch(self, position: int, count: int) -> None:
        """Show "‹ 2/3 ›" when this message has other versions."""
        show = count > 1
        self.branch_label.setText(f"{position}/{count}")
        self.header.set_offered(self.branch_label, show)
        self.prev_btn.setEnabled(position > 1)
        self.next_btn.setEnabled(position < count)

    def set_how_made(self, text: str) -> None:
        """How the reply was made (model, quant, sampler settings, seed, measurements): the
        Details button's tooltip, and the text its click shows (selectable, with Copy)."""
        self._how_made = text
        self.info_btn.setToolTip(text + "\n\nClick to open it (selectable, with Copy)." if text else "")
        self.header.set_offered(self.info_btn, bool(text))
        if self.details_dialog is not None and self.details_dialog.isVisible():
            self.details_dialog.text_box.setPlainText(text)

    @property
    def how_made(self) -> str:
        return self._how_made

    def show_details(self) -> None:
        """Open how this reply was made in a small window with selectable text and a Copy button."""
        if not self._how_made:
            return
        if self.details_dialog is not None:
            self.details_dialog.close()
            self.details_dialog.deleteLater()
        self.details_dialog = dialogs.show_text(self, "How this reply was made", self._how_made)

    # ------------------------------------------------------------------ tokens and alternatives
    def set_can_show_tokens(self, on: bool) -> None:
        """Offer the Tokens button (the reply kept its alternatives)."""
        self.header.set_offered(self.tokens_btn, on and self.role is Role.ASSISTANT and self.message_id is not None)
        if not on and self.token_text is not None:
            self.show_tokens(None)

    def _tokens_toggled(self) -> None:
        self._emit(MessageAction.TOKENS, self.tokens_btn.isChecked())

    def show_tokens(self, alts: ReplyAlternatives | None, colour: TokenColour = TokenColour.PROBABILITY) -> None:
        """Show the reply as its tokens coloured by ``colour``, with hover and click (:class:`TokenText`);
        None: the text again. Built once when asked, never while the reply streams."""
        if self.token_text is not None:
            discard(self.token_text)
            self.token_text = None
        self.tokens_btn.setChecked(alts is not None)
        if alts is None:
            self.body.show()
            return
        view = TokenText(alts, colour)
        view.funnel_requested.connect(lambda step: self._emit(MessageAction.TOKEN_FUNNEL, step))
        view.branch_requested.connect(lambda step, tok: self._emit(MessageAction.BRANCH_FROM, (step, tok)))
        lay = self.layout()
        lay.insertWidget(lay.indexOf(self.body) + 1, view)
        self.body.hide()
        view.show()
        self.token_text = view

    def set_streaming(self, on: bool) -> None:
        """Hide the actions that make no sense while this reply is being written.

        While it streams, a table's row being written is held back until its line ends
        (:meth:`StreamingDocument.update`); when it ends, what is shown is the whole text.
        """
        self._streaming = on
        if not on and isinstance(self.body, MarkdownView):
            self.body.set_markdown(self._shown, streaming=False)
        for b in (self.edit_btn, self.regen_btn, self.delete_btn):
            # While hidden for the stream they keep their place (held), so Details and Copy do not
            # move under the pointer when the reply ends (a click meant for Details regenerated it).
            offered = self.message_id is not None and (b is not self.regen_btn or self.role is Role.ASSISTANT)
            self.header.set_offered(b, offered, held=on)

    def set_can_reply(self, on: bool) -> None:
        """Offer "Reply" on a user message left without an answer (its reply was deleted, or
        never came): the same action as Regenerate, answering this message."""
        if self.role is not Role.USER:
            return
        self.regen_btn.setText("Reply")
        self.regen_btn.setToolTip("Ask the model to answer this message")
        self.regen_btn.setAccessibleName("Ask the model to answer this message")
        self.header.set_offered(self.regen_btn, on and self.message_id is not None)

    def set_can_continue(self, on: bool, why_not: str = "") -> None:
        """Offer Continue (a reply that was cut off). ``why_not``: Continue cannot work now; the
        button is shown disabled with that reason as its tooltip."""
        self.header.set_offered(self.continue_btn, on and self.role is Role.ASSISTANT and self.message_id is not None)
        self.continue_btn.setEnabled(not why_not)
        self.continue_btn.setToolTip(why_not or "Continue this reply where it stopped")

    def _start_edit(self) -> None:
        if self.editor is not None:
            return
        self.editor = QPlainTextEdit(self._text)
        self.editor.setObjectName("editBox")
        self.editor.setMinimumHeight(80)
        bar = QWidget()
        row = QHBoxLayout(bar)
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        cancel = QPushButton("Cancel")
        save = QPushButton("Save and send" if self.role is Role.USER else "Save")
        save.setObjectName("sendButton")
        cancel.clicked.connect(self._end_edit)
        save.clicked.connect(self._save_edit)
        row.addWidget(cancel)
        row.addWidget(save)
        self._edit_bar = bar
        lay = self.layout()
        idx = lay.indexOf(self.body)
        self.body.hide()
        lay.insertWidget(idx + 1, self.editor)
        lay.insertWidget(idx + 2, bar)
        self.editor.setFocus()

    def _save_edit(self) -> None:
        if self.editor is None:
            return
        text = self.editor.toPlainText()
        self._end_edit()
        if text.strip() and text != self._text:
            self._emit(MessageAction.EDIT, text)

    def _end_edit(self) -> None:
        for w in (self.editor, self._edit_bar):
            if w is not None:
                w.deleteLater()
        self.editor = None
        self._edit_bar = None
        self.body.show()

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self._text)

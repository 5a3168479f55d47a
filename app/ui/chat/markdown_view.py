"""A reply's text on screen: Markdown rendered as segment widgets (rich-text labels, highlighted
code blocks with a Copy button), of which only the last changes while the reply streams.

Used by :class:`~app.ui.chat.message.MessageWidget` for a reply's body; :func:`rich_label` also
shows a question's plain text. :func:`discard` frees a widget on the next event-loop turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QDesktopServices, QFontDatabase, QGuiApplication, QShowEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from app.ui.chat.markdown import TEXT_CSS, Segment, SegmentKind, StreamingDocument, warm_up


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


def rich_label(html: str, obj_name: str = "msgText") -> QLabel:
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
        self.code_scroll = QScrollArea()
        self.code_scroll.setObjectName("codeScroll")
        self.code_scroll.setWidget(self.body)
        self.code_scroll.setWidgetResizable(True)
        self.code_scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.code_scroll.setFrameShape(QFrame.Shape.NoFrame)
        lay.addWidget(self.code_scroll)
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
        bar = self.code_scroll.horizontalScrollBar().sizeHint().height()
        self.code_scroll.setFixedHeight(height + bar + self.SCROLL_PADDING + 4)

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
        w: QWidget = CodeBlock(seg) if seg.kind is SegmentKind.CODE else rich_label(_label_html(seg))
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

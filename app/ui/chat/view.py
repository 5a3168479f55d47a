"""The conversation on screen: a column of message widgets in a scroll area that follows
the newest text, with a placeholder while it is empty.

A long conversation is built lazily: opening a chat builds the newest messages that
fill the view, and the older ones are built above them in the background while fewer
than :attr:`ChatView.AHEAD_VIEWPORTS` viewport heights of built messages are left above
what is shown: one short step per event-loop turn (a message's widget, a part of its
text of :attr:`ChatView.PART_CHARS` characters, then showing it whole: showing a widget
lays out every layout above it, so each message is shown once). Above the built messages
lies a blank block (``chatUnbuilt``) a few viewports high that stands for the messages not
built yet: each message built above the shown ones takes its height out of that block, so
nothing on screen moves and nothing is repainted (adding above would move every shown
message and repaint the view on every step). When the block runs out it is made high
again, once per few viewports; when everything is built it goes. Whatever asks for an
older message (:meth:`ChatView.widget_for`: a search jump, an action) builds it and every
message after it at once. Built messages stay built until the chat is closed. Messages
built in the background sit in pages of :attr:`ChatView.PAGE_SIZE` (adding one lays out its
page, not every message), and Tab follows the order messages are shown in (Qt's focus chain
follows the order they were built in).

Why not a virtualized ``QListView`` with a delegate: each message is a widget with rich
text labels, code blocks with their own scroll bars and Copy buttons, LaTeX images,
selectable text, links, an inline editor and action buttons with accessible names. A
delegate would paint all of that itself and give up text selection, links, focus and
the accessibility tree; building real widgets only near the viewport keeps every one
of those as it is, at the cost of the widgets of what was scrolled through.

A chat opened at a message (a search hit: :meth:`ChatView.show_messages` with ``around``)
is built from that message down, only as far as fills the view: the older messages are
built above as usual, and the newer ones below it as the person scrolls down (one per
event-loop turn while fewer than :attr:`ChatView.AHEAD_VIEWPORTS` viewport heights of built
messages are left under the view; adding below what is shown moves nothing). Whatever needs
a newer message (:meth:`ChatView.widget_for`, a new message appended) builds every message
down to it at once.

The scroll area's parts (the column, its pages, keeping what is shown in place, freeing a
closed chat's widgets) are in :mod:`app.ui.chat.column`; Tab's order in :mod:`app.ui.chat.tab_order`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.core.chat.context import Role
from app.core.sampling.alternatives import TokenColour
from app.ui.chat.column import Column, Graveyard, KeepInPlace, Page
from app.ui.chat.markdown_view import CodeBlock, discard
from app.ui.chat.message import MessageAction, MessageWidget
from app.ui.chat.search_marks import SearchMarks
from app.ui.chat.tab_order import move_focus

__all__ = ["ChatView", "CodeBlock", "MessageAction", "MessageWidget"]


class ChatView(QScrollArea):
    """The conversation: a column of :class:`MessageWidget` that follows the newest text.

    :attr:`messages` are the built message widgets, oldest first: the newest messages
    of the conversation, down to the last one (older ones are built as described in the
    module docstring; :attr:`unbuilt_count` says how many are left above them).

    Signals:
        action_requested(object, int, object): a message's :class:`MessageAction` (see :class:`MessageWidget`).
        link_activated(str): a link in the placeholder was clicked (``open``, ``models``).
    """

    action_requested = Signal(object, int, object)  # (MessageAction, message id, payload: str | int | bool | None)
    link_activated = Signal(str)

    # Built messages kept above the viewport's top, in viewport heights (older ones are built
    # in the background while fewer are left, one per event-loop turn).
    AHEAD_VIEWPORTS = 2.0
    # Messages built when a chat opens, at least (more while they do not fill the view).
    OPEN_AT_LEAST = 3
    # The blank block above the built messages is made this many viewport heights high when it runs out.
    BLANK_VIEWPORTS = 3.0
    # Messages built in the background are laid out in pages of this many (see Page).
    PAGE_SIZE = 16
    # A message built in the background renders this many characters of its text (to the next
    # paragraph break) per event-loop turn: a long reply costs several short turns, not one long one.
    PART_CHARS = 400

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._inner = Column(self)
        self._inner.setObjectName("chatInner")
        self._col = QVBoxLayout(self._inner)
        self._col.setContentsMargins(24, 16, 24, 16)
        self._col.setSpacing(12)
        self.placeholder = QLabel()
        self.placeholder.setObjectName("chatPlaceholder")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setOpenExternalLinks(False)
        # Links work from the keyboard too: Tab reaches them, Enter follows the one in focus.
        self.placeholder.setTextInteractionFlags(
            Qt.TextInteractionFlag.LinksAccessibleByMouse | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        )
        self.placeholder.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.placeholder.linkActivated.connect(self.link_activated)
        self._col.addWidget(self.placeholder)
        # Stands for the messages not built yet (see the module docstring); its height in px.
        self._blank = QWidget()
        self._blank.setObjectName("chatUnbuilt")
        self._blank.setFixedHeight(0)
        self._blank.hide()
        self._col.addWidget(self._blank)
        self._col.addStretch(1)
        self.setWidget(self._inner)
        self.messages: list[MessageWidget] = []
        # Messages of the chat shown that have no widget yet (ids, oldest first; all older than
        # messages[0]), and what builds one (the controller's: text, title, badges, branch).
        self._unbuilt: list[int] = []
        # Newer messages not built yet, below the built ones (oldest first): a chat opened at a search hit.
        self._below: list[int] = []
        self._build: Callable[[int], MessageWidget] | None = None
        # Built in the background, not placed yet, its text rendered a part per turn (all of it: _rendered).
        self._partial: MessageWidget | None = None
        self._rendered = False
        self._pages: list[Page] = []  # pages of messages built in the background, the top one last
        self._below_pages: list[Page] = []  # pages of newer messages built at once (_build_below_to)
        self._dropping = False  # taking the blank block away (its scroll is not the person's)
        self._graveyard = Graveyard(self)  # what a closed chat showed, freed one widget per turn
        self._grow_timer = QTimer(self)
        self._grow_timer.setSingleShot(True)
        self._grow_timer.setInterval(0)
        self._grow_timer.timeout.connect(self._grow)
        self._marks = SearchMarks()  # the labels showing search matches
        # A search match to keep in view while the chat just opened settles (layout passes move it).
        self._scroll_target: QWidget | None = None
        self._target_timer = QTimer(self)
        self._target_timer.setSingleShot(True)
        self._target_timer.setInterval(600)
        self._target_timer.timeout.connect(lambda: setattr(self, "_scroll_target", None))
        self._follow = True
        self.verticalScrollBar().rangeChanged.connect(self._on_range)
        self.verticalScrollBar().valueChanged.connect(self._on_scroll)
        self.set_placeholder("")

    def set_placeholder(self, html: str) -> None:
        self.placeholder.setText(html)
        self.placeholder.setVisible(bool(html) and not self.messages)

    def add_message(
        self, role: Role | str, text: str = "", title: str = "", message_id: int | None = None
    ) -> MessageWidget:
        """Append a new message widget at the bottom (and follow it)."""
        return self.append(MessageWidget(role, text, title, message_id))

    def append(self, w: MessageWidget) -> MessageWidget:
        """Append ``w`` (a message after every shown one) at the bottom and follow it (the newer
        messages not built yet are built first)."""
        if self._below:
            self._build_below_to(self._below[-1])
        w.action_requested.connect(self.action_requested)
        self._col.insertWidget(self._col.count() - 1, w)
        self.messages.append(w)
        self.placeholder.hide()
        self._follow = True
        return w

    def show_messages(
        self, message_ids: Sequence[int], build: Callable[[int], MessageWidget], around: int | None = None
    ) -> None:
        """Show a conversation (``message_ids`` oldest first), replacing what was shown.

        ``build(message_id)`` makes a message's widget (not yet placed). Only the newest
        messages that fill the view are built now (at least :attr:`OPEN_AT_LEAST`); the
        older ones are built later (see the module docstring). ``around``: a message to show
        (a search hit): it and the messages after it that fill the view are built now, the
        older and the newer ones later.
        """
        self.clear()
        ids = list(message_ids)
        self._build = build
        width = self._message_width()
        height = 0
        if around is not None and around in ids:
            at = ids.index(around)
            self._unbuilt, self._below = ids[:at], ids[at:]
            self._follow = False
            while self._below and (len(self.messages) < self.OPEN_AT_LEAST or height < self.viewport().height()):
                w = self._build_next_below()
                height += w.heightForWidth(width) + self._col.spacing()
        else:
            self._unbuilt = ids
            self._follow = True
            while self._unbuilt and (len(self.messages) < self.OPEN_AT_LEAST or height < self.viewport().height()):
                w = self._build_oldest_unbuilt()
                height += w.heightForWidth(width) + self._col.spacing()
        if self._unbuilt:
            self._set_blank(self._blank_topup())
        self._schedule_growth()

    @property
    def unbuilt_count(self) -> int:
        """How many (older) messages of the chat shown have no widget yet."""
        return len(self._unbuilt)

    @property
    def unbuilt_below_count(self) -> int:
        """How many newer messages of the chat shown have no widget yet (it was opened at a search hit)."""
        return len(self._below)

    def widget_for(self, message_id: int) -> MessageWidget | None:
        """The widget of message ``message_id``, built now (with every message after it) if it
        was not yet; None when that message is not shown."""
        w = next((w for w in self.messages if w.message_id == message_id), None)
        partial = self._partial is not None and self._partial.message_id == message_id
        if w is None and (partial or message_id in self._unbuilt):
            self._finish_partial()
            self._build_down_to(message_id)
            w = self.messages[0]
        elif w is None and message_id in self._below:
            self._build_below_to(message_id)
            w = self.messages[-1]
        return w

    def built_messages(self) -> tuple[MessageWidget, ...]:
        """The message widgets built, oldest first (see the module docstring)."""
        return tuple(self.messages)

    def remove_message(self, message_id: int) -> None:
        """Take message ``message_id``'s widget away (it was deleted)."""
        self.remove_widget(next((w for w in self.messages if w.message_id == message_id), None))

    def note_under_last(self, text: str) -> None:
        """Show ``text`` (what went wrong) under the last message shown."""
        if self.messages:
            self.messages[-1].set_footer(text)

    def set_token_colour(self, colour: TokenColour) -> None:
        """Colour every reply shown as its tokens by ``colour``."""
        for w in self.messages:
            if w.token_text is not None:
                w.token_text.set_colour(colour)

    def remove_widget(self, w: MessageWidget | None) -> None:
        if w is not None and w in self.messages:
            self.messages.remove(w)
            discard(w)
        self.placeholder.setVisible(bool(self.placeholder.text()) and not self.messages)

    def scroll_to_message(self, message_id: int) -> None:
        w = self.widget_for(message_id)
        if w is not None:
            self._follow = False
            QTimer.singleShot(0, lambda: self.ensureWidgetVisible(w, 0, 40))

    def highlight_message(self, message_id: int, terms: list[str]) -> int:
        """Mark ``terms`` (search words, case-insensitive) in message ``message_id`` and scroll
        to its first match (to the message when none is shown), building the message first if
        it was not built yet. The previous marks are removed first; a message's next repaint
        with new text drops its marks.

        Returns:
            How many matches were marked (0 when the message is not shown).
        """
        self.clear_highlight()
        w = self.widget_for(message_id)
        if w is None:
            return 0
        total, first = self._marks.mark(w, terms)
        self._follow = False
        self._scroll_target = first or w
        self._target_timer.start()
        QTimer.singleShot(0, self._scroll_to_target)
        return total

    def clear_highlight(self) -> None:
        """Remove the search marks (labels whose text changed since keep their new text)."""
        self._marks.clear()

    def _scroll_to_target(self) -> None:
        """Bring the search match into view (again after each layout change while the chat
        just opened is still being laid out, see ``_target_timer``)."""
        target = self._scroll_target
        if target is None:
            return
        try:
            self.ensureWidgetVisible(target, 0, max(40, self.viewport().height() // 3))
        except RuntimeError:  # deleted meanwhile (the chat was closed)
            self._scroll_target = None

    def clear(self) -> None:
        """Take every message away (their widgets are freed a page per event-loop turn)."""
        self.clear_highlight()
        for w in self.messages:
            if not isinstance(w.parentWidget(), Page):
                self._bury(w)
        for page in self._pages + self._below_pages:
            self._bury(page)
        if self._partial is not None:
            self._bury(self._partial)
        self.messages = []
        self._unbuilt = []
        self._below = []
        self._build = None
        self._partial = None
        self._pages = []
        self._below_pages = []
        self._grow_timer.stop()
        self._set_blank(None)
        self.placeholder.setVisible(bool(self.placeholder.text()))

    def _bury(self, w: QWidget) -> None:
        """Hide ``w`` now and free it later, one a turn (freeing a long chat's widgets at once stalls)."""
        self._graveyard.bury(w, self._col)

    def refresh(self) -> None:
        """Render pending text of every message (called by the window's repaint clock)."""
        for w in reversed(self.messages[-2:]):
            w.refresh()

    # ------------------------------------------------------------------ lazy building
    def _message_width(self) -> int:
        m = self._col.contentsMargins()
        return max(1, self.viewport().width() - m.left() - m.right())

    def _build_oldest_unbuilt(self) -> MessageWidget:
        """Build the newest unbuilt message whole and place it above the built ones (shown at
        once, so that it is styled and measured with the theme)."""
        assert self._build is not None
        w = self._build(self._unbuilt.pop())
        w.refresh()
        self._place_above(w)
        return w

    def _place_above(self, w: MessageWidget, paged: bool = False) -> None:
        """Show ``w`` (the message before ``messages[0]``) above the built messages; ``paged``: in
        the top :class:`Page` (a message built in the background), else in the column itself."""
        w.action_requested.connect(self.action_requested)
        shown: QWidget = w
        if not paged:
            self._col.insertWidget(self._col.indexOf(self._blank) + 1, w)
        else:
            parent = w.parentWidget()
            page = parent if isinstance(parent, Page) else self._page_for_next()
            if self._col.indexOf(page) < 0:
                self._col.insertWidget(self._col.indexOf(self._blank) + 1, page)
                shown = page
            page.lay.insertWidget(0, w)
        self.messages.insert(0, w)
        self.placeholder.hide()
        # Shown with the column's layout off: showing a widget lays out every layout above it,
        # and the column's is laid out once, on its posted request.
        self._col.setEnabled(False)
        try:
            shown.show()
            w.show()
        finally:
            self._col.setEnabled(True)
        self._col.invalidate()

    def _build_next_below(self) -> MessageWidget:
        """Build the oldest message not built below the built ones, whole, and show it under them
        (below what the view shows: nothing on screen moves)."""
        assert self._build is not None
        w = self._build(self._below.pop(0))
        w.refresh()
        w.action_requested.connect(self.action_requested)
        self._col.insertWidget(self._col.count() - 1, w)
        self.messages.append(w)
        self.placeholder.hide()
        w.show()
        return w

    def _build_below_to(self, message_id: int) -> None:
        """Build every message below the built ones down to ``message_id`` (one not below: nothing)
        at once, into pages each shown once (as :meth:`_build_down_to` does above)."""
        if message_id not in self._below:
            return
        assert self._build is not None
        at = self._below.index(message_id) + 1
        ids, self._below[:at] = self._below[:at], []
        self.setUpdatesEnabled(False)
        try:
            pages, built = self._new_pages(ids)
            self.messages.extend(built)
            for page in pages:
                self._col.insertWidget(self._col.count() - 1, page)
                self._below_pages.append(page)
                page.show()
        finally:
            self.setUpdatesEnabled(True)

    def _new_pages(self, ids: list[int]) -> tuple[list[Page], list[MessageWidget]]:
        """Messages ``ids`` built into new hidden pages of ``PAGE_SIZE``, oldest first, and the widgets."""
        assert self._build is not None
        pages: list[Page] = []
        built: list[MessageWidget] = []
        for start in range(0, len(ids), self.PAGE_SIZE):
            page = Page(self._col.spacing(), self._inner)
            page.hide()
            for mid in ids[start : start + self.PAGE_SIZE]:
                w = self._build(mid)
                w.refresh()
                w.action_requested.connect(self.action_requested)
                page.lay.addWidget(w)
                built.append(w)
            pages.append(page)
        return pages, built

    def _below_px(self) -> int:
        """Pixels of built messages under the viewport's bottom."""
        if not self.messages:
            return 0
        last = self.messages[-1]
        bottom = last.mapTo(self._inner, QPoint(0, 0)).y() + last.height()
        return bottom - (self.verticalScrollBar().value() + self.viewport().height())

    def _page_for_next(self) -> Page:
        """The page the next message built in the background goes into (a new one, not yet in the
        column, when the top one is full). A message is made its page's child as soon as it is built,
        so that it is styled once (a new parent styles a widget again)."""
        page = self._pages[-1] if self._pages else None
        if page is None or page.lay.count() >= self.PAGE_SIZE:
            page = Page(self._col.spacing(), self._inner)
            page.hide()
            self._pages.append(page)
        return page

    def _build_down_to(self, message_id: int) -> None:
        """Build every unbuilt message from the newest down to ``message_id`` at once, what is shown
        kept in place: into new pages, each shown once (showing each message would lay out the
        window's layouts once per message)."""
        self._finish_partial()
        if message_id not in self._unbuilt:
            return
        assert self._build is not None
        at = self._unbuilt.index(message_id)
        ids, self._unbuilt[at:] = self._unbuilt[at:], []
        pages, built = self._new_pages(ids)  # oldest first
        self.setUpdatesEnabled(False)
        try:
            with self._keep_in_place():
                first = self._col.indexOf(self._blank) + 1
                for i, page in enumerate(pages):
                    self._col.insertWidget(first + i, page)
                self._col.setEnabled(False)  # laid out once, below
                try:
                    for page in pages:
                        page.show()
                finally:
                    self._col.setEnabled(True)
                self._col.invalidate()
                self.messages[:0] = built
                self._pages.extend(reversed(pages))  # the top page last
                self.placeholder.hide()
                width = self._message_width()
                self._absorb(sum(p.heightForWidth(width) + self._col.spacing() for p in pages))
        finally:
            self.setUpdatesEnabled(True)

    def _finish_partial(self) -> None:
        """Render the rest of the message being built in the background, and show it."""
        w, self._partial = self._partial, None
        if w is not None:
            with self._keep_in_place():
                w.refresh()
                self._place_above(w, paged=True)
                self._absorb(w.heightForWidth(self._message_width()) + self._col.spacing())

    def _blank_height(self) -> int:
        """Height of the blank block with the gap under it (0 when it is not there)."""
        return self._blank.height() + self._col.spacing() if self._blank.isVisibleTo(self._inner) else 0

    def _blank_topup(self) -> int:
        return int(self.BLANK_VIEWPORTS * max(1, self.viewport().height()))

    def _set_blank(self, height: int | None) -> None:
        """The blank block's height in px (None: there is none)."""
        self._blank.setFixedHeight(max(0, height or 0))
        self._blank.setVisible(height is not None)

    def _absorb(self, added: int) -> None:
        """``added`` px were just built above the shown messages: take them out of the blank block,
        so that what is shown stays where it is; when the block is too low, make it high again
        (what is shown is then kept in place by scrolling), and drop it when everything is built."""
        if not self._blank.isVisibleTo(self._inner):
            return
        left = self._blank.height() - added
        if not self._unbuilt and self._partial is None:
            self._set_blank(None)
        elif left >= 0:
            self._set_blank(left)
        else:
            self._set_blank(max(0, left + self._blank_topup()))

    def _blank_on_screen(self) -> bool:
        return self._blank.height() > 0 and self.verticalScrollBar().value() < self._blank_height()

    def _drop_blank(self) -> None:
        """The person scrolled into the blank block: take it away, so that the built messages show
        (the next ones come in above them, what is shown kept in place)."""
        self._dropping = True
        try:
            with self._keep_in_place():
                self._set_blank(0)
        finally:
            self._dropping = False

    def _ahead_px(self) -> int:
        """Pixels of built messages above the viewport's top (negative: the blank block is on screen)."""
        return self.verticalScrollBar().value() - self._blank_height()

    def _needs_growth(self) -> bool:
        if self._partial is not None or self._needs_below():
            return True
        return bool(self._unbuilt) and self._ahead_px() < self.AHEAD_VIEWPORTS * max(1, self.viewport().height())

    def _needs_below(self) -> bool:
        return bool(self._below) and self._below_px() < self.AHEAD_VIEWPORTS * max(1, self.viewport().height())

    def _schedule_growth(self) -> None:
        if self._needs_growth() and not self._grow_timer.isActive():
            self._grow_timer.start()

    def _grow(self) -> None:
        """Build one older message, or render a part of the one being built (a turn of the event
        loop each, so scrolling stays smooth)."""
        if not self._needs_growth() or not self.isVisible():
            return
        if self._partial is None and self._needs_below():  # under the view first: where the person reads on
            self._build_next_below()
            self._schedule_growth()
            return
        w = self._partial
        if w is None:  # a new message: its widget (its page's child, not shown), no text yet
            assert self._build is not None
            w = self._partial = self._build(self._unbuilt.pop())
            w.setParent(self._page_for_next())
            self._rendered = False
        elif not self._rendered:  # a part of its text, styled and laid out at the column's width
            self._rendered = w.render_part(self.PART_CHARS)
            for child in w.findChildren(QWidget):
                child.ensurePolished()  # a new block is styled when shown, else: once, here
            w.heightForWidth(self._message_width())  # the labels keep their text laid out
        else:  # show it
            self._partial = None
            with self._keep_in_place():
                self._place_above(w, paged=True)
                self._absorb(w.heightForWidth(self._message_width()) + self._col.spacing())
            # The message's objects live as long as the chat is shown: out of the collector's
            # sight (as at a reply's start, app/ui/common/repaint_clock.py), so a full collection does
            # not walk every message built so far in the middle of a scroll (64-350 ms measured).
            gc.freeze()
        self._schedule_growth()

    # ------------------------------------------------------------------ keyboard
    def focusNextPrevChild(self, next: bool) -> bool:
        """Tab and Shift+Tab go through the messages in the order they are shown (:mod:`app.ui.chat.tab_order`);
        past the first or last message, focus leaves the chat."""
        return bool(move_focus(self, self._inner, self.messages, next)) or super().focusNextPrevChild(next)

    def _keep_in_place(self) -> KeepInPlace:
        """Keeps what the viewport shows in place while messages are built above it (unless the view
        follows the newest text or keeps a search match in view)."""
        return KeepInPlace(self, self.messages, not self._follow and self._scroll_target is None)

    def showEvent(self, e: QShowEvent) -> None:
        super().showEvent(e)
        self._schedule_growth()

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._schedule_growth()

    def _on_range(self, _min: int, maximum: int) -> None:
        if self._scroll_target is not None:
            self._scroll_to_target()
        elif self._follow:
            self.verticalScrollBar().setValue(maximum)

    def _on_scroll(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 4 and not self._below  # the chat's end is not built yet
        if self.messages and not self._dropping and self._blank_on_screen():
            self._drop_blank()
        self._schedule_growth()

"""One chat message as a widget: header with actions, the body (plain text for the person,
Markdown with highlighted code blocks for replies: :mod:`app.ui.chat.markdown_view`), and a footer.

What it shows of the message (title, badge, footer, provenance, which actions are offered) comes
from :mod:`app.ui.chat.presenter` (:meth:`MessageWidget.present`); what the person does with it
comes out as :attr:`MessageWidget.action_requested`.
"""

from __future__ import annotations

import enum
import html
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.chat.context import Role
from app.core.sampling.alternatives import ReplyAlternatives, TokenColour
from app.ui.chat.edit_box import EditBox
from app.ui.chat.header import MessageHeader
from app.ui.chat.markdown import plain_to_html, warm_up
from app.ui.chat.markdown_view import MarkdownView, discard, rich_label
from app.ui.chat.presenter import Badge, BadgeKind, MessageLook, tool_result_readable
from app.ui.chat.token_text import TokenText
from app.ui.common import dialogs
from app.ui.common.elided_label import ElidedLabel
from app.ui.speculative.figures import DraftMarks
from app.ui.speculative.marks_bar import DraftsBar

__all__ = ["BadgeKind", "MessageAction", "MessageWidget"]

# The formula renderer and the common code lexers load on background threads as soon as the window's
# message widgets are imported (window creation), long before a reply can need them (markdown.warm_up).
warm_up()

#: Characters of a message the chat lays out; the rest is one click away ("Show all...", a plain-text
#: window). Qt lays a label's text out whole: a 4.9 MB message (an imported chat) took 16.5 s in
#: ``open_conversation`` and froze the window; 50,000 characters take about 0.2 s here.
SHOWN_CHARS = 50_000


def result_html(text: str) -> str:
    """A tool's readable result (:func:`~app.ui.chat.presenter.tool_result_readable`) for a rich-text
    label: escaped, its spaces and line breaks kept (indented JSON stays indented), in the fixed font."""
    return f'<div style="white-space: pre-wrap; font-family: monospace;">{html.escape(text)}</div>'


def shown_part(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` if it has at most ``limit`` characters, else its start, cut at the last line break in
    the final fifth of ``limit`` (at ``limit`` when there is none)."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", limit * 4 // 5, limit)
    return text[: cut if cut > 0 else limit]


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


class MessageWidget(QFrame):
    """One chat message: header with actions, body, and (for replies) a stats footer.

    Args:
        role: :class:`~app.core.chat.context.Role` (or its value) of the message.

    Signals:
        action_requested(object, int, object): ``(MessageAction, message_id, payload)``; the
            payload is described on :class:`MessageAction`.
    """

    action_requested = Signal(object, int, object)  # (MessageAction, message id, payload: str | int | bool | None)

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
        self._lay = lay  # typed: self.layout() is QLayout | None (the token view and the editor go in here)
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
        self.drafts_bar: DraftsBar | None = None  # its "Mark drafted tokens" toggle (a speculated reply)
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
            self.body: QLabel | MarkdownView = rich_label(
                self._user_html(shown_part(self._readable(text)), text), "userText"
            )
        else:
            self.body = MarkdownView()
            if text:
                self.body.set_markdown(shown_part(text))
        lay.addWidget(self.body)
        self.more = QWidget()  # "Showing the first n of m characters  [Show all...]" under a cut body
        more_lay = QHBoxLayout(self.more)
        more_lay.setContentsMargins(0, 0, 0, 0)
        self.more_label = QLabel("")
        self.more_label.setObjectName("msgFooter")
        self.more_label.setWordWrap(True)
        self.more_button = QPushButton("Show all…")
        self.more_button.setToolTip("The whole message as plain text, in a window (Copy copies it all)")
        self.more_button.clicked.connect(self.show_all)
        more_lay.addWidget(self.more_label, 1)
        more_lay.addWidget(self.more_button)
        lay.addWidget(self.more)
        self.whole_dialog: dialogs.TextDialog | None = None
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
        self._show_cut(shown_part(self._readable(text)))

    def _action_button(self, text: str, tip: str, slot: Callable[[], object] | None = None) -> QToolButton:
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
        target = self._target()
        if isinstance(self.body, MarkdownView):
            self.body.set_markdown(target, self._streaming)
        else:
            self.body.setText(self._user_html(target, self._text))
        self._show_cut(target)
        return True

    def _readable(self, text: str) -> str:
        """What the body shows for ``text``: a tool's result as text (:func:`tool_result_readable`; the
        message's text, copied and sent, stays as stored), anything else as it is."""
        readable = tool_result_readable(text) if self.role is Role.USER else None
        return text if readable is None else readable

    @staticmethod
    def _user_html(shown: str, text: str) -> str:
        """A user message's body: a tool's result kept as laid out (:func:`result_html`), else plain text."""
        return result_html(shown) if tool_result_readable(text) is not None else plain_to_html(shown)

    def _target(self) -> str:
        """What the body shows of the text: all of it while it streams, else :func:`shown_part`."""
        return self._text if self._streaming else shown_part(self._readable(self._text))

    def _show_cut(self, shown: str) -> None:
        """Say under the body how much of the text it shows, when not all."""
        whole = len(self._readable(self._text))
        cut = len(shown) < whole
        if cut:
            self.more_label.setText(f"Showing the first {len(shown):,} of {whole:,} characters.")
        self.more.setVisible(cut)

    def show_all(self) -> None:
        """Open the whole text (plain, selectable, with Copy) in a window of its own."""
        if self.whole_dialog is not None:
            self.whole_dialog.close()
            self.whole_dialog.deleteLater()
        self.whole_dialog = dialogs.show_text(self, "The whole message", self._text)

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
        target = self._target()
        if not isinstance(body, MarkdownView) or self._streaming or not target.startswith(self._shown):
            self.refresh()
            return True
        cut = target.find("\n\n", len(self._shown) + max_chars)
        if cut < 0:
            self.refresh()
        else:
            self._shown = target[:cut]
            body.set_markdown(self._shown, streaming=True)
        return cut < 0

    def set_footer(self, text: str) -> None:
        self.footer.setText(text)
        self.footer.setVisible(bool(text))

    def present(self, look: MessageLook) -> None:
        """Show ``look`` (:mod:`app.ui.chat.presenter`): only what differs from what is shown is set,
        so a long chat's messages cost no restyling for the badges and actions they do not have."""
        if look.title and look.title != self.title.text():
            self.title.setText(look.title)
        self.set_text(look.text)
        self.set_branch(*look.branch)
        self.show_badge(look.badge)
        if look.footer != self.footer.text():
            self.set_footer(look.footer)
        if look.how_made != self._how_made:
            self.set_how_made(look.how_made)
        if look.can_show_tokens or self.header.is_offered(self.tokens_btn):
            self.set_can_show_tokens(look.can_show_tokens)
        if look.can_continue or self.header.is_offered(self.continue_btn):
            self.set_can_continue(look.can_continue, look.why_no_continue)
        if self.role is Role.USER and (look.can_reply or self.header.is_offered(self.regen_btn)):
            self.set_can_reply(look.can_reply)
        if look.streaming != self._streaming:
            self.set_streaming(look.streaming)

    def show_badge(self, badge: Badge) -> None:
        """Show ``badge`` (nothing is restyled when it is the one shown)."""
        if (badge.text, badge.kind.value) != (self.badge.text(), self.badge.property("kind") or ""):
            self.set_badge(badge.text, badge.kind)

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

    def show_tokens(
        self,
        alts: ReplyAlternatives | None,
        colour: TokenColour = TokenColour.PROBABILITY,
        marks: DraftMarks | None = None,
    ) -> None:
        """Show the reply as its tokens coloured by ``colour``, with hover and click (:class:`TokenText`);
        None: the text again. Built once when asked, never while the reply streams. ``marks``: the
        reply was speculated: a "Mark drafted tokens" toggle above the tokens marks its drafts."""
        if self.token_text is not None:
            discard(self.token_text)
            self.token_text = None
        if self.drafts_bar is not None:
            discard(self.drafts_bar)
            self.drafts_bar = None
        self.tokens_btn.setChecked(alts is not None)
        if alts is None:
            self.body.show()
            return
        view = TokenText(alts, colour, marks)
        view.funnel_requested.connect(lambda step: self._emit(MessageAction.TOKEN_FUNNEL, step))
        view.branch_requested.connect(lambda step, tok: self._emit(MessageAction.BRANCH_FROM, (step, tok)))
        lay = self._lay
        lay.insertWidget(lay.indexOf(self.body) + 1, view)
        if marks is not None:
            self.drafts_bar = DraftsBar(marks, alts.n_steps, view.set_marks_shown)
            lay.insertWidget(lay.indexOf(view), self.drafts_bar)
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
            if self._shown == self._text:
                shown = shown_part(self._text)
                self._show_cut(shown)
            else:
                shown = self._shown  # a part of it (render_part): the rest comes on the next parts
            self.body.set_markdown(shown, streaming=False)
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
        self.editor = EditBox(self._text)  # as tall as its text (app/ui/chat/edit_box.py)
        self.editor.setObjectName("editBox")
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
        lay = self._lay
        idx = lay.indexOf(self.body)
        self.body.hide()
        lay.insertWidget(idx + 1, self.editor)
        lay.insertWidget(idx + 2, bar)
        self.editor.setFocus()
        self.editor.reveal()  # its first line in view, not under the bar above the chat

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

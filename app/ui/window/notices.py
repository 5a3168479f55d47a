"""The window's notices: one message for the person at a time, each about a topic.

:class:`Notices` is the one owner of "what the banner says and what about": code that has
something to tell the person posts it under a :class:`NoticeTopic`, and a later event clears
only its own topic (a model that loads clears a load error, never a startup notice). The
:class:`~app.ui.window.banner.Banner` is its view.

The banner sits on the page shown (chat or models), under that page's bar, so a message shows
where its action was; a message that belongs to the other page is cleared when the page changes.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence

from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.ui.common.severity import Severity
from app.ui.window.banner import Banner
from app.ui.window.pages import Page

log = logging.getLogger(__name__)

Action = tuple[str, Callable[[], object]]  # a button on the notice: its label and what it does


class NoticeTopic(str, enum.Enum):
    """What a notice is about, so a later event clears only its own kind of message."""

    GENERAL = "general"
    MODEL = "model"  # a model could not be loaded
    ENGINE = "engine"  # the engine stopped
    CHAT_MODEL = "chat-model"  # the chat was made with another model
    STARTUP = "startup"  # settings or history set aside at start
    NO_MODEL = "no-model"  # a message was refused because no model is loaded (yet)
    REPLY = "reply"  # a reply is being written (in another chat, or refused an action)
    MODELS_PAGE = "models-page"  # a notice from the models page (library, Hub, downloads)
    FIRST_START = "first-start"  # no model to open at first start (app/ui/window/first_start.py)
    SYSTEM_PROMPT = "system-prompt"  # a chat's system prompt was edited (offer it for new chats)
    CONTEXT = "context"  # the context filled (a reply stopped at n_ctx, or old turns were dropped)
    DELETED_MESSAGE = "deleted-message"  # Undo of a message deletion, until the chat changes
    SEND = "send"  # a message sent that could not be answered (too long for n_ctx...), until the chat changes
    TOOL = "tool"  # an MCP tool call running, or how it failed (app/ui/mcp/chat_tools.py)
    BASE_MODEL = "base-model"  # the model has no chat template: a plain transcript (app/ui/window/base_model.py)
    LOGIT_BIAS = "logit-bias"  # the logit bias was set for another vocabulary (app/ui/window/bias_vocabulary.py)
    INTERNAL_ERROR = "internal-error"  # an unexpected error in the window (app/diagnostics.py), with its log
    DEPTH_SWEEP = "depth-sweep"  # a depth sweep holds the engine: no reply until it ends (app/ui/depth_sweep)


# Topics that belong to one page: showing the other page clears them.
PAGE_TOPICS: dict[NoticeTopic, Page] = {
    NoticeTopic.MODELS_PAGE: Page.MODELS,
    NoticeTopic.FIRST_START: Page.MODELS,
    NoticeTopic.CHAT_MODEL: Page.CHAT,
    NoticeTopic.REPLY: Page.CHAT,
    NoticeTopic.SYSTEM_PROMPT: Page.CHAT,
    NoticeTopic.NO_MODEL: Page.CHAT,
    NoticeTopic.CONTEXT: Page.CHAT,
    NoticeTopic.SEND: Page.CHAT,
    NoticeTopic.BASE_MODEL: Page.CHAT,
}


class Notices:
    """Posts and clears the window's notices by topic, on its banner.

    The text may hold chat titles and the person's words, so it is logged at DEBUG only;
    the severity and topic are logged at the severity's level.

    Args:
        banner: the view the notice is shown on.
        anchors: for each page, the widget the banner sits under on that page (its bar).

    Attributes:
        banner: the view.
        topic: the topic of the notice posted last (shown or since hidden).
        severity: that notice's :class:`Severity`.
    """

    def __init__(self, banner: Banner, anchors: Mapping[Page, QWidget] | None = None) -> None:
        self.banner = banner
        self._anchors = dict(anchors or {})
        self.topic = NoticeTopic.GENERAL
        self.severity = Severity.INFO

    def show(self, topic: NoticeTopic, severity: Severity, text: str, actions: Sequence[Action] = ()) -> None:
        """Show ``text`` (rich text) about ``topic``, with a button per ``(label, callback)`` in
        ``actions``; it replaces the notice shown (whatever its topic)."""
        topic, severity = NoticeTopic(topic), Severity(severity)
        log.log(severity.log_level, "notice shown: %s about %s", severity.value, topic.value)
        log.debug("notice text: %s", text)
        self.topic = topic
        self.severity = severity
        self.banner.show_message(severity, text, list(actions))

    def clear(self, *topics: NoticeTopic) -> None:
        """Hide the notice shown if it is about one of ``topics``."""
        if self.banner.isVisible() and self.topic in {NoticeTopic(t) for t in topics}:
            self.banner.hide()

    def hide(self) -> None:
        """Hide the notice shown, whatever its topic."""
        self.banner.hide()

    def showing(self, topic: NoticeTopic) -> bool:
        """Whether the notice on screen is about ``topic``."""
        return self.banner.isVisible() and self.topic is NoticeTopic(topic)

    def showing_problem(self) -> bool:
        """Whether the notice on screen is a warning or an error (a hint must not take its place)."""
        return self.banner.isVisible() and self.severity in (Severity.WARNING, Severity.ERROR)

    def place(self, page: Page) -> None:
        """Put the banner on ``page`` (under its anchor); a notice that belongs to the other page goes."""
        owner = PAGE_TOPICS.get(self.topic)
        if owner is not None and owner is not page:
            self.banner.hide()
        under = self._anchors.get(page)
        parent = under.parentWidget() if under is not None else None
        column = parent.layout() if parent is not None else None  # the page's column
        if under is not None and isinstance(column, QVBoxLayout) and column.indexOf(self.banner) < 0:
            banner_parent = self.banner.parentWidget()
            visible = banner_parent is not None and self.banner.isVisibleTo(banner_parent)
            column.insertWidget(column.indexOf(under) + 1, self.banner)
            self.banner.setVisible(visible)

"""Tab and Shift+Tab in the chat: through the messages in the order they are shown.

The window's focus chain is the order widgets were made in, and a long chat builds its older
messages after the newest (:mod:`app.ui.chat.view`): Qt's own chain would jump from the newest
message to an older one. :func:`move_focus` goes through each message's stops (header, text,
footer) in the order shown, and past the first or last message leaves the chat.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from app.ui.chat.message import MessageWidget


def takes_tab(w: QWidget) -> bool:
    """Whether Tab stops at ``w`` (shown, enabled, taking tab focus)."""
    return w.isVisible() and w.isEnabled() and bool(w.focusPolicy() & Qt.FocusPolicy.TabFocus)


def tab_stops(msg: MessageWidget) -> list[QWidget]:
    """The widgets of a message that Tab stops at, in the order they were made (header, text, footer)."""
    return [c for c in msg.findChildren(QWidget) if takes_tab(c)]


def move_focus(area: QScrollArea, column: QWidget, messages: Sequence[MessageWidget], forward: bool) -> bool | None:
    """Move the focus from the widget that has it to the next (``forward``) or previous stop.

    Args:
        area: the chat's scroll area (a stop reached is scrolled into view).
        column: the widget holding the messages.
        messages: the message widgets, in the order shown.

    Returns:
        True when the focus moved; None when the focus is not in a message (Qt's own chain applies).
        False: no stop was found (Qt's own chain applies too).
    """
    focus = QApplication.focusWidget()
    msg = None
    p = focus
    while p is not None and p is not column:
        if isinstance(p, MessageWidget):
            msg = p
        p = p.parentWidget()
    if focus is None or msg is None or msg not in messages:
        return None
    reason = Qt.FocusReason.TabFocusReason if forward else Qt.FocusReason.BacktabFocusReason
    step = 1 if forward else -1
    stops = tab_stops(msg)
    j = stops.index(focus) + step if focus in stops else -1
    target: QWidget | None = stops[j] if 0 <= j < len(stops) else None
    i = messages.index(msg) + step
    while target is None and 0 <= i < len(messages):
        found = tab_stops(messages[i])
        target = (found[0] if forward else found[-1]) if found else None
        i += step
    if target is not None:
        target.setFocus(reason)
        area.ensureWidgetVisible(target, 0, 40)
        return True
    w: QWidget = focus  # out of the chat: the window's chain from here, past the chat's widgets
    for _ in range(10_000):
        after = w.nextInFocusChain() if forward else w.previousInFocusChain()
        if after is None or after is focus:
            break
        w = after
        if not column.isAncestorOf(w) and takes_tab(w):
            w.setFocus(reason)
            return True
    return False

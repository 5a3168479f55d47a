"""When the chat view (app/ui/chat/view.py) has finished its own work, for tests that assert what
it shows once it is done: what stays put, what stops, what stays on screen.

A fixed wait ("settled after 700 ms") passes when the work is late; these read the view's
own timers instead, so a test waits exactly until the work is over, however slow the machine.
"""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from app.ui.chat.view import ChatView


def building_stopped(view: ChatView) -> bool:
    """The view builds no more messages in the background: no build step is queued and none is
    needed (the margin of built messages around the viewport is full, or nothing is left to build).

    The events already posted (a layout pass after a build, which may ask for more) are handled
    first, so a True is not read between a build and the layout it causes.
    """
    QApplication.processEvents()
    return not view._grow_timer.isActive() and not view._needs_growth()


def settled(view: ChatView) -> bool:
    """The view is done: it no longer brings a search match back into view (its scroll target is
    released, ``_target_timer``) and builds nothing more in the background."""
    return not view._target_timer.isActive() and building_stopped(view)

"""While a depth sweep holds the engine, the chat says so: Send disabled with its reason, and a notice line.

A sweep runs in the chat's own llama.cpp context (:mod:`app.engine.depth_sweep`), so no reply can
start until it ends; a message typed meanwhile stays in the box (the chat controller says why if the
person presses Enter). The notice offers Cancel and a way back to the window.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject

from app.ui.chat.composer import Composer
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient
from app.ui.window.notices import Notices, NoticeTopic

HELD = "Measuring speed vs context: the engine cannot reply until the sweep ends or is cancelled."


class SweepChatGuard(QObject):
    """Follows ``engine``'s sweep_started / sweep_ended: holds ``composer``'s Send and shows a notice.

    Args:
        cancel: stops the sweep (the notice's Cancel).
        show_window: brings the Speed vs context window forward (the notice's Show).
    """

    def __init__(
        self,
        engine: EngineClient,
        composer: Composer,
        notices: Notices,
        cancel: Callable[[], object],
        show_window: Callable[[], object],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._composer, self._notices = composer, notices
        self._cancel, self._show = cancel, show_window
        engine.sweep_started.connect(lambda _rid: self._hold(True))
        engine.sweep_ended.connect(lambda _ev: self._hold(False))

    def _hold(self, on: bool) -> None:
        self._composer.set_held(HELD if on else "")
        if on:
            self._notices.show(
                NoticeTopic.DEPTH_SWEEP,
                Severity.INFO,
                HELD + " Your message stays in the box.",
                [("Cancel sweep", self._cancel), ("Show", self._show)],
            )
        else:
            self._notices.clear(NoticeTopic.DEPTH_SWEEP)

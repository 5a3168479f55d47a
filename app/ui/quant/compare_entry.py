"""`CompareLauncher`: where the Compare window is opened from, and the one place that owns it.

The composition root (:func:`app.ui.window.compose.create_window`) builds it with narrow arguments
(the library's entries, the loaded model, the chat shown, the chat-template overrides), puts its
action in the Tools menu, and connects the Library's "Compare with the source" to :meth:`compare`.
The window is made on first use and kept (closing it hides it; a comparison in flight is stopped);
when the main window closes, a comparison's engine process is ended with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from app.core.chat.context import ChatMessage
from app.core.models.library import ModelEntry
from app.ui.engine.client import EngineClient
from app.ui.jobs.runner import JobRunner
from app.ui.quant.compare_window import CompareWindow, make_compare_window

ACTION_TEXT = "&Compare quantizations…"


class CompareLauncher(QObject):
    """Opens the Compare window (made on first use).

    Args:
        main: the main window: the Compare window's parent; its Close ends a comparison in flight.
        entries: the library's models, as last scanned.
        loaded: the chat's loaded model file, or None.
        chat_source: the chat shown as the engine would be sent it (None: no chat shown).
        template_for: the person's chat template override for a model file (None: the GGUF's).
        make_runner: makes the job runner (None: a real engine process per comparison).
        others: what else Glassbox runs now ("a chat reply", "a quantization"...; the comparison's tok/s
            taken meanwhile are marked measured under load).
    """

    def __init__(
        self,
        main: QWidget,
        entries: Callable[[], Sequence[ModelEntry]],
        loaded: Callable[[], str | None],
        chat_source: Callable[[], tuple[ChatMessage, ...] | None],
        template_for: Callable[[str], str | None],
        make_runner: Callable[[], JobRunner] | None = None,
        others: Callable[[], tuple[str, ...]] = tuple,
    ) -> None:
        super().__init__(main)
        self._others = others
        self._main = main
        self._args = (entries, loaded, chat_source, template_for)
        self._make_runner = make_runner
        self.window: CompareWindow | None = None
        main.installEventFilter(self)

    def add_to(self, menu: QMenu) -> QAction:
        """Put "Compare quantizations…" in ``menu``."""
        act = QAction(ACTION_TEXT, self._main)
        act.setToolTip("Run one text through two GGUF files of a model and see where they differ, token by token.")
        act.triggered.connect(self.open)
        menu.addAction(act)
        return act

    def open(self) -> CompareWindow:
        """Show the Compare window (made on first use), its lists refreshed, in front."""
        if self.window is None:
            self.window = make_compare_window(
                *self._args, make_runner=self._make_runner, parent=self._main, others=self._others
            )
        if not self.window.controller.running:
            self.window.prepare()
        if self.window.isVisible():  # already open, maybe behind the main window: bring it forward
            self.window.raise_()
            self.window.activateWindow()
        else:
            self.window.show()
        return self.window

    def compare(self, path_a: Path, path_b: Path) -> CompareWindow:
        """Open the window with ``path_a`` as model A and ``path_b`` as model B (nothing starts by itself)."""
        window = self.open()
        if not window.controller.running:
            window.set_pair(path_a, path_b)
        return window

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The main window closing ends a comparison's engine process."""
        if watched is self._main and event.type() == QEvent.Type.Close and self.window is not None:
            self.window.controller.shutdown()
            self.window.close()
        return False


def engine_activity(engine: EngineClient) -> tuple[str, ...]:
    """What the chat's engine is doing that shares the CPUs with a comparison: "a chat reply", "a depth sweep"."""
    return (("a chat reply",) if engine.generating else ()) + (("a depth sweep",) if engine.sweeping else ())

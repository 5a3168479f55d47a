"""Speculative decoding's parts wired together, for the main window: the Model panel's settings box
(its draft model picked from the library or a file dialog), a refused draft's reason, the Speculation
view following the loaded model, and "Measure speed-up".

A draft model whose GGUF header already tells it cannot draft for the model is refused in the Model panel
before Apply (:func:`~app.ui.speculative.draft_memory.draft_refusal`). One the engine still refuses at load
(``FailureKind.INCOMPATIBLE``: a different vocabulary, named by ``app/engine/compat.py``) fails the whole
load: the model that was loaded before is loaded again as it was (its last load settings that worked,
remembered again for it), and the reason shows under the settings and in the window's notice, with
"Load without speculation" (the file asked for, speculation off, remembered).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMainWindow, QScrollArea

from app.core import protocol as P
from app.core.chat.context import LoadSettings, Role
from app.core.hardware.bandwidth import cached_bandwidth
from app.core.hardware.speed_bound import decode_weight_bytes
from app.ui.chat.controller import ChatController
from app.ui.chat.shown import ShownChat
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient
from app.ui.speculative.measure import MeasureSource, SpeedupMeasure
from app.ui.speculative.settings_box import SpeculationBox
from app.ui.speculative.view import SpeculationView
from app.ui.window.model_change import LoadRequest, ModelChange, ModelPhase
from app.ui.window.model_loader import ModelLoader
from app.ui.window.notices import Notices, NoticeTopic

VIEW_HEIGHT = 290  # px: the view's figures and its three columns without a scroll bar at 1366x768


class SpeculationFeature(QObject):
    """Wires speculative decoding's window parts (see the module docstring).

    Args:
        engine: the engine client (the loaded model, the measurement's requests).
        loader: the model loader (loads and their failures; "Load without speculation").
        chat: the chat controller (the prompt of the reply shown, the chat template override).
        shown: the chat and turn shown (the reply measured).
        box: the Model panel's speculation settings.
        view: the Speculation view, and its dock (brought forward by the box's link).
        dock, beside: the view's dock, and the dock it opens as a tab beside (Tokens).
        model_dock: the Model panel's dock (the view's "Speculation settings…" brings it forward).
        library: the library's GGUF files, ``(label, path)``, offered as draft models.
        choose_file: a file dialog for a GGUF (None: cancelled).
        notices: the window's notices (a refused draft).
        cache_dir: where the bandwidth measurement is kept (the roofline).
    """

    def __init__(
        self,
        engine: EngineClient,
        loader: ModelLoader,
        chat: ChatController,
        shown: ShownChat,
        box: SpeculationBox,
        view: SpeculationView,
        dock: QDockWidget,
        beside: QDockWidget,
        model_dock: QDockWidget,
        library: Callable[[], Sequence[tuple[str, str]]],
        choose_file: Callable[[], str | None],
        notices: Notices,
        cache_dir: Path,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine, self.loader, self.chat, self.shown = engine, loader, chat, shown
        self.box, self.view, self.dock, self.beside, self.notices = box, view, dock, beside, notices
        self.model_dock = model_dock
        self._last_good: LoadRequest | None = None  # the last load on this machine that worked
        self._restoring = False  # loading _last_good again after a refused draft (its refusal stays shown)
        self._refused: tuple[str, list[tuple[str, Callable[[], object]]]] = ("", [])  # the refusal's notice
        self.measure = SpeedupMeasure(engine.api, self)
        box.set_sources(lambda: [c for c in library() if c[1] != loader.loaded_path], choose_file)
        box.view_requested.connect(self.show_view)
        view.settings_requested.connect(self.show_settings)
        view.measure_requested.connect(lambda: self.measure.start(self.source()))
        self.measure.progressed.connect(view.show_measurement)
        bw = cached_bandwidth(cache_dir)
        view.set_bandwidth(bw.bytes_s if bw is not None else 0.0)
        loader.model_changed.connect(self._model_changed)
        engine.model_load_failed.connect(self._load_failed)  # after the loader's notice: this one replaces it

    def show_view(self) -> None:
        """Open the Speculation view's dock and bring it forward: closed, it opens as a tab beside
        ``beside`` (the Tokens dock: the width of the chat column), at least :data:`VIEW_HEIGHT` tall."""
        main = self.dock.parentWidget()
        if not self.dock.isVisible() and not self.dock.isFloating() and isinstance(main, QMainWindow):
            if self.beside.isVisible():
                main.tabifyDockWidget(self.beside, self.dock)
            self.dock.show()
            # After the layout placed it (a resize in the same turn is undone by it).
            QTimer.singleShot(0, lambda: self._grow(main))
        self.dock.show()
        self.dock.raise_()

    def show_settings(self) -> None:
        """Bring the Model panel forward, scrolled to the Speculative decoding switch, which takes the focus."""
        self.model_dock.show()
        self.model_dock.raise_()
        area = self.model_dock.widget()
        if isinstance(area, QScrollArea):
            area.ensureWidgetVisible(self.box.enabled)
        self.box.enabled.setFocus()

    def _grow(self, main: QMainWindow) -> None:
        if self.dock.height() < VIEW_HEIGHT:
            main.resizeDocks([self.dock], [VIEW_HEIGHT], Qt.Orientation.Vertical)

    def source(self) -> MeasureSource | str:
        """What "Measure speed-up" regenerates: the prompt of the last reply shown, and how it was made;
        or why there is nothing to measure."""
        model = self.engine.model
        if model is None or model.remote is not None:
            return "Load a model on this machine first."
        if not model.speculation.enabled:
            return "Turn speculative decoding on in the Model panel and press Apply: the comparison needs a drafter."
        if self.engine.generating:
            return "Wait for the reply to end (or stop it), then measure."
        reply = next((m for m in reversed(self.shown.state.path) if m.role is Role.ASSISTANT), None)
        if reply is None or self.chat.conversation_id is None:
            return "Send a message first: the measurement regenerates the reply shown."
        meta = reply.meta
        return MeasureSource(
            self.chat.messages_for_engine(before=reply.id),
            meta.sampler if meta.sampler is not None else self.chat.chat_settings.current.sampler,
            meta.stop_strings,
            self.chat.chat_template,
        )

    def _model_changed(self, change: ModelChange) -> None:
        if change.phase is ModelPhase.LOADING and not self._restoring:
            self.box.show_refusal("")
        if change.phase in (ModelPhase.LOADED, ModelPhase.FAILED) and self._restoring:
            self._restoring = False
            self._say_refused(*self._refused)  # the loader cleared the model's notices as it loaded
        req = change.request
        if change.phase is ModelPhase.LOADED and req is not None and req.remote is None:
            self._last_good = req
        loaded = change.loaded if change.phase is ModelPhase.LOADED else self.engine.model
        if loaded is None or loaded.remote is not None:
            self.view.set_model(None, 0)
        else:
            self.view.set_model(loaded.speculation, decode_weight_bytes(loaded.info))

    def _load_without(self, path: str, off: LoadSettings) -> None:
        """Load ``path`` with speculation off, and remember that for it."""
        self.loader.remember(off)
        self.loader.load_model(path, off)

    def _load_failed(self, ev: P.Failed) -> None:
        if ev.kind is not P.FailureKind.INCOMPATIBLE:
            return
        asked = self.loader.asked
        actions: list[tuple[str, Callable[[], object]]] = []
        if asked is not None and asked.settings.speculation.enabled:
            off = replace(asked.settings, speculation=replace(asked.settings.speculation, enabled=False))
            actions.append(("Load without speculation", lambda: self._load_without(asked.path, off)))
        good = self._last_good
        if good is not None and not self._restoring:
            what = f"{html.escape(Path(good.path).name)} is loaded again with its last settings that worked"
            if asked is not None and asked.path == good.path:
                self.loader.remember(good.settings)  # not the refused settings
            self._restoring = True
            self.loader.load_model(good.path, good.settings)
        else:
            what = "the model was not loaded"
        self.box.show_refusal(ev.message)
        self._refused = (f"The draft model was refused, so {what}: {html.escape(ev.message)}", actions)
        self._say_refused(*self._refused)

    def _say_refused(self, text: str, actions: list[tuple[str, Callable[[], object]]]) -> None:
        # Marked as rich text (a tag first): without one the label read the escaped text as plain and
        # showed "&#x27;" for an apostrophe.
        self.notices.show(NoticeTopic.MODEL, Severity.ERROR, f"<span>{text}</span>", actions)

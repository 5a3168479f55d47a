"""The bars above the two pages: Chat / Models navigation, the model picker and the engine's state.

The chat page's bar follows the engine (:meth:`TopBar.follow_engine`) and the loaded model
(:meth:`TopBar.show_model`, a slot for :attr:`~app.ui.window.model_loader.ModelLoader.model_changed`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from PySide6.QtCore import QEvent, QSize, Qt, Signal, SignalInstance
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMenu, QPushButton, QSizePolicy, QToolButton, QWidget

from app.core.gguf.gguf_info import format_bytes
from app.core.settings import Workspace
from app.ui.chat.placeholder import display_name
from app.ui.engine.client import EngineClient, EngineState
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.pages import Page

NO_MODEL_TEXT = "Select a model to load  ▾"
ENGINE_STOPPED_TEXT = "Engine stopped  ▾"
MODEL_BUTTON_MAX_PX = 240  # the model picker's text, at most (elided in the middle)
MODEL_BUTTON_MIN_PX = 110  # the picker's least width: the bar (and the window) may be this narrow
_BUTTON_CHROME_PX = 44  # the picker's padding and menu arrow around its text
LAB_TEXT, LAB_SHORT_TEXT = "Sampling lab", "Lab"  # the lab toggle's label, and in a narrow bar (800 px windows)

_STATE_TEXT = {
    EngineState.STARTING: "starting engine…",
    EngineState.NO_MODEL: "no model",
    EngineState.LOADING: "loading…",
    EngineState.READY: "ready",
    EngineState.GENERATING: "generating",
    EngineState.MEASURING: "measuring speed vs context",
    EngineState.DEAD: "engine stopped",
}


def api_text(answering: int, waiting: int, own: tuple[str, int] | None = None) -> str:
    """The state label's words for the local API's requests: in the engine (answered) and queued.

    ``own``: ``(words, runs)`` when ``runs`` of those requests (in the engine or queued) are the app's own,
    as "Measure speed-up"'s are, not a person's API requests: they are named by ``words`` ("measuring
    speed-up, 4 runs left") and the API requests counted are the others.
    """
    if own is not None and own[1] > 0:
        words, runs = own
        others_answering = max(0, answering - min(runs, answering))
        others_waiting = max(0, waiting - max(0, runs - min(runs, answering)))
        text = f"{words}, {runs} run{'s' if runs != 1 else ''} left"
        if others_answering or others_waiting:
            text += "; " + api_text(others_answering, others_waiting)
        return text
    if not answering:
        return "1 API request waiting" if waiting == 1 else f"{waiting} API requests waiting"
    text = "answering an API request" if answering == 1 else f"answering {answering} API requests"
    return text + (f", {waiting} waiting" if waiting else "")


class _NavBar(QFrame):
    """A bar that starts with the Chat / Models buttons.

    Signals:
        page_requested(object): a nav button was pressed (the :class:`Page`).
    """

    page_requested = Signal(object)  # Page

    def __init__(self, current: Page, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("topBar")
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(12, 6, 12, 6)
        self.nav: dict[Page, QPushButton] = {}
        for page, label in ((Page.CHAT, "Chat"), (Page.MODELS, "Models")):
            b = QPushButton(label)
            b.setObjectName("navButton")
            b.setCheckable(True)
            b.clicked.connect(lambda _=False, p=page: self.page_requested.emit(p))
            self.row.addWidget(b)
            self.nav[page] = b
        self.row.addSpacing(8)
        self.set_page(current)

    def set_page(self, page: Page) -> None:
        """Check the button of the page shown."""
        for p, b in self.nav.items():
            b.setChecked(p is page)


class ModelsBar(_NavBar):
    """The models page's bar: navigation and a one-line hint."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(Page.MODELS, parent)
        hint = QLabel("Models on this computer, the Hugging Face Hub, and downloads. Chatting goes on meanwhile.")
        hint.setObjectName("stateLabel")
        hint.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.row.addWidget(hint)
        self.row.addStretch(1)


class StateLabel(QLabel):
    """The engine's state (``● generating``), sized to its whole text in its own font.

    It was a fixed 90 px, which cut ``● generatin``. It asks for its whole text (the model
    picker gives way first); only when the bar has no room for both does it shrink, never
    below the width of ``● generating``, and then a longer text (``● starting engine…``) is
    elided with the whole text as its tooltip.
    """

    def __init__(self) -> None:
        super().__init__("")
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

    @property
    def full_text(self) -> str:
        """The whole state text (the label may show it elided)."""
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self._fit()

    def _chrome(self) -> int:
        m = self.contentsMargins()
        return m.left() + m.right() + 2 * self.margin() + 4

    def sizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + self._chrome(), super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        floor = self.fontMetrics().horizontalAdvance(f"● {_STATE_TEXT[EngineState.GENERATING]}") + self._chrome()
        return QSize(min(self.sizeHint().width(), floor), super().minimumSizeHint().height())

    def _fit(self) -> None:
        self.updateGeometry()
        room = self.width() - self._chrome() + 4
        if self.width() >= self.sizeHint().width():
            self.setText(self._full)
            self.setToolTip("")
        else:
            self.setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, room))
            self.setToolTip(self._full)

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._fit()

    def changeEvent(self, e: QEvent) -> None:
        super().changeEvent(e)
        if e.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._fit()


class LabToggle(QToolButton):
    """The sampling lab's toggle. It never holds the window wide (its least width is 0): the bar gives
    it its whole label, "Lab" when narrower, or hides it when even that would squeeze the model picker
    (View → Sampling lab stays)."""

    def minimumSizeHint(self) -> QSize:
        return QSize(0, super().minimumSizeHint().height())


class TopBar(_NavBar):
    """The chat page's bar: navigation, the model picker (its menu is filled by the window
    just before it opens, see :attr:`model_menu`), the engine's state, and the sampling lab's toggle.

    Signals:
        workspace_requested(object): the lab toggle was clicked: the
            :class:`~app.core.settings.Workspace` asked for.
    """

    workspace_requested = Signal(object)  # Workspace

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(Page.CHAT, parent)
        self._own: tuple[str, Callable[[], Collection[int]]] | None = None  # the app's own API runs, named
        self._show_engine: Callable[[], None] = lambda: None  # the state label again (follow_engine)
        self.model_button = QToolButton()
        self.model_button.setObjectName("modelButton")
        self.model_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.model_menu = QMenu(self.model_button)
        self.model_button.setMenu(self.model_menu)
        self.model_button.setMinimumWidth(MODEL_BUTTON_MIN_PX)
        self._model_text = NO_MODEL_TEXT
        self.row.addWidget(self.model_button)
        self.state_label = StateLabel()
        self.state_label.setObjectName("stateLabel")
        self.row.addWidget(self.state_label)
        self.row.addStretch(1)
        self.lab_toggle = LabToggle()
        self.lab_toggle.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.lab_toggle.setObjectName("labToggle")
        self.lab_toggle.setText(LAB_SHORT_TEXT)  # its least width; the whole label when the bar has room
        self.lab_toggle.setCheckable(True)
        self.lab_toggle.setToolTip(
            "The sampling lab: the Sampler, the Funnel and the Tokens side by side (View → Sampling lab); "
            "click again for the chat layout. Each layout stays as you leave it."
        )
        self.lab_toggle.clicked.connect(
            lambda on: self.workspace_requested.emit(Workspace.SAMPLING if on else Workspace.CHAT)
        )
        self.row.addWidget(self.lab_toggle)
        self.set_model_text(NO_MODEL_TEXT)

    def set_workspace(self, workspace: Workspace) -> None:
        """Check the lab toggle when the lab is shown (it asks for nothing)."""
        self.lab_toggle.setChecked(workspace is Workspace.SAMPLING)

    def set_model_text(self, text: str, tooltip: str | None = None) -> None:
        """The model picker's label, elided so a long file name never widens the window."""
        self._model_text = text
        self._elide_model_text()
        self.model_button.setToolTip(text if tooltip is None else tooltip)
        self.model_button.setAccessibleName(f"Model: {text.rstrip(' ▾')}")

    @property
    def model_text(self) -> str:
        """The model picker's whole label (the button may show it elided)."""
        return self._model_text

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._elide_model_text()

    def _elide_model_text(self) -> None:
        """Elide the picker's label to the room the bar has (at most MODEL_BUTTON_MAX_PX); the lab
        toggle says "Lab", or hides, when its whole label would leave the picker less than its least width."""
        m = self.row.contentsMargins()
        fixed = (
            m.left()
            + m.right()
            + sum(b.sizeHint().width() for b in self.nav.values())
            + self.state_label.sizeHint().width()
            + 8
            + 4 * max(0, self.row.spacing())
            + _BUTTON_CHROME_PX
        )
        toggle = self.lab_toggle
        fm_t = toggle.fontMetrics()
        chrome = toggle.sizeHint().width() - fm_t.horizontalAdvance(toggle.text())
        free = self.width() - fixed - MODEL_BUTTON_MIN_PX - max(0, self.row.spacing())
        label = next((t for t in (LAB_TEXT, LAB_SHORT_TEXT) if chrome + fm_t.horizontalAdvance(t) <= free), None)
        if label is not None:
            toggle.setText(label)
            fixed += toggle.sizeHint().width() + max(0, self.row.spacing())
        toggle.setVisible(label is not None)
        room = max(MODEL_BUTTON_MIN_PX - _BUTTON_CHROME_PX, min(MODEL_BUTTON_MAX_PX, self.width() - fixed))
        fm = self.model_button.fontMetrics()
        self.model_button.setText(fm.elidedText(self._model_text, Qt.TextElideMode.ElideMiddle, room))

    def show_state(
        self, state: EngineState, api_answering: int = 0, api_waiting: int = 0, own: tuple[str, int] | None = None
    ) -> None:
        """``● ready``, ``● loading…``... coloured by the stylesheet's ``state`` property.

        ``api_answering``: local API requests in the engine; ``api_waiting``: those queued for it (see
        app/ui/server). While the person's own chat is idle, the engine is busy with them and the label
        says so, the ones answered apart from the ones waiting ("answering 4 API requests, 1 waiting");
        ``own``: the app's own runs among them and their name (:func:`api_text`).
        """
        api_requests = api_answering + api_waiting
        shown = EngineState.GENERATING if state is EngineState.READY and api_requests else state
        self.state_label.setProperty("state", shown.value)
        self.state_label.style().unpolish(self.state_label)
        self.state_label.style().polish(self.state_label)
        text = _STATE_TEXT[state]
        if shown is not state:
            text = api_text(api_answering, api_waiting, own)
        self.state_label.set_full_text(f"● {text}")
        self._elide_model_text()  # the picker gets what the state leaves

    def follow_engine(self, engine: EngineClient) -> None:
        """Show ``engine``'s state from now on, and the local API's requests it is answering."""

        def show(*_args: object) -> None:
            api = engine.api
            mine = self._own[1]() if self._own is not None else frozenset()
            runs = sum(1 for t in (*api.in_flight_tickets, *api.waiting) if t in mine)
            own = (self._own[0], runs) if self._own is not None else None
            self.show_state(engine.state, len(api.in_flight_tickets), len(api.waiting), own)

        engine.state_changed.connect(show)
        engine.api.queue_changed.connect(show)
        self._show_engine = show

    def name_own_requests(self, words: str, tickets: Callable[[], Collection[int]], changed: SignalInstance) -> None:
        """The API tickets ``tickets()`` are the app's own runs (Measure speed-up's), said as ``words``
        rather than as a person's API requests (the review of issue 22 read "answering an API request, 3
        waiting" while measuring); ``changed``: a signal emitted when ``tickets()`` may have changed."""
        self._own = (words, tickets)
        changed.connect(lambda *_a: self._show_engine())

    def show_model(self, change: ModelChange) -> None:
        """The model picker's label for a step of the model's life: loading, the model loaded
        (name, n_ctx, quant and size in its tooltip), none, or the engine stopped."""
        req, ev = change.request, change.loaded
        if change.phase is ModelPhase.LOADING and req is not None:
            busy = f"Connecting to {req.remote.base_url} …" if req.remote else f"Loading {display_name(req.shown)} …"
            self.set_model_text(busy)
        elif change.phase is ModelPhase.LOADED and ev is not None:
            info = ev.info
            if ev.remote is not None:
                n_ctx = f"n_ctx {ev.n_ctx:,}" if ev.n_ctx else "n_ctx not reported by this server"
                self.set_model_text(
                    f"{display_name(info.path)} (remote)  ▾",
                    f"{ev.remote.engine_label}\nmodel {ev.remote.model} · {n_ctx}",
                )
            else:
                self.set_model_text(
                    f"{display_name(info.path)}  ▾",
                    f"{info.path}\nn_ctx {ev.n_ctx:,} · {info.quant_type} · {format_bytes(info.file_size)}",
                )
        elif change.phase is ModelPhase.ENGINE_STOPPED:
            self.set_model_text(ENGINE_STOPPED_TEXT)
        elif change.phase in (ModelPhase.FAILED, ModelPhase.UNLOADED):
            self.set_model_text(NO_MODEL_TEXT)

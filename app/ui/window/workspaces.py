"""The window's workspaces: the chat-first layout and the sampling lab, each restored as the person left it.

A workspace is one arrangement of the docks of the window's
:class:`~app.ui.window.docks.DockRegistry` (which owns them). :class:`Workspaces` owns which one is
shown; switching records the one left (``QMainWindow.saveState``, in the settings: ``window_state``
and ``sampling_state``) and restores the other's, or lays it out as at first when it was never left
(the chat layout as the window builds it; the lab by :func:`lay_out_lab`). The window records the
shown one's state again when it closes, so both survive a restart.

The lab puts the Sampler (left), the Funnel (right) and the Tokens strip (below the chat) on screen
at once, none a tab behind another, sized by :func:`lab_sizes` from the window's size; in the lab a
window made larger or smaller scales the docks with it (:meth:`Workspaces.window_resized`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QByteArray, QObject, QSize, Qt, Signal
from PySide6.QtWidgets import QMainWindow

from app.core.settings import Workspace
from app.ui.window.docks import DockRegistry
from app.ui.window.settings_controller import SettingsController
from app.ui.window.window_layout import widen_docks

LEFT, RIGHT, BOTTOM = (
    Qt.DockWidgetArea.LeftDockWidgetArea,
    Qt.DockWidgetArea.RightDockWidgetArea,
    Qt.DockWidgetArea.BottomDockWidgetArea,
)
# The lab's docks (by object name) and where each goes; the other docks are closed there at first
# (the View menu opens them, and the lab remembers it).
LAB_DOCKS = (("samplerDock", LEFT), ("funnelDock", RIGHT), ("tokensDock", BOTTOM))
# The lab's sizes as a share of the window, within a least and a most (pixels): at 1366x768 the
# Funnel's eight columns and the Sampler's sliders are readable, at 1920x1080 they grow with it.
# The Sampler: 396 px at 1366 (its temperature track 135 px, was 89 at a 0.25 share: a 48 px drag moved
# it 0 -> 5), 480 at 1920 as before; 350 at least: its sliders without a sideways scroll.
SAMPLER_SHARE, SAMPLER_WIDTH = 0.29, (350, 480)
FUNNEL_SHARE, FUNNEL_WIDTH = 0.34, (470, 760)  # 470: its panel's least width (454 px) and the dock's frame
TOKENS_SHARE, TOKENS_HEIGHT = 0.33, (180, 440)
# Each lab dock's least size (width; the Tokens strip's height), kept through window resizes.
LAB_LEAST = {"samplerDock": SAMPLER_WIDTH[0], "funnelDock": FUNNEL_WIDTH[0], "tokensDock": TOKENS_HEIGHT[0]}


@dataclass(frozen=True)
class LabSizes:
    """The lab's dock sizes for one window size, pixels.

    Attributes:
        sampler_width: the Sampler's width (left).
        funnel_width: the Funnel's width (right).
        tokens_height: the Tokens strip's height (below the chat).
    """

    sampler_width: int
    funnel_width: int
    tokens_height: int


def _clamp(v: float, bounds: tuple[int, int]) -> int:
    return int(max(bounds[0], min(bounds[1], v)))


def lab_sizes(width: int, height: int) -> LabSizes:
    """The lab's dock sizes for a window ``width`` x ``height`` pixels: a share of it each
    (:data:`SAMPLER_SHARE`, :data:`FUNNEL_SHARE`, :data:`TOKENS_SHARE`), within its least and most."""
    return LabSizes(
        _clamp(width * SAMPLER_SHARE, SAMPLER_WIDTH),
        _clamp(width * FUNNEL_SHARE, FUNNEL_WIDTH),
        _clamp(height * TOKENS_SHARE, TOKENS_HEIGHT),
    )


def lay_out_lab(main: QMainWindow, docks: DockRegistry) -> None:
    """The lab as at first: the Sampler left, the Funnel right, the Tokens strip below the chat, each
    docked on its own (out of any tab group) and shown; the other docks closed; sized by :func:`lab_sizes`."""
    placed = dict(LAB_DOCKS)
    for dock in docks:
        if dock.objectName() not in placed:
            dock.hide()
    for name, area in LAB_DOCKS:
        dock = docks.named(name)
        dock.setFloating(False)
        main.addDockWidget(area, dock)  # out of its tab group, if it was in one
        dock.show()
    size = lab_sizes(main.width(), main.height())
    sampler, funnel, tokens = (docks.named(name) for name, _area in LAB_DOCKS)
    main.resizeDocks([sampler, funnel], [size.sampler_width, size.funnel_width], Qt.Orientation.Horizontal)
    main.resizeDocks([tokens], [size.tokens_height], Qt.Orientation.Vertical)


def encode_state(size: QSize, state: QByteArray) -> str:
    """A workspace's dock state as the settings keep it: ``"<w>x<h>:<base64>"``, the window's size
    (pixels) when it was saved, then ``QMainWindow.saveState``'s bytes."""
    return f"{size.width()}x{size.height()}:" + bytes(state.toBase64().data()).decode("ascii")


def decode_state(text: str) -> tuple[QSize | None, QByteArray]:
    """The window's size and the state bytes of :func:`encode_state`'s text; a state saved before
    sizes were kept (plain base64) has no size (None)."""
    head, sep, data = text.partition(":")
    if not sep:
        return None, QByteArray.fromBase64(text.encode("ascii"))
    w, _x, h = head.partition("x")
    size = QSize(int(w), int(h)) if w.isdigit() and h.isdigit() else None
    return size, QByteArray.fromBase64(data.encode("ascii"))


class Workspaces(QObject):
    """Which workspace the window shows (the one owner of that), and the switch between them.

    Args:
        main: the window whose docks are arranged.
        docks: its docks.
        settings: the settings' owner, where each workspace's dock state and the one shown are kept.

    Signals:
        switched(object): the :class:`~app.core.settings.Workspace` now shown.
    """

    switched = Signal(object)  # Workspace

    def __init__(self, main: QMainWindow, docks: DockRegistry, settings: SettingsController) -> None:
        super().__init__(main)
        self._main = main
        self._docks = docks
        self._settings = settings
        self._current = Workspace.CHAT
        self._as_built = main.saveState()  # the chat layout as the window laid it out (none saved yet)
        # The window size the lab's docks were last sized for: a state saved between a resize and its
        # (deferred) rescale records the docks of the old size, so it is saved with that size.
        self._laid_for = main.size()

    @property
    def current(self) -> Workspace:
        """The workspace shown."""
        return self._current

    def restore(self) -> None:
        """At start, after the window laid out its docks: the workspace the settings say was shown,
        as it was left (a lab never left is laid out as at first)."""
        self._show(Workspace(self._settings.settings.workspace))

    def show(self, workspace: Workspace) -> None:
        """Show ``workspace`` (nothing happens when it is shown): the one left is recorded as it is."""
        if workspace is self._current:
            return
        self.save()
        self._show(workspace)

    def save(self) -> None:
        """Record the shown workspace's dock state (and that it is the one shown) in the settings."""
        size = self._laid_for if self._current is Workspace.SAMPLING else self._main.size()
        state = encode_state(size, self._main.saveState())
        current = self._current
        self._settings.apply(lambda s: replace(s.with_dock_state(current, state), workspace=current))

    def _show(self, workspace: Workspace) -> None:
        saved_size, state = decode_state(self._settings.settings.dock_state(workspace))
        restored = not state.isEmpty() and self._main.restoreState(state)
        if not restored:
            if workspace is Workspace.SAMPLING:
                lay_out_lab(self._main, self._docks)
            else:
                self._main.restoreState(self._as_built)
        self._current = workspace
        self._laid_for = self._main.size()
        if restored and saved_size is not None and saved_size != self._main.size():
            # Left in a window of another size: its docks keep their share of this one.
            self._laid_for = saved_size
            self.window_resized(saved_size, self._main.size())
        if workspace is Workspace.CHAT:
            widen_docks(self._main, self._docks)
        self._settings.update(workspace=workspace)
        self.switched.emit(workspace)

    def window_resized(self, old: QSize, new: QSize) -> None:
        """In the lab, the window went from ``old`` to ``new``: each docked, visible dock keeps its share
        of the window (a side dock of its width, a bottom or top one of its height), as the person left
        it; Qt alone gives all the change to the chat. The chat layout keeps its own rule
        (:func:`app.ui.window.window_layout.widen_docks`)."""
        if self._current is not Workspace.SAMPLING or old.width() <= 0 or old.height() <= 0:
            return
        main = self._main
        if old != self._laid_for and self._laid_for.width() > 0 and self._laid_for.height() > 0:
            old = self._laid_for  # resizes in a row before one was handled: scale from the size laid out
        self._laid_for = new
        wide, tall = [], []
        for dock in self._docks:
            if dock.isFloating() or not dock.isVisible():
                continue
            area = main.dockWidgetArea(dock)
            # Never below the lab's least for its own docks: Qt has already shrunk them for a smaller
            # window, so scaling alone ratcheted them down at each resize (a Funnel of 354 px at 1366).
            least = LAB_LEAST.get(dock.objectName(), 0)
            if area in (LEFT, RIGHT):
                wide.append((dock, max(least, round(dock.width() * new.width() / old.width()))))
            elif area in (BOTTOM, Qt.DockWidgetArea.TopDockWidgetArea):
                tall.append((dock, max(least, round(dock.height() * new.height() / old.height()))))
        if wide:
            main.resizeDocks([d for d, _ in wide], [w for _, w in wide], Qt.Orientation.Horizontal)
        if tall:
            main.resizeDocks([d for d, _ in tall], [h for _, h in tall], Qt.Orientation.Vertical)

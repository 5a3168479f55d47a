"""The one owner of the settings while the window runs.

Everything that reads settings reads :attr:`SettingsController.settings`;
everything that changes them calls :meth:`SettingsController.update` (or
:meth:`~SettingsController.apply`), which emits :attr:`~SettingsController.changed`
and saves after a short pause, so a slider dragged across fifty values writes
the file once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.settings import Settings, SettingsStore

log = logging.getLogger(__name__)

SAVE_DELAY_MS = 500


class SettingsController(QObject):
    """Holds the current :class:`~app.core.settings.Settings` and persists them.

    Args:
        store: where the settings are saved.
        settings: the settings loaded at start.
        parent: the owning QObject.

    Signals:
        changed(object): the new :class:`Settings`, after every change.
        save_failed(str): saving failed; the text names the file and the reason.
    """

    changed = Signal(object)  # Settings
    save_failed = Signal(str)

    def __init__(self, store: SettingsStore, settings: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._settings = settings
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SAVE_DELAY_MS)
        self._timer.timeout.connect(self.save_now)

    @property
    def settings(self) -> Settings:
        """The current settings (immutable: change them through :meth:`update`)."""
        return self._settings

    @property
    def store(self) -> SettingsStore:
        """The settings file (its ``notice`` says whether a damaged one was set aside)."""
        return self._store

    def update(self, **changes: Any) -> None:
        """Replace the named fields (``update(system_prompt="…")``), announce and schedule a save.

        Raises:
            TypeError: a name that is not a field of :class:`Settings`.
        """
        self.apply(lambda s: replace(s, **changes))

    def apply(self, change: Callable[[Settings], Settings]) -> None:
        """Replace the settings with ``change(settings)``; nothing happens when they are equal."""
        new = change(self._settings)
        if new == self._settings:
            return
        self._settings = new
        self.changed.emit(new)
        self._timer.start()

    def save_now(self) -> None:
        """Write the settings now (atomically); a failure is logged and announced by :attr:`save_failed`."""
        self._timer.stop()
        try:
            self._store.save(self._settings)
        except OSError as exc:
            log.error("settings not saved: %s", exc)
            self.save_failed.emit(f"Settings could not be saved: {exc}")

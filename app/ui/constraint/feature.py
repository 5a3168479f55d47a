"""The chat's output format in the window: the chip under the composer follows the chat shown's format
(:class:`~app.ui.chat.chat_settings.ChatSettingsController`, its one owner), and opens the dialog; what
the dialog keeps becomes the chat's (stored with it; a new chat's kept until it is stored). Every reply
of the chat carries it (:mod:`app.ui.chat.streaming`)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDialog, QWidget

from app.core.chat.chat_settings import ChatSettings
from app.ui.chat.chat_settings import ChatSettingsController
from app.ui.chat.composer import Composer
from app.ui.constraint.chip import FormatChip
from app.ui.constraint.dialog import OutputFormatDialog
from app.ui.engine.client import EngineClient


class OutputFormat(QObject):
    """The chip and the dialog (see the module docstring).

    Args:
        engine: checks a format (the dialog's Check and OK).
        chat_settings: the owner of the chat shown's format.
        composer: the chip goes on the line under its box.
        window: the dialog's parent.

    Attributes:
        chip: the chip under the composer.
        dialog: the open dialog, or None.
    """

    def __init__(
        self,
        engine: EngineClient,
        chat_settings: ChatSettingsController,
        composer: Composer,
        window: QWidget,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._engine = engine
        self._chat_settings = chat_settings
        self._window = window
        self.dialog: OutputFormatDialog | None = None
        self.chip = FormatChip()
        composer.add_to_footer(self.chip)
        self.chip.clicked.connect(self.open_dialog)
        chat_settings.changed.connect(self._show)
        self._show(chat_settings.current)

    def _show(self, cs: ChatSettings) -> None:
        self.chip.show_constraint(cs.constraint)

    def open_dialog(self) -> OutputFormatDialog:
        """Open the dialog on the chat shown's format (window-modal; OK keeps what it checked)."""
        if self.dialog is not None:
            self.dialog.raise_()
            return self.dialog
        dlg = OutputFormatDialog(self._engine, self._chat_settings.current.constraint, self._window)
        dlg.setWindowModality(Qt.WindowModality.WindowModal)
        dlg.finished.connect(lambda result: self._closed(dlg, result))
        self.dialog = dlg
        dlg.open()
        return dlg

    def _closed(self, dlg: OutputFormatDialog, result: int) -> None:
        self.dialog = None
        if result == QDialog.DialogCode.Accepted:
            self._chat_settings.edit_constraint(dlg.chosen)
        dlg.deleteLater()

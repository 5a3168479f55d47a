"""The window's file dialogs (open a model, export and import a chat): each kind opens in the
folder it was last used in, remembered in the settings."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QWidget

from app.core.conversations import ConversationStore
from app.core.settings import DialogFolder
from app.ui.chat import export as conversation_export
from app.ui.chat.export import ExportFormat, Outcome
from app.ui.common import dialogs
from app.ui.window.settings_controller import SettingsController


class FileDialogs:
    """Asks the person for files.

    Args:
        parent: the dialogs' parent window.
        settings: where the last folder of each kind is kept.
        conversations: the chats exported and imported.
        models_dir: where the first Open model dialog opens.
    """

    def __init__(
        self, parent: QWidget, settings: SettingsController, conversations: ConversationStore, models_dir: Path
    ) -> None:
        self._parent = parent
        self._settings = settings
        self._conversations = conversations
        self._models_dir = models_dir

    def folder(self, kind: DialogFolder, default: Path) -> Path:
        """Where a file dialog of ``kind`` opens: the folder it was last used in, if it still exists."""
        last = self._settings.settings.last_folder(kind)
        return Path(last) if last and Path(last).is_dir() else default

    def _remember(self, kind: DialogFolder, chosen_file: str) -> None:
        if chosen_file:
            self._settings.apply(lambda s: s.with_last_folder(kind, Path(chosen_file).parent))

    def choose_model(self) -> str | None:
        """A GGUF file to open (None: cancelled)."""
        path = dialogs.choose_gguf_file(self._parent, self.folder(DialogFolder.OPEN_MODEL, self._models_dir))
        self._remember(DialogFolder.OPEN_MODEL, path)
        return path or None

    def export_conversation(self, conv_id: int, fmt: ExportFormat) -> Outcome | None:
        """Ask where to write chat ``conv_id`` as ``fmt`` and write it (None: cancelled)."""
        start = self.folder(DialogFolder.EXPORT, Path.home())
        outcome = conversation_export.export_conversation(self._parent, self._conversations, conv_id, fmt, start)
        if outcome is not None:
            self._remember(DialogFolder.EXPORT, outcome.path)
        return outcome

    def import_conversation(self) -> Outcome | None:
        """Ask for chat exports, preview and import them (None: cancelled)."""
        start = self.folder(DialogFolder.IMPORT, Path.home())
        outcome = conversation_export.import_conversation(self._parent, self._conversations, start)
        if outcome is not None:
            self._remember(DialogFolder.IMPORT, outcome.path)
        return outcome

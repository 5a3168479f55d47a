"""Everything that asks the person or leaves the app (message boxes, file dialogs, opening
URLs), in one module so tests can replace each function with ``monkeypatch.setattr``."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication, QHideEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)


def confirm(parent: QWidget | None, title: str, text: str, details: str = "", *, destructive: bool = True) -> bool:
    """Ask a yes/no question; True when the person agrees (default button: No)."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning if destructive else QMessageBox.Icon.Question)
    box.setWindowTitle(title)
    box.setText(text)
    if details:
        box.setInformativeText(details)
    box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
    box.setDefaultButton(QMessageBox.StandardButton.No)
    yes = box.button(QMessageBox.StandardButton.Yes)
    yes.setText("Delete" if destructive else "Yes")
    return box.exec() == QMessageBox.StandardButton.Yes


def choose_gguf_files(parent: QWidget | None, start: Path) -> list[str]:
    """GGUF files the person picks (empty when cancelled)."""
    paths, _ = QFileDialog.getOpenFileNames(
        parent, "Import GGUF models", str(start), "GGUF models (*.gguf);;All files (*)"
    )
    return paths


def choose_folder(parent: QWidget | None, start: Path) -> str:
    """A folder the person picks ("" when cancelled)."""
    return QFileDialog.getExistingDirectory(parent, "Add a models folder", str(start))


def open_url(url: QUrl | str) -> bool:
    """Open a web page or a local folder with the desktop's handler."""
    return QDesktopServices.openUrl(QUrl(url) if isinstance(url, str) else url)


def open_folder(path: Path) -> bool:
    """Show a folder in the file manager."""
    return open_url(QUrl.fromLocalFile(str(path)))


def choose_gguf_file(parent: QWidget | None, start: Path) -> str:
    """One GGUF file to open ("" when cancelled)."""
    path, _ = QFileDialog.getOpenFileName(
        parent, "Open a GGUF model", str(start), "GGUF models (*.gguf);;All files (*)"
    )
    return path


def choose_save_path(parent: QWidget | None, title: str, start: Path, file_filter: str) -> str:
    """Where to write a file ("" when cancelled)."""
    path, _ = QFileDialog.getSaveFileName(parent, title, str(start), file_filter)
    return path


def choose_open_path(parent: QWidget | None, title: str, start: Path, file_filter: str) -> str:
    """A file to read ("" when cancelled)."""
    path, _ = QFileDialog.getOpenFileName(parent, title, str(start), file_filter)
    return path


def choose_open_paths(parent: QWidget | None, title: str, start: Path, file_filter: str) -> list[str]:
    """Files to read, one or more (empty when cancelled)."""
    paths, _ = QFileDialog.getOpenFileNames(parent, title, str(start), file_filter)
    return paths


def ask(dialog: QDialog) -> bool:
    """Show a modal ``dialog`` and wait; True when the person accepted it."""
    return dialog.exec() == QDialog.DialogCode.Accepted


class TextDialog(QDialog):
    """A small window with selectable, read-only text and Copy / Close buttons (not modal).

    Attributes:
        text_box: the read-only text (select with the mouse or the keyboard).
        copy_button: copies the whole text to the clipboard.
    """

    def __init__(self, parent: QWidget | None, title: str, text: str) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setObjectName("textDialog")
        lay = QVBoxLayout(self)
        self.text_box = QPlainTextEdit(text)
        self.text_box.setReadOnly(True)
        self.text_box.setAccessibleName(title)
        lay.addWidget(self.text_box)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self._copy)
        buttons.rejected.connect(self.close)
        lay.addWidget(buttons)
        self.resize(560, 360)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text_box.toPlainText())
        self.copy_button.setText("Copied")

    def hideEvent(self, e: QHideEvent) -> None:
        """Closed (Esc, Close): the window it belongs to is active again, so its shortcuts
        work at once and typing does not go astray (without a window manager, or with one
        that does not hand the focus back, nothing else does it)."""
        super().hideEvent(e)
        parent = self.parentWidget()
        if parent is not None:
            parent.window().activateWindow()


def show_text(parent: QWidget | None, title: str, text: str) -> TextDialog:
    """Show ``text`` in a :class:`TextDialog` (returns at once; the dialog deletes itself on close)."""
    dlg = TextDialog(parent, title, text)
    dlg.show()
    dlg.activateWindow()
    return dlg

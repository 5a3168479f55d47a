"""The Library tab's first-run page: what Glassbox looks for, open/import/add-folder buttons,
folders of other apps found on this computer, and small starter models to download."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.models.other_apps import other_app
from app.ui.common import palette
from app.ui.models.starter_list import StarterList


class EmptyLibraryPage(QWidget):
    """Shown instead of the table while the library has no model.

    Signals:
        open_file_requested(): "Open a GGUF file…" was clicked.
        import_requested(): "Import into the library…" was clicked.
        add_folder_requested(): "Add a folder…" was clicked.
        folder_chosen(Path): a suggested folder's link was clicked; the folder.

    The starter models' list is :attr:`starters` (its own ``download_requested`` signal).
    """

    open_file_requested = Signal()
    import_requested = Signal()
    add_folder_requested = Signal()
    folder_chosen = Signal(Path)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("emptyPage")
        outer = QHBoxLayout(self)
        outer.addStretch(1)
        col = QVBoxLayout()
        col.setSpacing(10)
        col.addStretch(1)
        title = QLabel("No models yet")
        title.setObjectName("emptyTitle")
        col.addWidget(title)
        text = QLabel(
            "Glassbox looks for GGUF files in its models folder, in the Hugging Face cache and in "
            "folders you add. Open a GGUF file you already have, or download a small model to start:"
        )
        text.setObjectName("emptyText")
        text.setWordWrap(True)
        col.addWidget(text)
        actions = QHBoxLayout()
        self.open_file_button = QPushButton("Open a GGUF file…")
        self.open_file_button.setObjectName("primaryButton")
        self.open_file_button.clicked.connect(self.open_file_requested)
        actions.addWidget(self.open_file_button)
        imp = QPushButton("Import into the library…")
        imp.clicked.connect(self.import_requested)
        actions.addWidget(imp)
        add = QPushButton("Add a folder…")
        add.clicked.connect(self.add_folder_requested)
        actions.addWidget(add)
        actions.addStretch(1)
        col.addLayout(actions)
        self.suggest_label = QLabel("")
        self.suggest_label.setObjectName("emptyText")
        self.suggest_label.setWordWrap(True)
        self.suggest_label.setTextFormat(Qt.TextFormat.RichText)
        self.suggest_label.linkActivated.connect(lambda p: self.folder_chosen.emit(Path(p)))
        self.suggest_label.hide()
        col.addWidget(self.suggest_label)
        head = QLabel("Small models to start with")
        head.setObjectName("sectionTitle")
        col.addWidget(head)
        self.starters = StarterList()
        col.addWidget(self.starters)
        note = QLabel("Sizes are approximate; downloads come from the Hugging Face Hub and resume if interrupted.")
        note.setObjectName("detailLabel")
        note.setWordWrap(True)
        col.addWidget(note)
        col.addStretch(2)
        box = QWidget()
        box.setLayout(col)
        box.setMaximumWidth(760)
        box.setMinimumWidth(420)
        # The column takes the width up to its maximum; only what is left over goes to the margins.
        outer.addWidget(box, 100)
        outer.addStretch(1)

    def suggest_folders(self, found: list[Path]) -> None:
        """Offer to add ``found`` (folders of other apps with models); an empty list hides the offer."""
        if found:
            links = ", ".join(
                f'<a href="{html.escape(str(f))}" style="color:{palette.LINK}">add {html.escape(folder_label(f), quote=False)}</a>'
                for f in found
            )
            self.suggest_label.setText(f"Models of other apps were found on this computer: {links}")
            self.suggest_label.show()
        else:
            self.suggest_label.hide()


def folder_label(folder: Path) -> str:
    """``GPT4All's models (~/.local/share/nomic.ai/GPT4All)``, or the folder alone."""
    app = other_app(folder)
    return f"{app}'s models ({folder})" if app else str(folder)

"""The Compare window's model pickers: a combo of GGUF files (the loaded one first, then the library) and a
Browse… button, its current file name elided in the middle so the quantization at its end stays in view.

Two files of one model differ only at the end of their names (``SmolLM2-135M-Instruct.Q4_1.gguf``,
``SmolLM2-135M-Instruct.Q8_0.gguf``): a combo elided at its right end would show the same text for both.
:class:`MiddleElidedCombo` keeps the size after the name whole and cuts the name in its middle
(``SmolLM2-1…struct.Q4_1.gguf · 91 MiB``); the list that drops down shows whole names.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPaintEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QPushButton,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QWidget,
)

from app.core.models.library import ModelEntry
from app.ui.common import dialogs
from app.ui.common.fmt import format_bytes

#: Item data: the file's name as shown (``● `` first for the loaded model) and what follows it (`` · size``).
NAME_ROLE = Qt.ItemDataRole.UserRole + 1
SUFFIX_ROLE = Qt.ItemDataRole.UserRole + 2


class MiddleElidedCombo(QComboBox):
    """A combo whose current item's name is elided in its middle, its suffix (the size) kept whole."""

    def shown_text(self, width: int) -> str:
        """The current item's text as it fits ``width`` pixels (the name cut in its middle first)."""
        i = self.currentIndex()
        if i < 0:
            return self.currentText()
        name = str(self.itemData(i, NAME_ROLE) or self.itemText(i))
        suffix = str(self.itemData(i, SUFFIX_ROLE) or "")
        fm = self.fontMetrics()
        if fm.horizontalAdvance(name + suffix) <= width:
            return name + suffix
        room = width - fm.horizontalAdvance(suffix)
        if room < fm.horizontalAdvance("M…M.gguf"):  # too narrow for the size too: the name alone
            return fm.elidedText(name, Qt.TextElideMode.ElideMiddle, width)
        return fm.elidedText(name, Qt.TextElideMode.ElideMiddle, room) + suffix

    def paintEvent(self, e: QPaintEvent) -> None:
        """Qt's combo, its label replaced by :meth:`shown_text` of the edit field's width."""
        painter = QStylePainter(self)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, opt)
        field = self.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, opt, QStyle.SubControl.SC_ComboBoxEditField, self
        )
        if self.currentIndex() >= 0:
            opt.currentText = self.shown_text(field.width() - 4)
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, opt)


class ModelPicker(QWidget):
    """A combo of GGUF files (the loaded one first, then the library) and a Browse… button for any other.

    Signals:
        changed(): the file chosen changed (or the list was refilled).
    """

    changed = Signal()

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.combo = MiddleElidedCombo()
        self.combo.setObjectName(f"compareModel{name}")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(14)
        self.combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.combo.view().setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.combo.setPlaceholderText(f"Choose model {name}: another file of the same model")
        self.combo.currentIndexChanged.connect(self._on_index)
        self.browse = QPushButton("Browse…")
        self.browse.setToolTip(f"Pick model {name} from any GGUF file on this computer.")
        self.browse.clicked.connect(self._browse)
        row.addWidget(self.combo, 1)
        row.addWidget(self.browse)

    def fill(self, loaded: str | None, entries: Sequence[ModelEntry]) -> None:
        """List ``loaded`` (marked) then the library's loadable entries; keep the current choice (none chosen
        when there was none: :meth:`set_path` chooses)."""
        keep = self.path
        self.combo.blockSignals(True)
        self.combo.clear()
        seen: set[str] = set()
        if loaded:
            self._add(loaded, f"● {Path(loaded).name}", "", f"{loaded}\n● the model loaded in the chat")
            seen.add(str(Path(loaded)))
        for e in entries:
            if e.ok and str(e.path) not in seen:
                seen.add(str(e.path))
                tip = f"{e.path}\n{e.name} · {e.quant} · {format_bytes(e.size)} · {e.source_label}"
                self._add(str(e.path), e.file_name, f"  ·  {format_bytes(e.size)}", tip)
        self.combo.setCurrentIndex(-1)
        self.combo.blockSignals(False)
        if keep:
            self.set_path(keep)
        self._on_index()

    def _add(self, path: str, name: str, suffix: str, tip: str) -> None:
        self.combo.addItem(name + suffix, path)
        i = self.combo.count() - 1
        self.combo.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        self.combo.setItemData(i, name, NAME_ROLE)
        self.combo.setItemData(i, suffix, SUFFIX_ROLE)

    @property
    def path(self) -> str | None:
        """The file chosen, or None."""
        data = self.combo.currentData()
        return str(data) if data else None

    def set_path(self, path: str | None) -> None:
        """Choose ``path`` (added to the list when it is not in it); None: no file chosen."""
        if path is None:
            self.combo.setCurrentIndex(-1)
            return
        i = self.combo.findData(str(path))
        if i < 0:
            self._add(str(path), Path(path).name, "", str(path))
            i = self.combo.count() - 1
        self.combo.setCurrentIndex(i)

    def _on_index(self, _i: int = -1) -> None:
        self.combo.setToolTip(str(self.combo.currentData(Qt.ItemDataRole.ToolTipRole) or ""))
        self.changed.emit()

    def _browse(self) -> None:
        start = Path(self.path).parent if self.path else Path.home()
        chosen = dialogs.choose_gguf_file(self, start)
        if chosen:
            self.set_path(chosen)

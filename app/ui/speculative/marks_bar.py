"""The toggle above a speculated reply's tokens: "Mark drafted tokens", and what the marks mean.

Shown by the reply's token view (:meth:`app.ui.chat.message.MessageWidget.show_tokens`) when the reply
was speculated; on, the tokens that came from an accepted draft are underlined and a ▾ leads each token
where a draft was rejected (its hover names the drafted text the model replaced).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QCheckBox, QLabel, QVBoxLayout, QWidget

from app.ui.speculative.figures import DraftMarks


class DraftsBar(QWidget):
    """The toggle and its legend; ``toggled(on)`` is called with the toggle's state."""

    def __init__(
        self, marks: DraftMarks, n_steps: int, toggled: Callable[[bool], object], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("draftsBar")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        self.check = QCheckBox("Mark drafted tokens")
        self.check.setObjectName("markDraftsToggle")
        self.check.setToolTip(
            "Underline the tokens that came from an accepted draft; ▾ marks where a draft was rejected "
            "(hover it for the drafted text the model replaced)."
        )
        self.check.setChecked(True)
        self.legend = QLabel(marks.legend(n_steps))
        self.legend.setObjectName("detailLabel")
        self.legend.setWordWrap(True)
        lay.addWidget(self.check)
        lay.addWidget(self.legend)
        self.check.toggled.connect(toggled)
        self.check.toggled.connect(self.legend.setVisible)

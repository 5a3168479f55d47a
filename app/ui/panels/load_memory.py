"""The Model panel's line on where the load settings shown come from: remembered for this file, or
Glassbox's defaults, with "Reset to defaults"; which edits are not applied yet (remembered only once
applied, dropped when another model loads first); and the file's chat template override, with its own
button.

What is remembered lives in the settings (:meth:`app.core.settings.Settings.load_for`, the per-file
``model_load`` and ``chat_templates``); this box only shows it and asks. Reset forgets the file's
load settings only: a chat template override is hand-written Jinja, costlier to make again than a few
numbers, so it is cleared by its own button ("Use the GGUF's template"), never by Reset.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.chat.context import LoadSettings


def memory_text(
    path: str | None,
    remembered: LoadSettings | None,
    unapplied: Sequence[str] = (),
    *,
    to_defaults: bool = False,
) -> str:
    """Where the load settings shown come from (``path``: the model's file or a server's model id, None:
    no model yet; ``remembered``: its remembered load settings or None), and the edits not applied yet
    (``unapplied``, in the field's terms: :meth:`~app.ui.panels.model.ModelPanel.unapplied`;
    ``to_defaults``: the fields show Glassbox's defaults, as after Reset, so Apply forgets what is remembered)."""
    if path is None:
        return (
            "No model yet: a model opened loads with the settings remembered for its file, else Glassbox's defaults "
            f"({', '.join(LoadSettings().terms()[:2])}…). Open one to change them."
        )
    if remembered is None:
        where = "Glassbox's defaults: nothing remembered for this file yet; Apply remembers what you set."
    else:
        changed = remembered.differences(LoadSettings())
        where = f"Remembered for this file: {', '.join(changed)}; the rest as Glassbox's defaults."
    if not unapplied:
        return where
    if to_defaults and remembered is not None:
        return (
            f"{where} Not applied yet: Glassbox's defaults ({', '.join(unapplied)}). Apply reloads with them and "
            "forgets this file's settings; until then they stay remembered, and another model loading first "
            "drops this reset."
        )
    return (
        f"{where} Not applied yet: {', '.join(unapplied)} (Apply reloads and remembers; dropped if another model "
        "loads first)."
    )


class LoadMemoryBox(QWidget):
    """Says whether the load settings shown are remembered for the file or Glassbox's defaults.

    Signals:
        reset_requested(): put Glassbox's defaults in the fields (Apply reloads with them and forgets the file's
            load settings).
        template_reset_requested(): forget this file's chat template override (the GGUF's is used).
    """

    reset_requested = Signal()
    template_reset_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("loadMemory")
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # holds the focus of a button it hides (:meth:`_show`)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        # One column: a dock at 1366x768 is about 210 px wide, too narrow for text beside a button.
        self.text = QLabel("")
        self.text.setObjectName("loadMemoryText")
        self.text.setWordWrap(True)
        lay.addWidget(self.text)
        self.reset_btn = QPushButton("Reset to defaults")
        self.reset_btn.setObjectName("resetLoadButton")
        self.reset_btn.setToolTip(
            f"Put Glassbox's defaults ({', '.join(LoadSettings().terms()[:7])}) in the fields. Nothing is "
            "forgotten yet: Apply reloads with them and forgets this file's settings. "
            "A chat template override is kept (it has its own button)."
        )
        self.reset_btn.clicked.connect(self.reset_requested)
        lay.addWidget(self.reset_btn, 0, Qt.AlignmentFlag.AlignLeft)
        self.template_text = QLabel("Chat template: your override, remembered for this file (Reset keeps it).")
        self.template_text.setObjectName("detailLabel")
        self.template_text.setWordWrap(True)
        lay.addWidget(self.template_text)
        self.template_btn = QPushButton("Use the GGUF's template")
        self.template_btn.setObjectName("resetTemplateButton")
        self.template_btn.setToolTip("Forget your chat template for this file; the one in the GGUF is used again")
        self.template_btn.clicked.connect(self.template_reset_requested)
        lay.addWidget(self.template_btn, 0, Qt.AlignmentFlag.AlignLeft)
        self.remembered: bool = False
        self.show_memory(None, None, False)

    def show_memory(
        self,
        path: str | None,
        remembered: LoadSettings | None,
        template_override: bool,
        unapplied: Sequence[str] = (),
        *,
        to_defaults: bool = False,
    ) -> None:
        """Show where ``path``'s load settings come from and the edits not applied yet (see
        :func:`memory_text`), and whether it has a chat template override."""
        self.remembered = remembered is not None
        self.text.setText(memory_text(path, remembered, unapplied, to_defaults=to_defaults))
        self._show(self.reset_btn, self.remembered)
        for w in (self.template_text, self.template_btn):
            self._show(w, path is not None and template_override)

    def _show(self, w: QWidget, visible: bool) -> None:
        """Show or hide ``w``; a focused button hidden (it was just pressed) leaves the focus on this box:
        Qt would pass it to the next widget in the focus chain, the n_ctx field below, and a wheel meant
        to scroll the panel would then change n_ctx (review 27 §10)."""
        if not visible and w.hasFocus():
            self.setFocus(Qt.FocusReason.OtherFocusReason)
        w.setVisible(visible)

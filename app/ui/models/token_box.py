"""The Hub tab's Hugging Face token row: a password field, Save, Remove and where the token comes from."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSizePolicy, QWidget


def login_token_present() -> bool:
    """Whether huggingface_hub has a login token (HF_TOKEN or ``hf auth login``); reads no network."""
    try:
        from huggingface_hub import get_token

        return get_token() is not None
    except Exception:
        return False


class TokenBox(QFrame):
    """The token in Glassbox's settings: typed (never shown), saved, removed.

    Args:
        get_saved_token, save_token: read and store the token in the settings (the settings own it).

    Signals:
        token_saved(): the field's token was stored (None when the field was empty).
    """

    token_saved = Signal()

    def __init__(
        self,
        get_saved_token: Callable[[], str | None],
        save_token: Callable[[str | None], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("tokenRow")
        self._get_saved_token = get_saved_token
        self._save_token = save_token
        tl = QHBoxLayout(self)
        tl.setContentsMargins(10, 6, 8, 6)
        tl.setSpacing(6)
        lab = QLabel("Hugging Face token")
        lab.setObjectName("tokenLabel")
        tl.addWidget(lab)
        self.token_field = QLineEdit()
        self.token_field.setObjectName("tokenField")
        self.token_field.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_field.setPlaceholderText("hf_… (for gated and private models)")
        self.token_field.setMinimumWidth(200)
        self.token_field.setMaximumWidth(280)
        self.token_field.returnPressed.connect(self.save_token)
        tl.addWidget(self.token_field)
        self.token_save = QPushButton("Save")
        self.token_save.setObjectName("tokenSave")
        self.token_save.clicked.connect(self.save_token)
        tl.addWidget(self.token_save)
        self.token_clear = QPushButton("Remove")
        self.token_clear.setObjectName("tokenClear")
        self.token_clear.clicked.connect(self.clear_token)
        tl.addWidget(self.token_clear)
        self.token_status = QLabel("")
        self.token_status.setObjectName("tokenStatus")
        self.token_status.setWordWrap(True)
        self.token_status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        tl.addWidget(self.token_status, 1)
        saved = self._get_saved_token()
        if saved:
            self.token_field.setText(saved)
        self._update_status()

    def typed_token(self) -> str | None:
        """The token in the field (saved or not), or None when it is empty."""
        return self.token_field.text().strip() or None

    def save_token(self) -> None:
        """Store the field's token in the settings (an empty field removes it)."""
        self._save_token(self.typed_token())
        self._update_status()
        self.token_saved.emit()

    def clear_token(self) -> None:
        """Empty the field and remove the saved token."""
        self.token_field.clear()
        self.save_token()

    def _update_status(self) -> None:
        if self._get_saved_token():
            text = "A token is saved in Glassbox's settings (never shown or logged)."
        elif login_token_present():
            text = "Using the token from your huggingface_hub login (hf auth login)."
        else:
            text = "No token: public models only. Gated models need one (huggingface.co/settings/tokens)."
        self.token_status.setText(text)
        self.token_clear.setEnabled(bool(self._get_saved_token()))

"""The Models page's Remote tab: use an OpenAI-compatible server (llama-server, vLLM, Ollama...) as the engine.

The person enters the server's URL, an API key (stored in settings.json like the Hub token, never
shown) and optionally a model id; **Test connection** runs :func:`app.remote.probe.probe` on a worker
thread and says what answered, or why nothing did (each :class:`~app.core.remote.ConnectionFailure`
has its own message); **Use this server** asks the window to make it the engine.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.remote import NOT_REPORTED, RemoteEndpoint, RemoteFacts, RemoteSettings, ServerKind
from app.remote.http import RemoteError
from app.remote.probe import probe
from app.ui.common.tasks import TaskPool

LLAMA_SERVER_COMMAND = "llama-server -m model.gguf --host 0.0.0.0 --port 8080 --api-key <key>"


class RemoteTab(QWidget):
    """URL, key, model; Test connection; Use this server.

    Args:
        pool: worker threads for the connection test.
        get_settings / store_settings: read and store :class:`RemoteSettings` (the settings own them).

    Signals:
        use_requested(RemoteEndpoint): the person asked to use this server as the engine.
        tested(object): a connection test ended: :class:`RemoteFacts` or the :class:`RemoteError`.
    """

    use_requested = Signal(RemoteEndpoint)
    tested = Signal(object)  # RemoteFacts | RemoteError

    def __init__(
        self,
        pool: TaskPool,
        get_settings: Callable[[], RemoteSettings],
        store_settings: Callable[[RemoteSettings], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("remoteTab")
        self._pool = pool
        self._get = get_settings
        self._store = store_settings
        self._testing = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 12, 16, 12)
        lay.setSpacing(10)
        intro = QLabel(
            "Use a model served by another machine: llama.cpp's llama-server, vLLM, Ollama or any "
            "OpenAI-compatible server. Glassbox sends the chat there and shows what the server reports "
            "(llama-server reports the most: prompt tokens, prefill, cached tokens, alternatives)."
            f"<br>On the other machine, e.g.: <code>{html.escape(LLAMA_SERVER_COMMAND)}</code>"
        )
        intro.setWordWrap(True)
        intro.setObjectName("remoteIntro")
        lay.addWidget(intro)
        form = QFormLayout()
        s = self._get()
        self.url_field = QLineEdit(s.url)
        self.url_field.setObjectName("remoteUrl")
        self.url_field.setPlaceholderText("http://192.168.1.20:8080/v1")
        self.url_field.textEdited.connect(self._server_changed)
        form.addRow("Server URL", self.url_field)
        self.key_field = QLineEdit(s.api_key)
        self.key_field.setObjectName("remoteKey")
        self.key_field.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_field.setPlaceholderText("none (the server's --api-key, if it has one)")
        form.addRow("API key", self.key_field)
        self.model_box = QComboBox()
        self.model_box.setObjectName("remoteModel")
        self.model_box.setEditable(True)
        self.model_box.setPlaceholderText("the first model the server lists")
        if s.model:
            self.model_box.addItem(s.model)
        form.addRow("Model", self.model_box)
        lay.addLayout(form)
        row = QHBoxLayout()
        self.test_button = QPushButton("Test connection")
        self.test_button.setObjectName("remoteTest")
        self.test_button.clicked.connect(self.test_connection)
        row.addWidget(self.test_button)
        self.use_button = QPushButton("Use this server")
        self.use_button.setObjectName("remoteUse")
        self.use_button.clicked.connect(self.use_server)
        row.addWidget(self.use_button)
        row.addStretch(1)
        lay.addLayout(row)
        self.status = QLabel("")
        self.status.setObjectName("remoteStatus")
        self.status.setWordWrap(True)
        self.status.setMinimumHeight(3 * self.status.fontMetrics().lineSpacing())  # a long answer wraps, uncut
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.status)
        lay.addStretch(1)

    # ------------------------------------------------------------------ values
    def typed_settings(self) -> RemoteSettings:
        """What the fields hold."""
        return RemoteSettings(
            url=self.url_field.text().strip(),
            api_key=self.key_field.text().strip(),
            model=self.model_box.currentText().strip(),
        )

    def _endpoint(self) -> RemoteEndpoint | None:
        """The fields' endpoint, stored in the settings; None (with the reason shown) for a bad URL."""
        typed = self.typed_settings()
        try:
            endpoint = typed.endpoint()
        except ValueError as exc:
            self.status.setText(f"✕ {exc}")
            return None
        self._store(typed)
        return endpoint

    # ------------------------------------------------------------------ commands
    def test_connection(self) -> bool:
        """Test the fields' server on a worker thread (the answer goes to :attr:`status` and :attr:`tested`).

        Returns False (nothing started) for a bad URL or while a test runs.
        """
        if self._testing:
            return False
        endpoint = self._endpoint()
        if endpoint is None:
            return False
        self._testing = True
        self.test_button.setEnabled(False)
        self.status.setText(f"Testing {endpoint.base_url} …")
        self._pool.submit(lambda: probe(endpoint), self._test_passed, self._test_failed)
        return True

    def use_server(self) -> None:
        """Ask the window to use the fields' server as the engine."""
        endpoint = self._endpoint()
        if endpoint is not None:
            self.use_requested.emit(endpoint)

    def _server_changed(self) -> None:
        """Another address typed: the models listed and the last test's answer were the old server's."""
        self.model_box.clear()
        self.status.setText("")

    # ------------------------------------------------------------------ answers
    def _test_passed(self, facts: RemoteFacts) -> None:
        self._testing = False
        self.test_button.setEnabled(True)
        current = self.model_box.currentText()
        self.model_box.clear()
        self.model_box.addItems(list(facts.models))
        self.model_box.setCurrentText(current if current in facts.models else facts.model)
        self.status.setText("✓ " + describe(facts))
        self.tested.emit(facts)

    def _test_failed(self, exc: BaseException) -> None:
        self._testing = False
        self.test_button.setEnabled(True)
        self.status.setText(f"✕ {exc.message if isinstance(exc, RemoteError) else repr(exc)}")
        self.tested.emit(exc)


def describe(facts: RemoteFacts) -> str:
    """A connection test's result for people: who answered, with what, what it reports."""
    parts = [
        f"{facts.kind.label} answers at {facts.base_url} ({facts.latency_s * 1000:.0f} ms)",
        f"{len(facts.models)} model(s): {', '.join(facts.models[:5])}",
        f"n_ctx {facts.n_ctx:,}" if facts.n_ctx else f"n_ctx {NOT_REPORTED}",
    ]
    if facts.kind is ServerKind.LLAMA_SERVER:
        parts.append("prompt tokens, prefill, cached tokens and alternatives are shown" if facts.can_tokenize else "")
    else:
        parts.append(f"prefill figures and prompt tokens: {NOT_REPORTED}")
    return " · ".join(p for p in parts if p)

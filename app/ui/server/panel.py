"""The Server panel: the local API's switch, address, key, exposure, busy policy, parallel sequences
(and those in flight, :mod:`app.ui.server.sequences`), queue and request log.

The log lists each API request (newest first) with its figures: queue wait, TTFT, prefill
(tokens and tok/s), decode (tokens and tok/s); the conversation of the selected one shows
below it, apart from the person's chats. A queued or running request can be cancelled here.
"""

from __future__ import annotations

import time
from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.server_settings import MAX_PARALLEL, BusyPolicy, ServerSettings
from app.ui.common import stats_format as fmt
from app.ui.common.wrapped_check import WrappedCheck
from app.ui.server.controller import ServerController
from app.ui.server.request_log import ApiLogEntry, RequestStatus
from app.ui.server.sequences import SequencesView
from app.ui.window.settings_controller import SettingsController

LAN_WARNING = (
    "Listens on every network interface (0.0.0.0): anyone on your network who has the key can generate "
    "text with the loaded model and read its file name. Your chats, files and settings are not served. "
    "Traffic is plain HTTP (not encrypted)."
)
PARALLEL_HELP = (
    "API requests decoded together, as llama-server's --parallel: each one is a sequence of a second "
    "llama.cpp context with the loaded n_ctx, so its KV cache costs this many times the chat's. Your own "
    "reply goes first: the API's sequences pause while it is written. 1: one request at a time, in the "
    "chat's context."
)
LOG_LEAST_HEIGHT = 80  # the request log's and the conversation's least height, pixels (a few lines each)
COLUMNS = ("time", "client", "endpoint", "status", "queued", "TTFT", "prefill", "decode", "tokens in/out")


def entry_cells(e: ApiLogEntry) -> tuple[str, ...]:
    """The log row of one request (see :data:`COLUMNS`)."""
    s = e.stats
    when = time.strftime("%H:%M:%S", time.localtime(e.arrived))
    if s is None:
        return (
            when,
            e.client,
            e.endpoint,
            e.status.value,
            fmt.seconds(e.queued_s) if e.queued_s else "",
            "",
            "",
            "",
            f"{fmt.tokens(e.embedded_tokens)} / 0" if e.embedded_tokens else "",
        )
    return (
        when,
        e.client,
        e.endpoint,
        e.status.value,
        fmt.seconds(e.queued_s),
        fmt.ttft(s.ttft_s),
        f"{fmt.tokens(s.evaluated_tokens)} tok · {fmt.tok_s(s.prefill_tok_s)}",
        f"{fmt.tokens(s.generated_tokens)} tok · {fmt.tok_s(s.decode_tok_s)}",
        f"{fmt.tokens(s.prompt_tokens)} / {fmt.tokens(s.generated_tokens)} ({fmt.tokens(s.cached_tokens)} cached)",
    )


class ServerPanel(QWidget):
    """The local API's controls and log (a dock of the main window)."""

    def __init__(self, server: ServerController, settings: SettingsController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.server = server
        self._settings = settings
        lay = QVBoxLayout(self)
        # Every row wraps to the dock's width (the texts wrap, labels sit above their fields, the
        # key's buttons on a line of their own, each as wide as its text): the panel never makes its
        # column wider, and the dock scrolls rather than squeezing the Stats and Sampler above it.
        enabled = WrappedCheck("Serve the loaded model on an OpenAI-compatible API")
        self.enabled = enabled.box
        self.enabled.setObjectName("serverEnabled")
        self.enabled.toggled.connect(self.server.switch)
        lay.addWidget(enabled)
        self.address = QLabel("Off.")
        self.address.setObjectName("serverAddress")
        self.address.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.address.setWordWrap(True)
        lay.addWidget(self.address)
        # The sequences in flight right under the address: the dock is short at 1366x768 (under Stats
        # and the Sampler), and what runs now matters more there than the settings below.
        self.sequences = SequencesView(server)
        lay.addWidget(self.sequences)

        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapAllRows)
        key_box = QVBoxLayout()
        self.key = QLineEdit()
        self.key.setObjectName("serverKey")
        self.key.setReadOnly(True)
        key_box.addWidget(self.key)
        key_buttons = QHBoxLayout()
        self.copy_key = QPushButton("Copy")
        self.copy_key.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.key.text()))
        self.new_key = QPushButton("New key")
        self.new_key.clicked.connect(self.server.new_key)
        for button in (self.copy_key, self.new_key):
            button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)  # its text's width
            key_buttons.addWidget(button)
        key_buttons.addStretch(1)
        key_box.addLayout(key_buttons)
        form.addRow("API key", key_box)
        self.port = QSpinBox()
        self.port.setRange(0, 65535)
        self.port.setSpecialValueText("any free port")  # 0: the address above says which
        self.port.editingFinished.connect(lambda: self._update(port=self.port.value()))
        form.addRow("Port", self.port)
        self.busy = QComboBox()
        self.busy.addItem("Wait in the queue", BusyPolicy.QUEUE)
        self.busy.addItem("Refuse (503) while I am chatting", BusyPolicy.REFUSE)
        self.busy.activated.connect(lambda _i: self._update(busy_policy=BusyPolicy(self.busy.currentData())))
        form.addRow("While my reply is written", self.busy)
        self.parallel = QSpinBox()
        self.parallel.setObjectName("serverParallel")
        self.parallel.setRange(1, MAX_PARALLEL)
        self.parallel.setToolTip(PARALLEL_HELP)
        self.parallel.editingFinished.connect(lambda: self._update(parallel=self.parallel.value()))
        form.addRow("Parallel sequences", self.parallel)
        self.cors = QLineEdit()
        self.cors.setPlaceholderText("off (e.g. http://localhost:3000)")
        self.cors.setToolTip("The web pages' origins allowed to call the API, comma-separated; empty: none.")
        self.cors.editingFinished.connect(
            lambda: self._update(cors_origins=tuple(o.strip() for o in self.cors.text().split(",") if o.strip()))
        )
        form.addRow("CORS origins", self.cors)
        lay.addLayout(form)
        lan = WrappedCheck("Reachable from other computers on my network")
        lan.box.setToolTip(LAN_WARNING)
        lan.label.setToolTip(LAN_WARNING)
        self.lan = lan.box
        self.lan.setObjectName("serverLan")
        self.lan.toggled.connect(lambda on: self._update(expose_lan=on))
        lay.addWidget(lan)
        self.lan_note = QLabel(LAN_WARNING)
        self.lan_note.setWordWrap(True)
        lay.addWidget(self.lan_note)

        queue_row = QHBoxLayout()
        self.queue = QLabel("")
        self.queue.setObjectName("serverQueue")
        self.queue.setWordWrap(True)
        self.cancel = QPushButton("Cancel request")
        self.cancel.setObjectName("serverCancel")
        self.cancel.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.cancel.setToolTip("Cancel the request selected in the log below (one that is queued or running).")
        self.cancel.setEnabled(False)  # until a queued or running request is selected
        self.cancel.clicked.connect(self._cancel_selected)
        queue_row.addWidget(self.queue, 1)
        queue_row.addWidget(self.cancel)
        lay.addLayout(queue_row)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("serverLog")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setWordWrap(False)
        self.table.setMinimumHeight(LOG_LEAST_HEIGHT)
        self.table.itemSelectionChanged.connect(self._show_selected)
        lay.addWidget(self.table, 2)
        self.conversation = QPlainTextEdit()
        self.conversation.setObjectName("serverConversation")
        self.conversation.setReadOnly(True)
        self.conversation.setPlaceholderText("The conversation of the selected request (not one of your chats).")
        self.conversation.setMinimumHeight(LOG_LEAST_HEIGHT)
        lay.addWidget(self.conversation, 1)

        server.server_changed.connect(self._show_server)
        server.entry_changed.connect(self._entry_changed)
        server.engine.api.queue_changed.connect(self._show_queue)
        # Read the settings now, not the emitted value: the controller may have changed them again
        # (a key generated on the first switch-on) before this slot runs for the first change.
        settings.changed.connect(lambda _s: self._show_settings(self._settings.settings.server))
        self._show_settings(settings.settings.server)
        self._show_server()
        self._show_queue()

    def _update(self, **changes: object) -> None:
        s = self._settings.settings.server
        self._settings.update(server=replace(s, **changes))  # type: ignore[arg-type]

    def _show_settings(self, s: ServerSettings) -> None:
        for w, value in ((self.enabled, s.enabled), (self.lan, s.expose_lan)):
            w.blockSignals(True)
            w.setChecked(value)
            w.blockSignals(False)
        self.key.setText(s.api_key)
        self.port.setValue(s.port)
        self.busy.setCurrentIndex(max(0, self.busy.findData(s.busy_policy)))
        self.parallel.setValue(s.parallel)
        self.cors.setText(", ".join(s.cors_origins))
        self.lan_note.setVisible(s.expose_lan)
        self.sequences.show_sequences(None)
        self._show_server()

    def _show_server(self) -> None:
        url = self.server.url
        if self.server.error:
            self.address.setText(self.server.error)
        elif url is None:
            self.address.setText("Off. Other programs cannot reach the model.")
        else:
            where = "every network interface" if self._settings.settings.server.expose_lan else "this computer only"
            self.address.setText(f"Serving at {url} ({where}); clients send the API key below.")

    def _show_queue(self) -> None:
        self.queue.setText(f"API requests: {self.server.queue_text()}")

    def _entry_changed(self, entry: ApiLogEntry) -> None:
        row = self._row_of(entry.job_id)
        if row is None:
            self.table.insertRow(0)
            row = 0
            while self.table.rowCount() > len(self.server.entries):
                self.table.removeRow(self.table.rowCount() - 1)
        for col, text in enumerate(entry_cells(entry)):
            item = QTableWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, entry.job_id)
            self.table.setItem(row, col, item)
        self._show_queue()
        if self._selected_id() == entry.job_id:
            self._show_selected()

    def _row_of(self, job_id: int) -> int | None:
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == job_id:
                return row
        return None

    def _selected_id(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.table.item(rows[0].row(), 0)
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def _entry(self, job_id: int | None) -> ApiLogEntry | None:
        return next((e for e in self.server.entries if e.job_id == job_id), None)

    def _show_selected(self) -> None:
        entry = self._entry(self._selected_id())
        self.conversation.setPlainText(entry.transcript if entry is not None else "")
        self.cancel.setEnabled(entry is not None and entry.status in (RequestStatus.QUEUED, RequestStatus.RUNNING))

    def _cancel_selected(self) -> None:
        job_id = self._selected_id()
        if job_id is not None:
            self.server.cancel_request(job_id)

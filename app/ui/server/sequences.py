"""The Server panel's view of the API requests decoded together (issue 23 §4): one row per sequence.

It follows the engine client's ``sequences_progressed`` notices (:class:`~app.core.protocol.SequencesProgressed`,
sent by the engine at most every 0.25 s while sequences are in flight, so the rows change at most at
that rate): each sequence's state, tokens generated, decode speed, prompt tokens evaluated and request
(client and endpoint from the log; last, as the longest), and above them the parallel context's size and
memory, beside the chat's. A row goes when its request ends; the panel puts the view right under the
address, where a short dock (1366x768) still shows it.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core import protocol as P
from app.ui.common import stats_format as fmt
from app.ui.engine.client import EngineState
from app.ui.server.controller import ServerController

SEQ_COLUMNS = ("seq", "state", "tokens", "speed", "prompt", "request")  # the figures first, the long name last
MIB = 1024 * 1024
ROWS_SHOWN = 4  # the table's height fits this many rows (it scrolls beyond)


def sequence_cells(f: P.SequenceFigures, who: str) -> tuple[str, ...]:
    """One sequence's row (see :data:`SEQ_COLUMNS`); ``who``: its request as the log names it."""
    prompt = f"{fmt.tokens(f.prefilled)} / {fmt.tokens(f.prompt_tokens)}" if f.prompt_tokens else ""
    speed = fmt.tok_s(f.decode_tok_s) if f.decode_tok_s > 0 else ""
    return (
        str(f.seq_id) if f.seq_id >= 0 else "",
        f.state.value,
        fmt.tokens(f.generated) if f.generated else "",
        speed,
        prompt,
        who,
    )


def summary_text(
    ev: P.SequencesProgressed | None, parallel: int, rows: tuple[P.SequenceFigures, ...] = (), queued: int = 0
) -> str:
    """The line above the table: the setting, and the context's size and memory once made.

    Args:
        ev: the engine's last notice (None: none since the model was loaded).
        parallel: the setting now (API requests decoded together at most).
        rows: the sequences of ``ev`` whose request is still in the engine (those shown).
        queued: API requests waiting in the window for the engine.
    """
    running = sum(f.state is not P.SequenceState.WAITING for f in rows)
    waiting = len(rows) - running
    flight = f"{running} in flight" + (f", {waiting} waiting for their context" if waiting else "")
    if parallel <= 1:
        if not rows:
            return "Parallel sequences: 1. API requests run one at a time in the chat's context."
        later = f"; the {queued} queued then run one at a time" if queued else ""
        return (
            f"Parallel sequences: 1 from the next request. The {len(rows)} sent already ({flight}) "
            f"finish first, decoded together{later}."
        )
    if ev is None or ev.n_seq == 0:
        return f"Up to {parallel} API requests are decoded together (their context is made with the first)."
    head = (
        f"{ev.n_seq} sequences × n_ctx {fmt.tokens(ev.n_ctx_seq)}: KV cache {ev.kv_bytes / MIB:,.0f} MiB, "
        f"compute {ev.compute_bytes / MIB:,.0f} MiB, beside the chat's. "
    )
    if not rows:
        return head + "None in flight."
    if ev.paused:
        return head + f"Paused while your reply is written ({flight})."
    return head + f"{flight}; last step {ev.step_tokens} tokens in one llama_decode."


class SequencesView(QWidget):
    """The sequences in flight (see the module docstring).

    Args:
        server: the local API's owner (the log's entries, the engine client's notices and setting).
    """

    def __init__(self, server: ServerController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._server = server
        self._last: P.SequencesProgressed | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.summary = QLabel("")
        self.summary.setObjectName("serverSequencesSummary")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)
        self.table = QTableWidget(0, len(SEQ_COLUMNS))
        self.table.setObjectName("serverSequences")
        self.table.setHorizontalHeaderLabels(SEQ_COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setWordWrap(False)
        row_h = self.table.verticalHeader().defaultSectionSize()
        self.table.setFixedHeight(self.table.horizontalHeader().sizeHint().height() + ROWS_SHOWN * row_h + 4)
        lay.addWidget(self.table)
        server.engine.api.sequences_progressed.connect(self.show_sequences)
        server.engine.api.queue_changed.connect(lambda: self.show_sequences(None))
        server.engine.model_loaded.connect(self._forget_context)
        server.engine.state_changed.connect(self._state_changed)
        self.show_sequences(None)

    def show_sequences(self, ev: P.SequencesProgressed | None) -> None:
        """Show ``ev`` (None: the last one again, e.g. after the setting changed or a request ended).

        A row stays while its request is in the engine: one that ended (Finished, Failed, the model
        unloaded) goes at once, without waiting for the engine's next notice; the table stays while
        rows remain, also when the setting went back to 1 (they finish first).
        """
        if ev is not None:
            self._last = ev
        engine = self._server.engine
        parallel = engine.api.parallel
        rows = tuple(
            f
            for f in (self._last.sequences if self._last is not None else ())
            if engine.api.ticket_of(f.request_id) is not None
        )
        self.summary.setText(summary_text(self._last, parallel, rows, len(engine.api.waiting)))
        self.table.setVisible(parallel > 1 or bool(rows))
        self.table.setRowCount(len(rows))
        for row, f in enumerate(rows):
            for col, text in enumerate(sequence_cells(f, self._who(f.request_id))):
                item = self.table.item(row, col)
                if item is None:
                    self.table.setItem(row, col, QTableWidgetItem(text))
                elif item.text() != text:
                    item.setText(text)

    def _state_changed(self, state: EngineState) -> None:
        if state in (EngineState.LOADING, EngineState.NO_MODEL, EngineState.DEAD):
            self._forget_context()

    def _forget_context(self, *_args: object) -> None:
        """The model is being switched or was (re)loaded, or the engine stopped: the parallel context of
        the model before is gone with it (the engine makes a new one on the next API request)."""
        self._last = None
        self.show_sequences(None)

    def _who(self, request_id: int) -> str:
        """``client · endpoint`` of the request the engine knows as ``request_id`` ("" when unknown)."""
        ticket = self._server.engine.api.ticket_of(request_id)
        entry = self._server.entry_of_ticket(ticket) if ticket is not None else None
        return f"{entry.client} · {entry.endpoint}" if entry is not None else f"#{request_id}"

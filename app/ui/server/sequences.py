"""The Server panel's view of the API requests decoded together (issue 23 §4): one row per sequence.

It follows the engine client's ``sequences_progressed`` notices (:class:`~app.core.protocol.SequencesProgressed`,
sent by the engine at most every 0.25 s while sequences are in flight, so the rows change at most at
that rate): each sequence's request (client and endpoint from the log), state, prompt tokens evaluated,
tokens generated and decode speed, and above them the parallel context's size and memory, beside the chat's.
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
from app.ui.server.controller import ServerController

SEQ_COLUMNS = ("seq", "request", "state", "prompt", "tokens", "speed")
MIB = 1024 * 1024
ROWS_SHOWN = 4  # the table's height fits this many rows (it scrolls beyond)


def sequence_cells(f: P.SequenceFigures, who: str) -> tuple[str, ...]:
    """One sequence's row (see :data:`SEQ_COLUMNS`); ``who``: its request as the log names it."""
    prompt = f"{fmt.tokens(f.prefilled)} / {fmt.tokens(f.prompt_tokens)}" if f.prompt_tokens else ""
    speed = fmt.tok_s(f.decode_tok_s) if f.decode_tok_s > 0 else ""
    return (
        str(f.seq_id) if f.seq_id >= 0 else "",
        who,
        f.state.value,
        prompt,
        fmt.tokens(f.generated) if f.generated else "",
        speed,
    )


def summary_text(ev: P.SequencesProgressed | None, parallel: int) -> str:
    """The line above the table: the setting, and the context's size and memory once made."""
    if parallel <= 1:
        return "Parallel sequences: 1. API requests run one at a time in the chat's context."
    if ev is None or ev.n_seq == 0:
        return f"Up to {parallel} API requests are decoded together (their context is made with the first)."
    running = sum(f.state is not P.SequenceState.WAITING for f in ev.sequences)
    waiting = len(ev.sequences) - running
    head = (
        f"{ev.n_seq} sequences × n_ctx {fmt.tokens(ev.n_ctx_seq)}: KV cache {ev.kv_bytes / MIB:,.0f} MiB, "
        f"compute {ev.compute_bytes / MIB:,.0f} MiB, beside the chat's. "
    )
    flight = f"{running} in flight" + (f", {waiting} waiting for their context" if waiting else "")
    if ev.paused:
        return head + f"Paused while your reply is written ({flight})."
    if not ev.sequences:
        return head + "None in flight."
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
        server.engine.sequences_progressed.connect(self.show_sequences)
        self.show_sequences(None)

    def show_sequences(self, ev: P.SequencesProgressed | None) -> None:
        """Show ``ev`` (None: the last one again, e.g. after the setting changed)."""
        if ev is not None:
            self._last = ev
        parallel = self._server.engine.parallel
        self.summary.setText(summary_text(self._last, parallel))
        rows = self._last.sequences if self._last is not None and parallel > 1 else ()
        self.table.setVisible(parallel > 1)
        self.table.setRowCount(len(rows))
        for row, f in enumerate(rows):
            for col, text in enumerate(sequence_cells(f, self._who(f.request_id))):
                item = self.table.item(row, col)
                if item is None:
                    self.table.setItem(row, col, QTableWidgetItem(text))
                elif item.text() != text:
                    item.setText(text)

    def _who(self, request_id: int) -> str:
        """``client · endpoint`` of the request the engine knows as ``request_id`` ("" when unknown)."""
        ticket = self._server.engine.external_ticket_of(request_id)
        entry = self._server.entry_of_ticket(ticket) if ticket is not None else None
        return f"{entry.client} · {entry.endpoint}" if entry is not None else f"#{request_id}"

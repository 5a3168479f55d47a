"""The Model panel's RPC part: the rpc-server machines a model is split across, where its layers
went, and what the network carries per token.

The person lists ``host:port`` entries (applied with the other load settings, by a reload); a
Check button tries each server the way the engine will (:func:`app.core.rpc.check_server`, off
the UI thread); after a load the box shows which device holds which layers (llama.cpp's load log,
``ModelLoaded.placement``) and after each reply the bytes per token sent and received in prefill
and in decode (``GenerationStats.rpc_*``, measured in the engine from its TCP connections).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from app.core import protocol as P
from app.core.chat.context import GenerationStats
from app.core.gguf.gguf_info import format_bytes
from app.core.rpc import (
    SECURITY_NOTE,
    DevicePlacement,
    RpcError,
    ServerCheck,
    check_server,
    layer_ranges,
    parse_servers,
)
from app.ui.common import palette


def placement_lines(placement: Sequence[DevicePlacement], n_layer: int, load_sent_bytes: int = 0) -> list[str]:
    """One line per device: ``RPC0 (127.0.0.1:50052): layers 0-29, output · weights 98.0 MiB · KV 90.0 MiB``.

    The CPU row names the input layer (token embeddings), which llama.cpp always keeps on the
    CPU; a last line gives the bytes sent at load when there were RPC servers.
    """
    out = []
    for d in placement:
        where = f"{d.device} ({d.endpoint})" if d.endpoint else d.device
        layers = f"layers {layer_ranges(d.layers, n_layer)}"
        if d.device == "CPU":  # llama.cpp keeps the input layer (token embeddings) on the CPU
            layers = "input layer" + (f", {layers}" if d.layers else "")
        parts = [f"{where}: {layers}", f"weights {format_bytes(d.weight_bytes)}"]
        if d.kv_bytes:
            parts.append(f"KV {format_bytes(d.kv_bytes)}")
        out.append(" · ".join(parts))
    if load_sent_bytes:
        out.append(f"sent to the RPC servers while loading: {format_bytes(load_sent_bytes)}")
    return out


def traffic_text(stats: GenerationStats) -> str:
    """The last reply's network cost per token, prefill and decode (sent + received); ``""`` without RPC."""
    pre = stats.rpc_prefill_sent_bytes + stats.rpc_prefill_received_bytes
    dec = stats.rpc_decode_sent_bytes + stats.rpc_decode_received_bytes
    if not pre and not dec:
        return ""
    lines = ["Network, last reply (TCP payload, sent + received):"]
    if stats.evaluated_tokens:
        lines.append(
            f"prefill {format_bytes(stats.rpc_prefill_bytes_per_token)}/token × {stats.evaluated_tokens:,} tokens "
            f"(sent {format_bytes(stats.rpc_prefill_sent_bytes)}, received "
            f"{format_bytes(stats.rpc_prefill_received_bytes)})"
        )
    if stats.llama_n_decode:
        lines.append(
            f"decode {format_bytes(stats.rpc_decode_bytes_per_token)}/token × {stats.llama_n_decode:,} tokens "
            f"(sent {format_bytes(stats.rpc_decode_sent_bytes)}, received {format_bytes(stats.rpc_decode_received_bytes)})"
        )
    return "\n".join(lines)


def check_text(result: ServerCheck | RpcError) -> str:
    """One server's check in words: ``✓ host:port: RPC protocol 7.0.0, 1 device, 12.0 GiB free`` or the error."""
    if isinstance(result, RpcError):
        return f"✗ {result.message}"
    free = sum(d.free_bytes for d in result.devices)
    n = len(result.devices)
    version = ".".join(map(str, result.version))
    return f"✓ {result.endpoint}: RPC protocol {version}, {n} device{'s' if n != 1 else ''}, {format_bytes(free)} free"


class RpcServersBox(QWidget):
    """The RPC servers field, its warning, the Check button, the placement and the network figures.

    Signals:
        edited(): the person changed the list (read :meth:`servers`); text that is not a list
            of ``host:port`` yet (half typed) changes nothing and says what is wrong.
    """

    edited = Signal()
    _checked = Signal(object)  # internal: the check's lines (list[str]), from its thread

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rpcServers")
        self._in_use: tuple[str, ...] = ()
        self._valid: tuple[str, ...] = ()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        row = QHBoxLayout()
        row.addWidget(QLabel("RPC servers"))
        self.field = QLineEdit()
        self.field.setObjectName("field_rpc_servers")
        self.field.setAccessibleName("RPC servers")
        self.field.setPlaceholderText("host:port, … (none: this machine only)")
        self.field.setToolTip(
            "Machines running llama.cpp's rpc-server (same llama.cpp version). n_gpu_layers layers go to "
            "them, split by their free memory; apply with a reload. " + SECURITY_NOTE
        )
        self.field.textEdited.connect(self._on_edited)
        row.addWidget(self.field, 1)
        self.check_btn = QPushButton("Check")
        self.check_btn.setObjectName("rpcCheckButton")
        self.check_btn.setToolTip("Connect to each server and ask its version and devices")
        self.check_btn.clicked.connect(self.check)
        row.addWidget(self.check_btn)
        lay.addLayout(row)
        self.warning = QLabel("⚠ " + SECURITY_NOTE)
        self.warning.setObjectName("rpcWarning")
        self.warning.setStyleSheet(f"color: {palette.AMBER};")
        self.warning.setWordWrap(True)
        lay.addWidget(self.warning)
        self.status = QLabel("")
        self.status.setObjectName("detailLabel")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.placement = QLabel("")
        self.placement.setObjectName("detailLabel")
        self.placement.setWordWrap(True)
        lay.addWidget(self.placement)
        self.traffic = QLabel("")
        self.traffic.setObjectName("detailLabel")
        self.traffic.setWordWrap(True)
        lay.addWidget(self.traffic)
        self._checked.connect(self._show_check)
        self._refresh()

    # ------------------------------------------------------------------ the list
    def servers(self) -> tuple[str, ...]:
        """The ``host:port`` entries as typed, normalised; the last valid list while the text has an error."""
        return self._valid

    def set_servers(self, servers: Sequence[str]) -> None:
        """Show ``servers`` (the load settings applied); not an edit."""
        self._valid = tuple(servers)
        self.field.setText(", ".join(servers))
        self.status.setText("")
        self._refresh()

    def set_available(self, available: bool) -> None:
        """Whether this llama.cpp build has the RPC backend (``EngineReady.rpc``)."""
        self.field.setEnabled(available)
        self.check_btn.setEnabled(available)
        if not available:
            self.status.setText(
                "This llama.cpp build has no RPC backend: rebuild llama-cpp-python with "
                'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_RPC=ON" to split a model across machines.'
            )

    def _on_edited(self, text: str) -> None:
        try:
            servers = parse_servers(text)
        except RpcError as exc:
            self.status.setText(f"✗ {exc.message}")
            self.status.setStyleSheet(f"color: {palette.RED};")
            return
        self.status.setText("")
        if servers != self._valid:
            self._valid = servers
            self._refresh()
            self.edited.emit()

    def _refresh(self) -> None:
        self.warning.setVisible(bool(self._valid))

    # ------------------------------------------------------------------ check
    def check(self) -> None:
        """Check each listed server on a short-lived thread; the results replace the status line."""
        servers = self._valid
        if not servers:
            self.status.setText("No RPC server listed.")
            return
        self.check_btn.setEnabled(False)
        self.status.setStyleSheet("")
        self.status.setText("Checking " + ", ".join(servers) + " …")
        in_use = set(self._in_use)

        def run() -> None:
            lines = []
            for ep in servers:
                if ep in in_use:  # rpc-server serves one client: the engine is that client now
                    lines.append(f"✓ {ep}: in use by the loaded model")
                    continue
                try:
                    lines.append(check_text(check_server(ep)))
                except RpcError as exc:
                    lines.append(check_text(exc))
            with contextlib.suppress(RuntimeError):  # the widget is gone
                self._checked.emit(lines)

        threading.Thread(target=run, name="glassbox-rpc-check", daemon=True).start()

    def _show_check(self, lines: list[str]) -> None:
        self.check_btn.setEnabled(self.field.isEnabled())
        bad = any(line.startswith("✗") for line in lines)
        self.status.setStyleSheet(f"color: {palette.RED if bad else palette.GREEN};")
        self.status.setText("\n".join(lines))

    # ------------------------------------------------------------------ the loaded model
    def set_model(self, loaded: P.ModelLoaded | None) -> None:
        """Show where ``loaded``'s layers live (only when it uses RPC servers); None clears."""
        self.traffic.setText("")
        self._in_use = loaded.settings.rpc_servers if loaded else ()
        if loaded is None or not loaded.settings.rpc_servers:
            self.placement.setText("")
            return
        lines = placement_lines(loaded.placement, loaded.info.n_layer, loaded.rpc_load_sent_bytes)
        self.placement.setText("Where the layers live:\n" + "\n".join(lines) if lines else "")

    def show_turn(self, stats: GenerationStats) -> None:
        """Show a finished reply's network bytes per token (nothing without RPC servers)."""
        self.traffic.setText(traffic_text(stats))

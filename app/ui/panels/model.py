"""Model panel: what the loaded GGUF is (from its metadata) and how it is loaded
(n_ctx, n_gpu_layers, threads, n_batch, context policy), applied with a reload."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core import protocol as P
from app.core.chat import ContextPolicy, LoadSettings
from app.core.gguf_info import GGUFInfo, format_bytes, format_count
from app.core.memory import CTX_PAD, estimate_memory, n_ubatch_for
from app.ui.common import palette
from app.ui.common.wheel_guard import guard_wheel
from app.ui.panels.rpc_servers import RpcServersBox


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one, else the CPU count).

    The same count the engine's auto-threads rule uses (app/engine/threads.py); the UI may not
    import the engine, so it is computed here too.
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def threads_warning(n_threads: int, cpus: int) -> str:
    """The warning shown under n_threads ("" for auto, 0, or fewer threads than CPUs).

    llama.cpp's threads wait for each other after every graph node: with a thread on every
    CPU, one CPU taken by the window or another process stalls them all (decode fell to
    3-20 tok/s on 2 CPUs).
    """
    if n_threads <= 0 or n_threads < cpus:
        return ""
    return (
        f"⚠ {n_threads} threads on {cpus} CPU{'s' if cpus != 1 else ''}: every CPU is taken, and decode can collapse "
        "when the window or another program needs one. Use auto (one CPU fewer) or fewer threads."
    )


class ModelPanel(QWidget):
    """Shows the loaded model and the load settings; it does not own them.

    The settings controller owns ``Settings.load``: this panel shows what it is given
    (:meth:`set_load_settings`, the settings last applied) and reports each edit as
    :attr:`load_settings_edited`; Apply asks for a reload with :attr:`reload_requested`.

    Signals:
        load_settings_edited(object): the person changed a field; the :class:`LoadSettings` shown now
            (n_ctx, threads... apply with a reload; the context policy applies to the next reply).
        reload_requested(object): apply these :class:`LoadSettings` (reload the model).
    """

    load_settings_edited = Signal(object)
    reload_requested = Signal(object)

    def __init__(self, settings: LoadSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPanel")
        self.info: GGUFInfo | None = None
        self.loaded: P.ModelLoaded | None = None
        self.gpu_offload = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(8)

        self.name = QLabel("No model loaded")
        self.name.setObjectName("modelName")
        self.name.setWordWrap(True)
        lay.addWidget(self.name)
        self.path = QLabel("")
        self.path.setObjectName("detailLabel")
        self.path.setWordWrap(True)
        self.path.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.path)

        self.hint = QLabel("Open a GGUF file (File → Open model, or drop it on the window).")
        self.hint.setObjectName("detailLabel")
        self.hint.setWordWrap(True)
        lay.addWidget(self.hint)
        self.facts = QFormLayout()
        self.facts.setHorizontalSpacing(10)
        self.facts.setVerticalSpacing(3)
        self.facts.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        self.facts.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        lay.addLayout(self.facts)
        self.template_btn = QPushButton("View chat template")
        self.template_btn.setObjectName("linkButton")
        self.template_btn.clicked.connect(self._show_template)
        self.template_btn.hide()
        lay.addWidget(self.template_btn, 0, Qt.AlignmentFlag.AlignLeft)

        t = QLabel("Load settings")
        t.setObjectName("sectionTitle")
        lay.addWidget(t)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        form.setHorizontalSpacing(10)
        form.setVerticalSpacing(4)
        self.n_ctx = QSpinBox()
        self.n_ctx.setObjectName("field_n_ctx")
        self.n_ctx.setRange(0, 1 << 20)
        self.n_ctx.setSingleStep(256)
        self.n_ctx.setSpecialValueText("trained length")
        self.n_ctx.setToolTip(
            "Context length in tokens: how much conversation the model can see. "
            "llama.cpp rounds it up to a multiple of 256. The KV cache grows with it."
        )
        # What llama.cpp will use is what the field shows: typed values round up to CTX_PAD.
        self.n_ctx.editingFinished.connect(lambda: self.n_ctx.setValue(-(-self.n_ctx.value() // CTX_PAD) * CTX_PAD))
        self.n_gpu_layers = QSpinBox()
        self.n_gpu_layers.setObjectName("field_n_gpu_layers")
        self.n_gpu_layers.setRange(-1, 999)
        self.n_gpu_layers.setSpecialValueText("all")
        self.n_threads = QSpinBox()
        self.n_threads.setObjectName("field_n_threads")
        self.n_threads.setRange(0, 256)
        self.n_threads.setSpecialValueText("auto")
        self.n_batch = QSpinBox()
        self.n_batch.setObjectName("field_n_batch")
        self.n_batch.setRange(16, 8192)
        self.n_batch.setSingleStep(64)
        self.n_batch.setToolTip("Most prompt tokens evaluated per llama_decode call during prefill.")
        self.policy = QComboBox()
        self.policy.setObjectName("field_context_policy")
        for p in ContextPolicy:
            self.policy.addItem(p.label, p.value)
        self.policy.setToolTip(
            "What happens when the conversation no longer fits in n_ctx. Applies to the next reply; no reload needed."
        )
        # The row's label names it and the box says "full size": one long box text was cut in a
        # narrow dock ("full-size SWA cach" at 1366x768).
        self.swa_full = QCheckBox("full size")
        self.swa_full.setToolTip(
            "Keep every token in the sliding-window layers' cache (more memory) so a "
            "cached prefix longer than the window can be reused across turns."
        )
        for field, name in (
            (self.n_ctx, "n_ctx"),
            (self.n_gpu_layers, "n_gpu_layers"),
            (self.n_threads, "n_threads"),
            (self.n_batch, "n_batch"),
            (self.policy, "context policy"),
        ):
            field.setAccessibleName(name)
        form.addRow("n_ctx", self.n_ctx)
        form.addRow("n_gpu_layers", self.n_gpu_layers)
        form.addRow("n_threads", self.n_threads)
        form.addRow("n_batch", self.n_batch)
        form.addRow("context policy", self.policy)
        self.swa_full.setAccessibleName("full-size SWA cache")
        form.addRow("SWA cache", self.swa_full)
        self._load_form = form
        form.setRowVisible(self.swa_full, False)  # shown for a model with sliding-window layers
        lay.addLayout(form)
        self.rpc = RpcServersBox()  # rpc-server machines to split the model across (app/ui/panels/rpc_servers.py)
        self.rpc.edited.connect(self._person_edited)
        lay.addWidget(self.rpc)
        for w in (self.n_ctx, self.n_gpu_layers, self.n_threads, self.n_batch, self.policy):
            w.setMinimumWidth(60)
        self.threads_note = QLabel("")
        self.threads_note.setObjectName("threadsWarning")
        self.threads_note.setStyleSheet(f"color: {palette.AMBER};")
        self.threads_note.setWordWrap(True)
        self.threads_note.hide()
        lay.addWidget(self.threads_note)
        self.gpu_note = QLabel("")
        self.gpu_note.setObjectName("detailLabel")
        self.gpu_note.setWordWrap(True)
        lay.addWidget(self.gpu_note)
        self.estimate = QLabel("")
        self.estimate.setObjectName("detailLabel")
        self.estimate.setWordWrap(True)
        lay.addWidget(self.estimate)
        self.apply_btn = QPushButton("Apply (reload model)")
        self.apply_btn.setObjectName("applyButton")
        self.apply_btn.clicked.connect(lambda: self.reload_requested.emit(self.load_settings()))
        lay.addWidget(self.apply_btn)
        lay.addStretch(1)
        for w in (self.n_ctx, self.n_gpu_layers, self.n_threads, self.n_batch):
            w.valueChanged.connect(self._person_edited)
        self.policy.currentIndexChanged.connect(self._person_edited)
        self.swa_full.toggled.connect(self._person_edited)
        self.set_load_settings(settings)
        self._applied = settings
        guard_wheel(self)

    # ----------------------------------------------------------------------------------------
    def load_settings(self) -> LoadSettings:
        """The load settings the fields show now (what :attr:`load_settings_edited` reports)."""
        return LoadSettings(
            n_ctx=self.n_ctx.value(),
            n_gpu_layers=self.n_gpu_layers.value(),
            n_threads=self.n_threads.value(),
            n_batch=self.n_batch.value(),
            context_policy=ContextPolicy(self.policy.currentData()),
            swa_full=self.swa_full.isChecked(),
            rpc_servers=self.rpc.servers(),
        )

    def set_load_settings(self, s: LoadSettings) -> None:
        """Show ``s`` as the settings applied (Apply is pending again once a field differs)."""
        for w in (self.n_ctx, self.n_gpu_layers, self.n_threads, self.n_batch, self.policy, self.swa_full):
            w.blockSignals(True)
        self.n_ctx.setValue(s.n_ctx)
        self.n_gpu_layers.setValue(s.n_gpu_layers)
        self.n_threads.setValue(s.n_threads)
        self.n_batch.setValue(s.n_batch)
        i = self.policy.findData(ContextPolicy(s.context_policy).value)
        self.policy.setCurrentIndex(max(0, i))
        self.swa_full.setChecked(s.swa_full)
        self.rpc.set_servers(s.rpc_servers)
        for w in (self.n_ctx, self.n_gpu_layers, self.n_threads, self.n_batch, self.policy, self.swa_full):
            w.blockSignals(False)
        self._applied = s
        self._edited()

    def set_gpu_offload(self, available: bool, rpc: bool = False) -> None:
        """Whether this machine has a GPU, and whether this build has the RPC backend (layers to other machines)."""
        self.gpu_offload = available
        self.n_gpu_layers.setEnabled(available or rpc)
        self.rpc.set_available(rpc)
        if available:
            note = ""
        elif rpc:
            note = "No GPU here: n_gpu_layers counts the layers sent to the RPC servers, if any are listed."
        elif getattr(sys, "frozen", False):  # the double-click build: nothing to rebuild there
            note = "This build of Glassbox runs on the CPU only: n_gpu_layers has no effect."
        else:
            note = (
                "This llama.cpp build is CPU-only: n_gpu_layers has no effect. "
                'Rebuild llama-cpp-python with CMAKE_ARGS="-DGGML_CUDA=on" (or -DGGML_METAL=on) to use a GPU.'
            )
        self.gpu_note.setText(note)

    def set_loading(self, path: str) -> None:
        self.name.setText(f"Loading {Path(path).name} …")

    def set_model(self, loaded: P.ModelLoaded | None) -> None:
        self.loaded = loaded
        self.rpc.set_model(loaded)
        self.info = loaded.info if loaded else None
        while self.facts.rowCount():
            self.facts.removeRow(0)
        if loaded is None:
            self.name.setText("No model loaded")
            self.path.setText("")
            self.hint.show()
            self.template_btn.hide()
            self._edited()
            return
        self.hint.hide()
        info = loaded.info
        self.name.setText(Path(info.path).name.removesuffix(".gguf"))
        self.path.setText(info.path)
        emb = info.embedding_tensor
        swa = info.swa_layers()
        rows = [
            ("name", info.name),
            ("architecture", info.architecture),
            ("parameters", f"{format_count(info.n_params)} ({info.n_params:,})"),
            ("quantization", f"{info.quant_type} · {info.bits_per_weight:.2f} bits/weight"),
            ("file size", format_bytes(info.file_size)),
            ("trained context", f"{info.context_length:,} tokens" if info.context_length else "not stated"),
            (
                "chat template",
                "yes (from the GGUF)" if loaded.chat_template else "none: plain User:/Assistant: transcript",
            ),
            (
                "layers · heads",
                f"{info.n_layer} layers · {info.n_head} heads · {info.n_head_kv_layer(0)} KV heads (GQA)",
            ),
            (
                "embeddings",
                f"{info.n_vocab:,} tokens × {info.n_embd} dims"
                + (f" · {emb.type_name} · {format_bytes(emb.n_bytes)}" if emb else ""),
            ),
            ("BOS / EOS", f"{loaded.bos_text or '—'} / {loaded.eos_text or '—'}"),
        ]
        if any(swa):
            rows.append(
                ("sliding window", f"{sum(swa)} of {len(swa)} layers see the last {info.sliding_window} tokens")
            )
        rows.append(
            (
                "loaded",
                f"n_ctx {loaded.n_ctx:,} · threads {loaded.n_threads} decode / "
                f"{loaded.n_threads_batch} prefill · n_batch {loaded.n_batch} · {loaded.load_s:.2f} s",
            )
        )
        kv = f"{format_bytes(loaded.kv_allocated_bytes)} (Glassbox's formula)"
        if loaded.kv_reported_bytes:
            kv += f" · llama.cpp allocated {format_bytes(loaded.kv_reported_bytes)}"
        rows.append(("KV cache", kv))
        if loaded.compute_reported_bytes:
            rows.append(("compute buffer", format_bytes(loaded.compute_reported_bytes)))
        types = ", ".join(f"{k} ×{v[0]} ({format_bytes(v[1])})" for k, v in list(info.tensor_types.items())[:4])
        rows.append(("tensor types", types))
        for key, value in rows:
            k = QLabel(key)
            k.setObjectName("factKey")
            val = QLabel(value)
            val.setObjectName("factValue")
            val.setTextFormat(Qt.TextFormat.PlainText)
            val.setWordWrap(True)
            val.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.facts.addRow(k, val)
        self.template_btn.setVisible(bool(loaded.chat_template))
        self._load_form.setRowVisible(self.swa_full, any(swa))
        self._edited()

    def _person_edited(self) -> None:
        self._edited()
        self.load_settings_edited.emit(self.load_settings())

    def _edited(self) -> None:
        s = self.load_settings()
        warning = threads_warning(s.n_threads, available_cpus())
        self.threads_note.setText(warning)
        self.threads_note.setVisible(bool(warning))
        changed = replace(s, context_policy=ContextPolicy.STOP) != replace(
            self._applied, context_policy=ContextPolicy.STOP
        )
        self.apply_btn.setEnabled(self.info is not None)
        self.apply_btn.setProperty("pending", changed)
        self.apply_btn.style().unpolish(self.apply_btn)
        self.apply_btn.style().polish(self.apply_btn)
        if self.info is None:
            self.estimate.setText("")
            return
        try:
            est = estimate_memory(
                self.info, s.n_ctx or self.info.context_length, n_ubatch=n_ubatch_for(s.n_batch), swa_full=s.swa_full
            )
        except ValueError as exc:
            self.estimate.setText(str(exc))
            return
        self.estimate.setText(
            f"Memory at these settings: {est.breakdown()}" + (" — press Apply to reload" if changed else "")
        )

    def _show_template(self) -> None:
        if not self.loaded or not self.loaded.chat_template:
            return
        dlg = QDialog(self)
        dlg.setWindowTitle("Chat template (Jinja, from the GGUF metadata)")
        v = QVBoxLayout(dlg)
        text = QPlainTextEdit(self.loaded.chat_template)
        text.setReadOnly(True)
        v.addWidget(text)
        box = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        box.rejected.connect(dlg.reject)
        v.addWidget(box)
        dlg.resize(640, 420)
        dlg.exec()

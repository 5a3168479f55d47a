"""Model panel: what the loaded GGUF is (from its metadata), how it is loaded (n_ctx,
n_gpu_layers, threads, n_batch, context policy, flash attention, K / V cache types), applied
with a reload and remembered for the file (:mod:`app.ui.panels.load_memory` says so), and a
drawing of its architecture (:mod:`app.ui.panels.architecture_view`)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core import protocol as P
from app.core.chat.context import ContextPolicy, FlashAttention, LoadSettings
from app.core.gguf.architecture import attention_label, describe_architecture
from app.core.gguf.gguf_info import GGUFInfo, format_bytes, format_count
from app.core.hardware.memory import CTX_PAD, KVCacheType, estimate_memory, mha_kv_bytes, n_ubatch_for
from app.core.remote import NOT_REPORTED, RemoteFacts
from app.ui.common import palette
from app.ui.common.wheel_guard import guard_wheel
from app.ui.panels.architecture_view import ArchitectureView
from app.ui.panels.load_memory import LoadMemoryBox
from app.ui.panels.rpc_servers import RpcServersBox
from app.ui.speculative.draft_memory import draft_memory, draft_refusal, speculation_fact
from app.ui.speculative.settings_box import SpeculationBox
from app.ui.window.model_change import ModelChange, ModelPhase


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


def cache_costs(s: LoadSettings) -> str:
    """What the flash attention and cache-type choice costs, in one or two sentences."""
    parts = []
    if s.type_k.quantized or s.type_v.quantized:
        parts.append(
            f"K {s.type_k} ({s.type_k.bits_per_value:g} bits a value) / V {s.type_v} "
            f"({s.type_v.bits_per_value:g}): less KV memory (below); each cached key and value is rounded "
            "to that many bits, which costs some quality (little at q8_0, more at 4 bits)."
        )
    if s.type_v.quantized and s.flash_attn is FlashAttention.AUTO:
        parts.append("The quantized V cache makes llama.cpp turn flash attention on.")
    if s.flash_attn is not FlashAttention.OFF:
        parts.append(
            "Flash attention never forms the attention weights: Glassbox's attention inspection runs its own "
            "context with it off."
        )
    return " ".join(parts)


TEMPLATE_KEY = "chat template"


class ModelPanel(QWidget):
    """Shows the loaded model and the load settings; it does not own them.

    The settings own the load settings remembered per file (``Settings.model_load``): this panel
    shows what it is given (:meth:`set_load_settings`, the settings last applied or being loaded;
    :meth:`show_fields`, settings not applied yet) and reports each edit as
    :attr:`load_settings_edited` (only the context policy is remembered from an edit; the rest when
    applied); Apply asks for a reload with :attr:`reload_requested`, which remembers them.
    :attr:`memory` says whether they are remembered for the file or Glassbox's defaults.

    Signals:
        load_settings_edited(LoadSettings): the person changed a field; the load settings shown now
            (n_ctx, threads... apply with a reload; the context policy applies to the next reply).
        reload_requested(LoadSettings): apply these load settings (reload the model).
        template_requested(): the person asked for the chat template and the prompt as tokens.
    """

    load_settings_edited = Signal(LoadSettings)
    reload_requested = Signal(LoadSettings)
    template_requested = Signal()

    def __init__(self, settings: LoadSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPanel")
        self.info: GGUFInfo | None = None
        self.loaded: P.ModelLoaded | None = None
        self.gpu_offload = False
        self._templates: dict[str, str] = {}  # the person's chat template overrides (model path -> source), shown
        self._template_fact: QLabel | None = None
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
        self.template_btn = QPushButton("Chat template and prompt…")
        self.template_btn.setObjectName("linkButton")
        self.template_btn.setToolTip("The chat template, the prompt the model sees as tokens, and your override")
        self.template_btn.clicked.connect(self.template_requested)
        self.template_btn.hide()
        lay.addWidget(self.template_btn, 0, Qt.AlignmentFlag.AlignLeft)

        t = QLabel("Load settings")
        t.setObjectName("sectionTitle")
        lay.addWidget(t)
        self.memory = LoadMemoryBox()  # remembered for this file, or Glassbox's defaults
        lay.addWidget(self.memory)
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
        # Its longest item set the panel's least width; the open list still shows each in full.
        self.policy.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.policy.setMinimumContentsLength(8)
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
        self.flash_attn = QComboBox()
        self.flash_attn.setObjectName("field_flash_attn")
        for fa in FlashAttention:
            self.flash_attn.addItem(fa.label, fa.value)
        self.flash_attn.setToolTip(
            "llama.cpp's fused attention kernel: it never forms the attention matrix, so it needs less "
            "compute buffer and is usually faster on long contexts. A quantized V cache needs it. "
            "Attention inspection does not (it runs its own context with it off)."
        )
        self.type_k = QComboBox()
        self.type_k.setObjectName("field_type_k")
        self.type_v = QComboBox()
        self.type_v.setObjectName("field_type_v")
        for box in (self.type_k, self.type_v):
            for kv_type in KVCacheType:
                box.addItem(kv_type.value, kv_type.value)
        self.type_k.setToolTip(
            "Type of the keys in the KV cache. f16: 2 bytes a value; q8_0: 1.06 (about half the memory, "
            "nearly lossless); q4_0: 0.56 (a quarter, some quality lost). Each token's keys are rounded to it."
        )
        self.type_v.setToolTip(
            "Type of the values in the KV cache (bytes as for K). A quantized V cache needs flash attention on "
            "or auto: with it off llama.cpp refuses to create the context."
        )
        for field, name in (
            (self.n_ctx, "n_ctx"),
            (self.n_gpu_layers, "n_gpu_layers"),
            (self.n_threads, "n_threads"),
            (self.n_batch, "n_batch"),
            (self.policy, "context policy"),
            (self.flash_attn, "flash attention"),
            (self.type_k, "K cache type"),
            (self.type_v, "V cache type"),
        ):
            field.setAccessibleName(name)
        form.addRow("n_ctx", self.n_ctx)
        form.addRow("n_gpu_layers", self.n_gpu_layers)
        form.addRow("n_threads", self.n_threads)
        form.addRow("n_batch", self.n_batch)
        # Its own row under its label: beside it, a narrow dock (210 px at 1366x768) cut it to "Stop at th".
        form.addRow(QLabel("context policy"))
        form.addRow(self.policy)
        self.swa_full.setAccessibleName("full-size SWA cache")
        form.addRow("SWA cache", self.swa_full)
        form.addRow("flash attention", self.flash_attn)
        form.addRow("K cache", self.type_k)
        form.addRow("V cache", self.type_v)
        self._load_form = form
        form.setRowVisible(self.swa_full, False)  # shown for a model with sliding-window layers
        lay.addLayout(form)
        self.speculation = SpeculationBox()  # speculative decoding (app/ui/speculative/settings_box.py)
        self.speculation.edited.connect(self._person_edited)
        lay.addWidget(self.speculation)
        self.rpc = RpcServersBox()  # rpc-server machines to split the model across (app/ui/panels/rpc_servers.py)
        self.rpc.edited.connect(self._person_edited)
        lay.addWidget(self.rpc)
        for w in (
            self.n_ctx,
            self.n_gpu_layers,
            self.n_threads,
            self.n_batch,
            self.policy,
            self.flash_attn,
            self.type_k,
            self.type_v,
        ):
            w.setMinimumWidth(60)
        self.threads_note = QLabel("")
        self.threads_note.setObjectName("threadsWarning")
        self.threads_note.setStyleSheet(f"color: {palette.AMBER};")
        self.threads_note.setWordWrap(True)
        self.threads_note.hide()
        lay.addWidget(self.threads_note)
        self.cache_note = QLabel("")
        self.cache_note.setObjectName("cacheNote")
        self.cache_note.setWordWrap(True)
        lay.addWidget(self.cache_note)
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
        self.arch_title = QLabel("Architecture (from the GGUF)")
        self.arch_title.setObjectName("sectionTitle")
        self.arch_title.setWordWrap(True)  # one line would set the panel's least width past a 1366x768 dock's
        self.arch_title.hide()
        lay.addWidget(self.arch_title)
        self.arch_view = ArchitectureView()
        self.arch_view.hide()
        lay.addWidget(self.arch_view)
        lay.addStretch(1)
        for w in (self.n_ctx, self.n_gpu_layers, self.n_threads, self.n_batch):
            w.valueChanged.connect(self._person_edited)
        for box in (self.policy, self.flash_attn, self.type_k, self.type_v):
            box.currentIndexChanged.connect(self._person_edited)
        self.swa_full.toggled.connect(self._person_edited)
        self._applied = settings
        self.set_load_settings(settings)
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
            flash_attn=FlashAttention(self.flash_attn.currentData()),
            type_k=KVCacheType(self.type_k.currentData()),
            type_v=KVCacheType(self.type_v.currentData()),
            rpc_servers=self.rpc.servers(),
            speculation=self.speculation.settings(),
        )

    def unapplied(self) -> tuple[str, ...]:
        """The fields' settings that differ from those applied (what Apply would reload with), in the
        field's terms (``("n_ctx 512",)``); the context policy applies without a reload and is never one."""
        shown = replace(self.load_settings(), context_policy=self._applied.context_policy)
        return shown.differences(self._applied)

    def set_load_settings(self, s: LoadSettings) -> None:
        """Show ``s`` as the settings applied (Apply is pending again once a field differs)."""
        self._applied = s
        self.show_fields(s)

    def show_fields(self, s: LoadSettings) -> None:
        """Show ``s`` in the fields without calling them applied (Apply is pending where they differ
        from the settings the model was loaded with); :attr:`load_settings_edited` is not emitted."""
        fields = (
            self.n_ctx,
            self.n_gpu_layers,
            self.n_threads,
            self.n_batch,
            self.policy,
            self.swa_full,
            self.flash_attn,
            self.type_k,
            self.type_v,
        )
        for w in fields:
            w.blockSignals(True)
        self.n_ctx.setValue(s.n_ctx)
        self.n_gpu_layers.setValue(s.n_gpu_layers)
        self.n_threads.setValue(s.n_threads)
        self.n_batch.setValue(s.n_batch)
        i = self.policy.findData(ContextPolicy(s.context_policy).value)
        self.policy.setCurrentIndex(max(0, i))
        self.swa_full.setChecked(s.swa_full)
        self.rpc.set_servers(s.rpc_servers)
        self.speculation.set_settings(s.speculation)
        self.flash_attn.setCurrentIndex(max(0, self.flash_attn.findData(s.flash_attn.value)))
        self.type_k.setCurrentIndex(max(0, self.type_k.findData(s.type_k.value)))
        self.type_v.setCurrentIndex(max(0, self.type_v.findData(s.type_v.value)))
        for w in fields:
            w.blockSignals(False)
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

    def show_model(self, change: ModelChange) -> None:
        """Follow the model's life (:attr:`~app.ui.window.model_loader.ModelLoader.model_changed`):
        what loads, the model loaded with the load settings it was loaded with, or none."""
        if change.phase is ModelPhase.LOADING and change.request is not None:
            self.set_loading(change.request.shown)
            self.set_load_settings(change.request.settings)  # this model's: remembered for it, or the defaults
        elif change.phase is ModelPhase.LOADED and change.loaded is not None:
            self.set_model(change.loaded)
            if change.applied is not None:
                self.set_load_settings(change.applied)
        else:
            self.set_model(None)

    def set_model(self, loaded: P.ModelLoaded | None) -> None:
        self.loaded = loaded
        self.rpc.set_model(loaded)
        self.info = loaded.info if loaded else None
        while self.facts.rowCount():
            self.facts.removeRow(0)
        self._template_fact = None
        if loaded is None:
            self.name.setText("No model loaded")
            self.path.setText("")
            self.hint.show()
            self.template_btn.hide()
            self.arch_view.set_architecture(None)
            self.arch_view.hide()
            self.arch_title.hide()
            self._edited()
            return
        self.hint.hide()
        info = loaded.info
        self.name.setText(Path(info.path).name.removesuffix(".gguf"))
        self.path.setText(info.path)
        swa = info.swa_layers()
        if loaded.remote is not None:  # a server's model: what it reports, and plainly what it does not
            self.path.setText(loaded.remote.base_url)
            swa = ()
            rows = remote_rows(loaded.remote)
        else:
            rows = self._file_rows(loaded)
        for key, value in rows:
            k = QLabel(key)
            k.setObjectName("factKey")
            val = QLabel(value)
            val.setObjectName("factValue")
            val.setTextFormat(Qt.TextFormat.PlainText)
            if key == TEMPLATE_KEY:
                self._template_fact = val
            val.setWordWrap(True)
            val.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.facts.addRow(k, val)
        self.template_btn.setVisible(True)  # also without a template in the GGUF: an override is set there
        self._load_form.setRowVisible(self.swa_full, any(swa))
        try:
            arch = describe_architecture(info) if loaded.remote is None else None
        except ValueError:  # not a transformer llama.cpp describes with blocks and heads
            arch = None
        self.arch_view.set_architecture(arch)
        self.arch_view.setVisible(arch is not None)
        self.arch_title.setVisible(arch is not None)
        self._edited()

    def show_templates(self, overrides: tuple[tuple[str, str], ...]) -> None:
        """The person's chat template overrides changed (``Settings.chat_templates``, (model path, source)
        pairs): the "chat template" fact of the model shown says which one replies use."""
        self._templates = dict(overrides)
        if self._template_fact is not None and self.loaded is not None:
            self._template_fact.setText(self._template_text(self.loaded))

    def _template_text(self, loaded: P.ModelLoaded) -> str:
        if loaded.info.path in self._templates:
            return (
                "yours (set with Template…), in place of the GGUF's"
                if loaded.chat_template
                else "yours (set with Template…)"
            )
        return "yes (from the GGUF)" if loaded.chat_template else "none: plain User:/Assistant: transcript"

    def _file_rows(self, loaded: P.ModelLoaded) -> list[tuple[str, str]]:
        """The facts of a model loaded by the local engine, ``(key, value)`` rows."""
        info = loaded.info
        emb = info.embedding_tensor
        swa = info.swa_layers()
        n_kv = info.n_head_kv_layer(0)
        rows = [
            ("name", info.name),
            ("architecture", info.architecture),
            ("parameters", f"{format_count(info.n_params)} ({info.n_params:,})"),
            ("quantization", f"{info.quant_type} · {info.bits_per_weight:.2f} bits/weight"),
            ("file size", format_bytes(info.file_size)),
            ("trained context", f"{info.context_length:,} tokens" if info.context_length else "not stated"),
            (TEMPLATE_KEY, self._template_text(loaded)),
            (
                "layers · heads",
                f"{info.n_layer} layers · {info.n_head} heads · {n_kv} KV head{'s' if n_kv != 1 else ''} · "
                f"{attention_label(info.n_head, n_kv)}",
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
        asked = loaded.settings.flash_attn
        fa = "on" if loaded.flash_attn_active else "off"
        if asked is FlashAttention.AUTO:
            fa += " (auto: llama.cpp decided)"
        elif (asked is FlashAttention.ON) != loaded.flash_attn_active:
            fa += f" (asked {asked.value}: llama.cpp changed it)"
        rows.append(("flash attention", fa))
        rows.append(("speculation", speculation_fact(loaded)))
        kv = (
            f"K {loaded.kv_layout.type_k} · V {loaded.kv_layout.type_v} · "
            f"{format_bytes(loaded.kv_allocated_bytes)} (Glassbox's formula)"
        )
        if loaded.kv_reported_bytes:
            kv += f" · llama.cpp allocated {format_bytes(loaded.kv_reported_bytes)}"
        layout = loaded.kv_layout
        kv += f" · {format_bytes(layout.bytes_per_token)} per token"
        mha = mha_kv_bytes(info, layout)
        if layout.allocated_bytes and mha > layout.allocated_bytes:
            # What grouped-query / multi-query attention saves: one K/V head per query head would take this.
            kv += f" · with one KV head per query head (MHA): {format_bytes(mha)}, ×{mha / layout.allocated_bytes:.3g}"
        rows.append(("KV cache", kv))
        if loaded.compute_reported_bytes:
            rows.append(("compute buffer", format_bytes(loaded.compute_reported_bytes)))
        types = ", ".join(f"{k} ×{v[0]} ({format_bytes(v[1])})" for k, v in list(info.tensor_types.items())[:4])
        rows.append(("tensor types", types))
        return rows

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
        conflict = s.v_cache_conflict
        self.cache_note.setText(conflict or cache_costs(s))
        self.cache_note.setStyleSheet(f"color: {palette.AMBER if conflict else palette.TEXT_DIM};")
        refused = draft_refusal(s, self.info)  # the draft's header against the model's, before anything is dropped
        self.speculation.show_header_refusal(refused)
        self.apply_btn.setEnabled(self.info is not None and not conflict and not refused)
        self.apply_btn.setProperty("pending", changed and self.apply_btn.isEnabled())
        self.apply_btn.style().unpolish(self.apply_btn)
        self.apply_btn.style().polish(self.apply_btn)
        if self.info is None:
            self.estimate.setText("")
            return
        try:
            est = estimate_memory(
                self.info,
                s.n_ctx or self.info.context_length,
                n_ubatch=n_ubatch_for(s.n_batch),
                swa_full=s.swa_full,
                type_k=s.type_k,
                type_v=s.type_v,
            )
        except ValueError as exc:
            self.estimate.setText(str(exc))
            return
        draft_text, draft_bytes = draft_memory(s, self.loaded, s.n_ctx or self.info.context_length)
        self.speculation.show_memory(draft_text)
        with_draft = f"; with the draft model {format_bytes(est.total + draft_bytes)}" if draft_bytes else ""
        self.estimate.setText(
            f"Memory at these settings: {est.breakdown()}{with_draft}" + (" — press Apply to reload" if changed else "")
        )


def remote_rows(remote: RemoteFacts) -> list[tuple[str, str]]:
    """The facts of a remote engine's model, ``(key, value)`` rows: what the server reports, the rest said plainly."""
    return [
        ("engine", remote.engine_label),
        ("model", remote.model),
        ("model file", remote.model_path or NOT_REPORTED),
        ("n_ctx", f"{remote.n_ctx:,} tokens" if remote.n_ctx else NOT_REPORTED),
        (
            "chat template",
            "the server's (shown by Template…)" if remote.chat_template else "the server's (" + NOT_REPORTED + ")",
        ),
        ("prompt tokens", "from the server's /tokenize" if remote.can_tokenize else NOT_REPORTED),
        ("layers, tensors, KV cache bytes", NOT_REPORTED + ": the weights are on the server"),
        ("latency", f"{remote.latency_s * 1000:.0f} ms for /models at the connection test"),
    ]

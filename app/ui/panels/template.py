"""The template and the tokens the model sees; the chat template override per model.

A dialog (opened from the Tokens panel): on the left the chat template's Jinja2 source
(the GGUF's, or the person's override for this model), editable, with presets of the common families' templates
(:mod:`app.core.chat.template_presets`: a preset fills the editor and is checked like a typed
template); on the right the prompt
it renders for the shown chat (or a sample conversation) as the engine tokenizes it, each
token a chip (boundaries visible), special tokens (BOS/EOS, ``<|im_start|>``,
``<start_of_turn>``) highlighted. The engine renders and tokenizes
(:class:`~app.core.protocol.RenderPrompt`), exactly as for a reply, nothing is
re-implemented here.

An override is validated before it is kept: the engine renders the sample conversation
(system, user, assistant, user) with it as llama-cpp-python renders the GGUF's template;
a syntax error, an exception or no text is shown with its line and changes nothing. Kept
overrides live in the settings (:meth:`~app.core.settings.Settings.with_chat_template`) and
go with every reply's request; "Use the GGUF's" removes it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QFont, QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.core import protocol as P
from app.core.chat.context import ChatMessage
from app.core.chat.template_presets import PRESETS, TemplatePreset
from app.ui.common import palette
from app.ui.common.pieces import visible_piece_html
from app.ui.engine.client import EngineClient
from app.ui.window.settings_controller import SettingsController

PREVIEW_DELAY_MS = 400  # an edit is previewed after this pause in typing
MAX_CHIPS = 6000  # tokens drawn as chips (the count covers all)
_LINE = re.compile(r"\bline (\d+)\b")

_SOURCE_WORDS = {
    P.TemplateSource.GGUF: "the GGUF's chat template",
    P.TemplateSource.OVERRIDE: "your chat template",
    P.TemplateSource.PLAIN: "no chat template (plain transcript “User: … Assistant:”)",
}


def chips_html(pieces: tuple[P.PromptPiece, ...]) -> str:
    """Token chips: alternating shades show the boundaries, special tokens purple, a line
    break drawn as ⏎ and then broken."""
    out: list[str] = []
    shades = (palette.PROMPT_TOKEN_BG, palette.CODE_BG)
    for i, p in enumerate(pieces[:MAX_CHIPS]):
        bg = (palette.SPECIAL_TOKEN_BG, palette.SPECIAL_TOKEN_BG_ALT)[i % 2] if p.special else shades[i % 2]
        text = visible_piece_html(p.text)
        tip = f"id {p.token_id}" + (" · special" if p.special else "")
        # a zero-width space after each chip: lines break between tokens, not inside one
        out.append(f"<span title='{tip}' style='background-color:{bg}; color:{palette.TEXT}'>{text}</span>&#8203;")
        if "\n" in p.text:
            out.append("<br>")
    if len(pieces) > MAX_CHIPS:
        out.append(f"<span style='color:{palette.MUTED}'> … {len(pieces) - MAX_CHIPS:,} more tokens</span>")
    return "<div style='line-height:165%; font-family:monospace'>" + "".join(out) + "</div>"


class TemplateDialog(QDialog):
    """The template view and override editor for the loaded model.

    Args:
        engine: renders prompts (:meth:`EngineClient.render_prompt`).
        settings: where overrides are kept.
        chat_messages: the shown chat's messages as the engine gets them (empty: none shown).

    Signals:
        override_changed(object): the loaded model's override was kept (its source, a ``str``) or removed (None).
    """

    override_changed = Signal(object)  # str | None

    def __init__(
        self,
        engine: EngineClient,
        settings: SettingsController,
        chat_messages: Callable[[], tuple[ChatMessage, ...]],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("templateDialog")
        self.engine = engine
        self.settings = settings
        self._chat_messages = chat_messages
        model = engine.model
        self.model_path = model.info.path if model is not None else ""
        self.gguf_template: str | None = model.chat_template if model is not None else None
        self._preview_rid: int | None = None
        self._save_rid: int | None = None
        self._save_source: str | None = None
        self.rendered: P.PromptRendered | None = None
        name = self.model_path.rsplit("/", 1)[-1] if self.model_path else "no model"
        self.setWindowTitle(f"Chat template and prompt — {name}")
        lay = QVBoxLayout(self)
        self.source_label = QLabel()
        self.source_label.setObjectName("detailLabel")
        self.source_label.setWordWrap(True)
        lay.addWidget(self.source_label)
        split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(QLabel("Chat template (Jinja2, rendered as llama-cpp-python renders it)"))
        self.editor = QPlainTextEdit()
        self.editor.setObjectName("templateEditor")
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.editor.setFont(mono)
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        ll.addWidget(self.editor, 1)
        presets = QHBoxLayout()
        presets.addWidget(QLabel("Presets:"))
        self.preset_buttons: dict[str, QPushButton] = {}
        for p in PRESETS:
            button = QPushButton(p.family.value)
            button.setObjectName(f"templatePreset_{p.family.name}")
            button.setToolTip(
                f"Put the {p.family.value} chat template in the editor ({p.models}); "
                "press “Use” to check it and keep it for this model"
            )
            button.clicked.connect(lambda _checked=False, p=p: self.fill_preset(p))
            presets.addWidget(button)
            self.preset_buttons[p.family.value] = button
        presets.addStretch(1)
        ll.addLayout(presets)
        split.addWidget(left)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        self.tokens_label = QLabel("The prompt as the model sees it")
        top.addWidget(self.tokens_label, 1)
        self.sample = QCheckBox("sample conversation")
        self.sample.setToolTip("Render a sample conversation (system, user, assistant, user) instead of this chat")
        top.addWidget(self.sample)
        rl.addLayout(top)
        self.prompt_view = QTextBrowser()
        self.prompt_view.setObjectName("renderedPrompt")
        rl.addWidget(self.prompt_view, 1)
        split.addWidget(right)
        split.setSizes([1, 1])
        lay.addWidget(split, 1)
        self.error = QLabel("")
        self.error.setObjectName("templateError")
        self.error.setWordWrap(True)
        self.error.setStyleSheet(f"color: {palette.RED}")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.error)
        buttons = QHBoxLayout()
        self.use_button = QPushButton("Use this template for this model")
        self.use_button.setToolTip("Checked on a sample conversation first; kept only if it renders")
        self.reset_button = QPushButton("Use the GGUF's template")
        close = QPushButton("Close")
        buttons.addWidget(self.use_button)
        buttons.addWidget(self.reset_button)
        buttons.addStretch(1)
        buttons.addWidget(close)
        lay.addLayout(buttons)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(PREVIEW_DELAY_MS)
        self._timer.timeout.connect(self.preview)
        self.editor.setPlainText(self.override or self.gguf_template or "")
        self.editor.textChanged.connect(self._timer.start)
        self.sample.toggled.connect(self.preview)
        self.use_button.clicked.connect(self.use_template)
        self.reset_button.clicked.connect(self.reset_template)
        close.clicked.connect(self.close)
        engine.prompt_rendered.connect(self._rendered)
        engine.prompt_render_failed.connect(self._failed)
        engine.model_loaded.connect(self._model_replaced)
        self._show_source()
        self.preview()

    # ------------------------------------------------------------------ state
    @property
    def override(self) -> str | None:
        """The kept override of the loaded model (settings), or None."""
        return self.settings.settings.chat_template_for(self.model_path) if self.model_path else None

    def candidate(self) -> str | None:
        """What the editor asks to render with: None when it holds the GGUF's template as it is
        (or is empty for a model without one), else its text."""
        text = self.editor.toPlainText()
        if text == (self.gguf_template or "") and self.override is None:
            return None
        return text

    def _show_source(self) -> None:
        if self.override is not None:
            words = "This model uses <b>your chat template</b> (kept in the settings); the GGUF's is not used."
        elif self.gguf_template:
            words = "This model uses <b>the GGUF's chat template</b>. Edit it and press “Use” to override it."
        else:
            words = (
                "This GGUF has <b>no chat template</b>: Glassbox writes a plain transcript. "
                "Pick the model family's preset (or paste its template) and press “Use” to chat in its format."
            )
        self.source_label.setText(words)
        self.reset_button.setEnabled(self.override is not None)

    # ------------------------------------------------------------------ commands
    def preview(self) -> None:
        """Render the editor's template on the shown chat (or the sample conversation)."""
        self._timer.stop()
        messages = () if self.sample.isChecked() else self._chat_messages()
        self._preview_rid = self.engine.render_prompt(tuple(messages), self.candidate())
        if self._preview_rid is None:
            self.error.setText("Load a model to see its prompt.")

    def use_template(self) -> None:
        """Validate the editor's template on the sample conversation; keep it for this model if it renders."""
        source = self.editor.toPlainText()
        if not source.strip():
            self.error.setText(
                "The template is empty; nothing was changed. “Use the GGUF's template” removes an override."
            )
            return
        self._save_source = source
        self._save_rid = self.engine.render_prompt((), source)
        if self._save_rid is None:
            self.error.setText("Load a model first; nothing was changed.")

    def fill_preset(self, preset: TemplatePreset) -> None:
        """Put ``preset``'s template in the editor: it is previewed and, on “Use”, checked like a typed one."""
        self.editor.setPlainText(preset.source)
        self.error.setText("")
        self.preview()

    def reset_template(self) -> None:
        """Remove this model's override: the GGUF's template is used again."""
        if not self.model_path:
            return
        self.settings.apply(lambda s: s.with_chat_template(self.model_path, None))
        self.editor.setPlainText(self.gguf_template or "")
        self.error.setText("")
        self._show_source()
        self.override_changed.emit(None)
        self.preview()

    # ------------------------------------------------------------------ answers
    def _rendered(self, ev: P.PromptRendered) -> None:
        if ev.request_id == self._save_rid:
            self._save_rid = None
            source = self._save_source
            if source is None or not self.model_path:
                return
            self.settings.apply(lambda s: s.with_chat_template(self.model_path, source))
            self.error.setText("")
            self._show_source()
            self.override_changed.emit(source)
            self.preview()
            return
        if ev.request_id != self._preview_rid:
            return
        self._preview_rid = None
        self.rendered = ev
        self.error.setText("")
        n_special = sum(p.special for p in ev.pieces)
        what = "a sample conversation" if ev.sample else "this chat"
        self.tokens_label.setText(
            f"{what} with {_SOURCE_WORDS[ev.source]}: {ev.n_tokens:,} tokens, {n_special:,} special (purple)"
        )
        self.prompt_view.setHtml(chips_html(ev.pieces))

    def _failed(self, ev: P.Failed) -> None:
        if ev.request_id == self._preview_rid:  # while typing: said, the cursor stays where it is
            self._preview_rid = None
            self.error.setText(ev.message)
            return
        if ev.request_id != self._save_rid:
            return
        self._save_rid = None
        self.error.setText(f"Not used, nothing was changed: {ev.message}")
        m = _LINE.search(ev.message)
        if m:
            self.go_to_line(int(m.group(1)))

    def go_to_line(self, line: int) -> None:
        """Put the editor's cursor at the start of ``line`` (1-based)."""
        block = self.editor.document().findBlockByLineNumber(max(0, line - 1))
        if block.isValid():
            cur = QTextCursor(block)
            self.editor.setTextCursor(cur)
            self.editor.centerCursor()

    def _model_replaced(self, _ev: P.ModelLoaded) -> None:
        """Another model was loaded: this dialog was about the one before; it closes."""
        self.close()

    def closeEvent(self, e: QCloseEvent) -> None:
        self._timer.stop()
        for signal, slot in (
            (self.engine.prompt_rendered, self._rendered),
            (self.engine.prompt_render_failed, self._failed),
            (self.engine.model_loaded, self._model_replaced),
        ):
            with contextlib.suppress(RuntimeError, TypeError):  # already gone with the engine
                signal.disconnect(slot)
        super().closeEvent(e)

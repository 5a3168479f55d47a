"""A logit bias set for another vocabulary: a warning, with "Clear the logit bias" offered.

A logit bias names token ids, and each is kept with the fingerprint of the vocabulary it was set
for (:mod:`app.core.sampling.bias_vocabulary`). When the loaded model's vocabulary has another
fingerprint (a model of another family loaded, or a chat opened whose bias came from one), the
bias still applies to the same ids, which are other tokens now: ``2:ban`` set on SmolLM2
(``<|im_end|>``) bans Gemma 3's ``<bos>``. The notice names the ids (and what this model's are,
when its GGUF names them: its special tokens), and offers to clear the bias or to keep it for
this model (then tied to its vocabulary). It is said once for each bias, vocabulary and model.

A bias set with no model loaded, or before Glassbox kept the fingerprint, is not tied to a
vocabulary and is not checked.
"""

from __future__ import annotations

import html
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer

from app.core.sampling.bias_vocabulary import fingerprint_size, vocabulary_fingerprint
from app.core.sampling.params import SamplerSettings
from app.ui.chat.chat_settings import ChatSettingsController
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.notices import Notices, NoticeTopic

CLEAR_LABEL = "Clear the logit bias"
KEEP_LABEL = "Keep it for this model"
IDS_NAMED = 8  # token ids named in the notice (the count covers all)


class BiasVocabularyCheck(QObject):
    """Warns when the chat's logit bias was set for another vocabulary (see the module docstring).

    Args:
        chat_settings: what applies to the chat shown (its sampler's bias; the edits offered).
        engine: the engine client (the loaded model).
        notices: where it is said.
        parent: the owner (the window).

    Attributes:
        warned: the (bias, its vocabulary, the model's vocabulary) already warned about.
    """

    def __init__(
        self,
        chat_settings: ChatSettingsController,
        engine: EngineClient,
        notices: Notices,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._chat_settings = chat_settings
        self._engine = engine
        self._notices = notices
        self.warned: set[tuple[tuple[tuple[int, float], ...], str, str]] = set()
        chat_settings.changed.connect(lambda _cs: self.check())

    def show_model(self, change: ModelChange) -> None:
        """A model loaded: check the bias against its vocabulary, once the window's other parts
        have handled the load (their notices of the model before go then)."""
        if change.phase is ModelPhase.LOADED:
            QTimer.singleShot(0, self, self.check)

    def model_vocabulary(self) -> str:
        """The loaded model's vocabulary fingerprint ("" none loaded, or unknown)."""
        model = self._engine.model
        return vocabulary_fingerprint(model.info) if model is not None and model.remote is None else ""

    def check(self) -> None:
        """Warn if the chat shown's bias was set for a vocabulary other than the loaded model's."""
        s = self._chat_settings.current.sampler
        here = self.model_vocabulary()
        if not s.logit_bias or not s.logit_bias_vocab or not here or s.logit_bias_vocab == here:
            self._notices.clear(NoticeTopic.LOGIT_BIAS)
            return
        key = (s.logit_bias, s.logit_bias_vocab, here)
        if key in self.warned:
            return
        self.warned.add(key)
        self._notices.show(
            NoticeTopic.LOGIT_BIAS,
            Severity.WARNING,
            self.describe(s, here),
            [(CLEAR_LABEL, self.clear_bias), (KEEP_LABEL, self.keep_bias)],
        )

    def describe(self, s: SamplerSettings, here: str) -> str:
        """The notice's text (rich text) for ``s``'s bias on the vocabulary ``here``."""
        ids = [tok for tok, _ in s.logit_bias]
        named = ", ".join(str(t) for t in ids[:IDS_NAMED]) + (
            f" and {len(ids) - IDS_NAMED} more" if len(ids) > IDS_NAMED else ""
        )
        before, now = fingerprint_size(s.logit_bias_vocab), fingerprint_size(here)
        sizes = f" ({before:,} tokens; this model's has {now:,})" if before and before != now else ""
        model = self._engine.model
        texts = model.info.token_texts if model is not None else {}
        known = [f"{t} is “{html.escape(texts[t])}”" for t in ids if t in texts][:IDS_NAMED]
        here_words = f" Here {', '.join(known)}." if known else ""
        return (
            f"The logit bias names token ids {named}, set for another model's vocabulary{sizes}; in this "
            f"model's those ids are other tokens, and the bias applies to them.{here_words}"
        )

    def clear_bias(self) -> None:
        """Remove the chat's logit bias (the Sampler panel follows)."""
        s = self._chat_settings.current.sampler
        self._notices.clear(NoticeTopic.LOGIT_BIAS)
        self._chat_settings.edit_sampler(replace(s, logit_bias=(), logit_bias_vocab=""))

    def keep_bias(self) -> None:
        """Keep the bias, tied from now on to the loaded model's vocabulary."""
        s = self._chat_settings.current.sampler
        here = self.model_vocabulary()
        self._notices.clear(NoticeTopic.LOGIT_BIAS)
        if here:
            self._chat_settings.edit_sampler(replace(s, logit_bias_vocab=here))

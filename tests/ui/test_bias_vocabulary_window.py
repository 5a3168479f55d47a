"""A logit bias is tied to the vocabulary it was set for: a model with another vocabulary loaded
warns, naming the ids, and offers to clear it (``2:ban`` set on one model bans another's ``<bos>``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core import protocol as P
from app.core.gguf.gguf_info import read_gguf_info
from app.core.sampling.bias_vocabulary import vocabulary_fingerprint
from app.ui.window.bias_vocabulary import CLEAR_LABEL, KEEP_LABEL
from app.ui.window.notices import NoticeTopic
from tests.support.fake_engine import reply
from tests.support.models import llama_metadata, llama_tensors, write_gguf
from tests.support.window import banner_button, capture_requests, load, send

BAN = float("-inf")


@pytest.fixture(scope="module")
def other_vocab_model(tmp_path_factory) -> Path:
    """A tiny GGUF whose vocabulary is another (100 tokens, Gemma-like specials: id 2 is ``<bos>``)."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", *(f"w{i}" for i in range(96))]
    md = llama_metadata(
        name="Other Vocab",
        file_type=3,
        extra={
            "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.bos_token_id": 2,
            "tokenizer.ggml.eos_token_id": 1,
            "tokenizer.chat_template": "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>",
        },
    )
    return write_gguf(tmp_path_factory.mktemp("vocab") / "Other-Vocab-Q4_1.gguf", md, llama_tensors(qtype="Q4_1"))


def _set_bias(qtbot, win, text: str) -> None:
    """Type ``text`` in the Sampler panel's logit bias field and press Enter, as the person does."""
    field = win.sampler_panel.bias_field
    field.clear()
    qtbot.keyClicks(field, text)
    qtbot.keyClick(field, Qt.Key.Key_Return)


def _warned(win) -> bool:
    return win.notices.showing(NoticeTopic.LOGIT_BIAS)


def test_a_bias_set_on_one_vocabulary_warns_on_another_and_can_be_cleared(qtbot, window, tiny_model, other_vocab_model):
    _set_bias(qtbot, window, "2:ban, 7:+1.5")
    sampler = window.chat_settings.current.sampler
    assert sampler.logit_bias == ((2, BAN), (7, 1.5))
    assert sampler.logit_bias_vocab == vocabulary_fingerprint(read_gguf_info(tiny_model)) != ""
    load(qtbot, window, other_vocab_model)
    qtbot.waitUntil(lambda: _warned(window), timeout=5000)
    text = window.banner.text.text()
    assert "token ids 2, 7" in text and "another model's vocabulary (80 tokens; this model's has 100)" in text
    assert "Here 2 is “&lt;bos&gt;”." in text  # what the ban hits in this model
    banner_button(window, KEEP_LABEL)  # offered beside Clear
    banner_button(window, CLEAR_LABEL).click()
    assert window.chat_settings.current.sampler.logit_bias == () and not _warned(window)
    assert window.sampler_panel.bias_field.text() == ""  # the panel follows
    assert window.settings_ctl.settings.new_chat.sampler.logit_bias == ()  # and new chats' defaults
    sent = capture_requests(window)
    window.engine.script(reply("Ok"))
    send(qtbot, window, "Hello")
    assert [r for r in sent if isinstance(r, P.Generate)][-1].sampler.logit_bias == ()


def test_kept_for_the_new_model_it_is_tied_to_its_vocabulary_and_said_once(
    qtbot, window, tiny_model, other_vocab_model
):
    _set_bias(qtbot, window, "2:ban")
    load(qtbot, window, other_vocab_model)
    qtbot.waitUntil(lambda: _warned(window), timeout=5000)
    banner_button(window, KEEP_LABEL).click()
    sampler = window.chat_settings.current.sampler
    assert sampler.logit_bias == ((2, BAN),) and not _warned(window)
    assert sampler.logit_bias_vocab == vocabulary_fingerprint(read_gguf_info(other_vocab_model))
    window.sampler_panel.set_settings(sampler)  # an unchanged field applied again keeps the tie
    _set_bias(qtbot, window, "2:ban")
    assert window.chat_settings.current.sampler.logit_bias_vocab == sampler.logit_bias_vocab
    load(qtbot, window, other_vocab_model)  # the same vocabulary: nothing to say
    window.bias_vocabulary.check()  # what the load's deferred check does
    assert not _warned(window)


def test_a_model_with_the_same_vocabulary_says_nothing(qtbot, window, tiny_model, tmp_path):
    twin = shutil.copy(tiny_model, tmp_path / "Tiny-Twin-Q4_1.gguf")
    _set_bias(qtbot, window, "2:ban")
    load(qtbot, window, twin)
    window.bias_vocabulary.check()  # what the load's deferred check does
    assert not _warned(window)
    assert window.chat_settings.current.sampler.logit_bias == ((2, BAN),)

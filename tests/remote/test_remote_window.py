"""The window with a real llama-server as its engine: chosen in the Models page's Remote tab.

What the person sees: the Test connection button's answer, the greedy reply equal to the server's own,
the Stats panel's figures from the server's timings (and "not reported" where it has none), the reply's
provenance naming the server, Stop.
"""

from __future__ import annotations

import time
from dataclasses import replace

import openai
import pytest
from PySide6.QtCore import Qt

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.remote import NOT_REPORTED, ServerKind
from app.ui.engine.client import EngineState
from tests.support.servers import API_KEY, SERVER_N_CTX
from tests.support.window import close_window, open_window, reply_over, send

TIMEOUT_MS = 60_000
QUESTION = "Which planet is known as the red planet?"


def use_server(qtbot, win, server, key: str = API_KEY) -> P.ModelLoaded:
    """Enter the server in the Remote tab and press Use this server, as the person does."""
    tab = win.models.remote_tab
    tab.url_field.setText(server.base_url)
    tab.key_field.setText(key)
    with qtbot.waitSignal(win.engine.model_loaded, timeout=TIMEOUT_MS) as blocker:
        qtbot.mouseClick(tab.use_button, Qt.MouseButton.LeftButton)
    assert win.engine.state == EngineState.READY
    return blocker.args[0]


@pytest.fixture
def window(qtbot):
    win = open_window(qtbot)
    panel = win.sampler_panel
    greedy = replace(panel.settings(), temperature=0.0, repeat_penalty=1.0, max_tokens=48, seed=42)
    panel.set_settings(greedy, emit=True)
    yield win
    close_window(win)


def test_test_connection_says_what_answered_and_what_went_wrong(qtbot, window, llama_server) -> None:
    tab = window.models.remote_tab
    tab.url_field.setText(f"127.0.0.1:{llama_server.port}")  # no scheme, no /v1: both added
    tab.key_field.setText("wrong")
    with qtbot.waitSignal(tab.tested, timeout=TIMEOUT_MS) as blocker:
        assert tab.test_connection()
    assert "refused the API key" in tab.status.text() and tab.status.text().startswith("✕")
    assert "wrong" not in tab.status.text()
    tab.key_field.setText(API_KEY)
    with qtbot.waitSignal(tab.tested, timeout=TIMEOUT_MS) as blocker:
        assert tab.test_connection()
    facts = blocker.args[0]
    assert facts.kind is ServerKind.LLAMA_SERVER
    assert tab.status.text().startswith("✓ llama.cpp's llama-server answers at " + llama_server.base_url)
    assert f"n_ctx {SERVER_N_CTX:,}" in tab.status.text()
    assert tab.model_box.currentText() == facts.model
    # What was entered is kept, the key as the Hub token is (settings.json).
    assert window.settings.remote.url == f"127.0.0.1:{llama_server.port}"
    assert window.settings.remote.api_key == API_KEY


def test_a_greedy_reply_through_the_window_equals_the_servers_own(qtbot, window, llama_server) -> None:
    prompts: list[P.PromptPrepared] = []
    window.engine.prompt_prepared.connect(prompts.append)
    loaded = use_server(qtbot, window, llama_server)
    assert loaded.remote is not None and window.engine.remote is not None
    assert "(remote)" in window.top_bar.model_button.accessibleName()
    assert window.engine.pid is None  # no engine process: the server is the engine
    fin = send(qtbot, window, QUESTION, TIMEOUT_MS)
    client = openai.OpenAI(base_url=llama_server.base_url, api_key=API_KEY)
    direct = client.chat.completions.create(
        model=loaded.remote.model,
        messages=[{"role": "system", "content": window.settings.system_prompt}, {"role": "user", "content": QUESTION}],
        temperature=0, max_tokens=48, seed=42, extra_body={"repeat_penalty": 1.0},
    )  # fmt: skip
    assert fin.text == direct.choices[0].message.content
    assert window.chat_view.messages[-1].text == fin.text
    s = fin.stats
    assert s.generated_tokens == direct.usage.completion_tokens and s.prompt_tokens == direct.usage.prompt_tokens
    assert prompts[-1].prompt_tokens == s.prompt_tokens  # /tokenize: the Tokens panel's prompt tokens
    # The Stats panel shows the server's figures, and says what it does not report.
    panel = window.stats_panel
    qtbot.waitUntil(lambda: panel.phase.text().startswith("✓ Done"), timeout=TIMEOUT_MS)
    assert panel.tiles["prefill"][1].text().startswith(f"{s.evaluated_tokens:,} tokens in")
    assert panel.tiles["tokens"][0].text() == f"{s.prompt_tokens:,} → {s.generated_tokens:,}"
    assert NOT_REPORTED in panel.kv_label.text()
    assert f"/ {SERVER_N_CTX:,} tokens" in panel.ctx_label.text()
    # Provenance: the stored reply names the server that made it.
    conv = window.chat.conversation_id
    reply = window.conversations.active_path(conv)[-1]
    assert reply.meta.endpoint == llama_server.base_url
    assert reply.meta.engine.startswith("llama-server") and llama_server.base_url in reply.meta.engine
    assert reply.meta.stats is not None and reply.meta.stats.generated_tokens == s.generated_tokens
    assert f"remote 127.0.0.1:{llama_server.port}" in reply.meta.stats_line()


@pytest.mark.timing
def test_stop_in_the_window_ends_a_remote_reply_within_a_second(qtbot, window, llama_server) -> None:
    use_server(qtbot, window, llama_server)
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), max_tokens=1500), emit=True)
    box = window.composer.box
    box.setFocus()
    qtbot.keyClicks(box, "Count from 1 to 500, one number per line.")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(window.turn.tokens) >= 8, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(window.engine.generation_finished, timeout=TIMEOUT_MS) as blocker:
        t0 = time.monotonic()
        window.chat.stop()
    assert time.monotonic() - t0 < 1.0
    fin = blocker.args[0]
    assert fin.stats.stop_reason is StopReason.CANCELLED
    qtbot.waitUntil(lambda: reply_over(window), timeout=TIMEOUT_MS)
    assert window.engine.state == EngineState.READY


def test_going_back_to_a_local_model_leaves_the_server(qtbot, window, llama_server, smollm2) -> None:
    use_server(qtbot, window, llama_server)
    with qtbot.waitSignal(window.engine.model_loaded, timeout=TIMEOUT_MS) as blocker:
        assert window.load_model(str(smollm2))
    loaded = blocker.args[0]
    assert loaded.remote is None and window.engine.remote is None
    assert window.engine.pid is not None  # a local engine process again
    fin = send(qtbot, window, QUESTION, TIMEOUT_MS)
    assert fin.stats.unreported == ()
    reply = window.conversations.active_path(window.chat.conversation_id)[-1]
    assert reply.meta.endpoint == "" and reply.meta.engine.startswith("llama-cpp-python")

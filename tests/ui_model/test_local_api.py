"""The local OpenAI-compatible API against the window with the real engine and SmolLM2.

A real client (the official ``openai`` package; a raw socket where a test must close the
connection itself) talks to the server the window runs. Client calls run in worker threads
while the Qt event loop turns: the engine's one owner lives in the UI thread.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import socket
import time
from dataclasses import replace

import openai
import pytest

from app.core.chat.context import StopReason
from app.core.server_settings import BusyPolicy
from app.ui.server.request_log import RequestStatus
from tests.support.local_api import open_client, serve, wait
from tests.support.window import REPLY_TIMEOUT_MS, send, short_replies

MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"  # SmolLM2 goes on counting: a long greedy completion


def one_at_a_time(win):
    """API requests one at a time in the chat context (the Server panel's parallel sequences at 1),
    the server left running at its address."""
    url = win.server.url
    win.settings_ctl.update(server=replace(win.settings_ctl.settings.server, parallel=1))
    assert win.engine.api.parallel == 1 and win.server.url == url


_opened: list[openai.OpenAI] = []


def client(url, key) -> openai.OpenAI:
    """An OpenAI client for the window's server (closed when the test ends: the ``bg`` fixture)."""
    c = open_client(url, key)
    _opened.append(c)
    return c


@pytest.fixture(autouse=True)
def bg():
    """Run client calls in threads; all of them have ended, and every client is closed, when the test ends."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
    yield pool
    pool.shutdown(wait=True)
    while _opened:
        _opened.pop().close()


@pytest.fixture
def api(window):
    url, key = serve(window)
    yield window, client(url, key)
    window.server.switch(False)
    assert not window.server.running


def chat(c, text, **kw):
    kw.setdefault("max_tokens", 8)
    kw.setdefault("temperature", 0)
    return c.chat.completions.create(model="any", messages=[{"role": "user", "content": text}], **kw)


def test_off_by_default_then_loopback_with_a_key(window):
    assert not window.server.running and window.server.url is None
    assert not window.settings_ctl.settings.server.enabled
    url, key = serve(window)
    assert url.startswith("http://127.0.0.1:") and key.startswith("gb-") and len(key) > 30
    window.server.switch(False)
    assert window.server.url is None


def test_models_and_chat_not_streamed(qtbot, api, bg):
    win, c = api
    models = wait(qtbot, bg.submit(c.models.list))
    assert [m.id for m in models.data] == [MODEL_ID]
    r = wait(qtbot, bg.submit(chat, c, "Say hello."))
    msg = r.choices[0].message
    assert msg.role == "assistant" and msg.content and r.model == MODEL_ID
    assert r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 8 and r.usage.prompt_tokens > 5
    t = r.model_extra["timings"]
    assert t["prompt_n"] + t["cache_n"] == r.usage.prompt_tokens and t["predicted_n"] == r.usage.completion_tokens
    assert t["prompt_ms"] > 0 and t["prompt_per_second"] > 0 and t["ttft_ms"] > 0
    # The Server panel's log has it with its figures and its conversation; the person's chats do not.
    entry = win.server.entries[-1]
    assert entry.status is RequestStatus.DONE and entry.stats.generated_tokens == r.usage.completion_tokens
    assert entry.messages[-1].content == "Say hello." and entry.reply == msg.content
    assert "Say hello." in win.server_panel.conversation.toPlainText() or win.server_panel.table.rowCount() == 1
    assert all(not win.conversations.chat_history(conv.id) for conv in win.conversations.list_conversations())


def test_chat_streamed_with_usage_same_text_as_not_streamed(qtbot, api, bg):
    """One request at a time: the second request evaluates only the prompt's last token again (the KV cache
    holds the first's), as the first did not; with parallel sequences the batch shapes differ more, and
    llama.cpp's logits are not bit-identical across batch shapes (llama-server's ``cache_prompt`` caveat),
    so a near-tie can turn: tests/ui_model/test_local_api_parallel.py compares those under the near-tie rule."""
    win, c = api
    one_at_a_time(win)
    whole = wait(qtbot, bg.submit(chat, c, "Name three colours.", max_tokens=12))

    def streamed():
        return list(chat(c, "Name three colours.", max_tokens=12, stream=True, stream_options={"include_usage": True}))

    chunks = wait(qtbot, bg.submit(streamed))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole.choices[0].message.content  # greedy: the same reply
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].model_extra["timings"]["predicted_n"] == whole.usage.completion_tokens
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert len({ch.id for ch in chunks}) == 1


def test_completions_stop_and_max_tokens(qtbot, api, bg):
    win, c = api
    r = wait(qtbot, bg.submit(c.completions.create, model="m", prompt=COUNTING, max_tokens=3, temperature=0))
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"
    assert win.server.entries[-1].stats.stop_reason is StopReason.MAX_TOKENS
    r = wait(
        qtbot, bg.submit(c.completions.create, model="m", prompt=COUNTING, max_tokens=30, temperature=0, stop=["15"])
    )
    text = r.choices[0].text
    assert r.choices[0].finish_reason == "stop" and "15" not in text and "14" in text
    assert win.server.entries[-1].stats.stop_reason is StopReason.STOP_STRING
    # streamed, the stop string is held back and never sent
    chunks = wait(
        qtbot,
        bg.submit(
            lambda: list(
                c.completions.create(model="m", prompt=COUNTING, max_tokens=30, temperature=0, stop=["15"], stream=True)
            )
        ),
    )
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == text


def test_logprobs(qtbot, api, bg):
    _win, c = api
    r = wait(qtbot, bg.submit(chat, c, "Say hello.", max_tokens=6, logprobs=True, top_logprobs=3))
    content = r.choices[0].logprobs.content
    assert 0 < len(content) <= r.usage.completion_tokens
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert len(t.top_logprobs) == 3 and t.logprob <= 0
        best = t.top_logprobs[0]
        assert best.token == t.token and math.isclose(best.logprob, t.logprob, abs_tol=1e-3)  # greedy: the top one
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob
        assert bytes(t.bytes) == t.token.encode()
    r = wait(
        qtbot, bg.submit(c.completions.create, model="m", prompt=COUNTING, max_tokens=4, temperature=0, logprobs=2)
    )
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text and len(lp.token_logprobs) == 4
    assert all(len(alts) == 2 for alts in lp.top_logprobs) and lp.text_offset[0] == 0


def test_bad_request_and_wrong_key(qtbot, api, bg):
    win, c = api
    with pytest.raises(openai.BadRequestError) as bad:
        wait(qtbot, bg.submit(chat, c, "hi", temperature=5))
    assert bad.value.status_code == 400 and "temperature" in bad.value.body["message"]
    assert bad.value.body["type"] == "invalid_request_error" and bad.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as bad:
        wait(qtbot, bg.submit(c.chat.completions.create, model="m", messages=[]))
    assert bad.value.body["param"] == "messages"
    wrong = client(win.server.url, "gb-not-the-key")
    with pytest.raises(openai.AuthenticationError) as denied:
        wait(qtbot, bg.submit(chat, wrong, "hi"))
    assert denied.value.status_code == 401 and denied.value.body["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        wait(qtbot, bg.submit(wrong.models.list))


def _raw_post(url: str, key: str, body: dict) -> socket.socket:
    """Send a POST on a raw socket and return it (the caller closes it to hang up)."""
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    path = "/v1/completions"
    data = json.dumps(body).encode()
    s = socket.create_connection((host, int(port)))
    s.sendall(
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return s


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.timing
def test_closing_the_connection_cancels_the_generation(qtbot, window, stream):
    url, key = serve(window)
    s = _raw_post(url, key, {"prompt": COUNTING, "max_tokens": 2000, "temperature": 0, "stream": stream})
    try:
        qtbot.waitUntil(
            lambda: bool(window.server.entries) and window.server.entries[-1].status is RequestStatus.RUNNING
        )
        qtbot.waitUntil(lambda: len(window.server.entries[-1].reply) > 10, timeout=20_000)
    finally:
        s.close()
    t0 = time.monotonic()
    qtbot.waitUntil(lambda: window.server.entries[-1].status is RequestStatus.CANCELLED, timeout=10_000)
    assert time.monotonic() - t0 < 5
    entry = window.server.entries[-1]
    assert entry.stats.stop_reason is StopReason.CANCELLED and entry.stats.generated_tokens < 2000
    assert window.engine.api.in_flight is None
    window.server.switch(False)


def test_two_clients_at_once_get_their_own_replies(qtbot, api, bg):
    """One request at a time (the same greedy texts exactly); with parallel sequences:
    tests/ui_model/test_local_api_parallel.py (near-ties may turn across batch shapes)."""
    win, c = api
    one_at_a_time(win)
    prompts = ["Say the word apple.", "Count to three."]
    alone = [wait(qtbot, bg.submit(chat, c, p, max_tokens=10)).choices[0].message.content for p in prompts]
    futs = [bg.submit(chat, client(c.base_url, c.api_key), p, max_tokens=10) for p in prompts]
    together = [wait(qtbot, f).choices[0].message.content for f in futs]
    assert together == alone and alone[0] != alone[1]


def test_a_request_while_the_person_chats_waits_and_keeps_their_conversation(qtbot, api, bg):
    """The API request waits for the person's reply, then runs; the person's next turn is the one
    it would have been without the API request (same text, same tokens, the same KV cache reused,
    the same greedy reply); a queued request can be cancelled from the window. One request at a time
    (parallel sequences 1: the chat context's path; tests/ui_model/test_local_api_parallel.py has N = 4)."""
    win, c = api
    one_at_a_time(win)
    greedy = replace(win.sampler_panel.settings(), temperature=0.0)
    win.sampler_panel.set_settings(greedy, emit=True)
    prepared = []
    win.engine.prompt_prepared.connect(prepared.append)

    # Reference: the person's two turns with nothing in between.
    send(qtbot, win, "Tell me about cats.")
    ref = send(qtbot, win, "And dogs?")
    ref_prompt = prepared[-1]
    win.new_chat()
    qtbot.waitUntil(lambda: not win.engine.generating)

    # The same two turns with API requests arriving while the first reply is written.
    box = win.composer.box
    box.setFocus()
    qtbot.keyClicks(box, "Tell me about cats.")
    from PySide6.QtCore import Qt

    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert win.engine.generating
    first = bg.submit(chat, c, "Say hello.", max_tokens=6)
    second = bg.submit(chat, client(c.base_url, c.api_key), "Say goodbye.", max_tokens=6)
    qtbot.waitUntil(lambda: len(win.engine.api.waiting) == 2, timeout=10_000)
    assert win.engine.api.in_flight is None  # the person's reply is in the engine; the API waits
    assert "2 waiting" in win.server_panel.queue.text()
    assert all(e.status is RequestStatus.QUEUED for e in win.server.entries[-2:])
    # cancel the second from the window (the two threads' requests may reach the server in either order)
    goodbye = next(e.job_id for e in win.server.entries if e.messages[-1].content == "Say goodbye.")
    win.server_panel.table.selectRow(win.server_panel._row_of(goodbye))
    assert win.server_panel.cancel.isEnabled()
    win.server_panel.cancel.click()
    with pytest.raises(openai.InternalServerError) as cancelled:
        wait(qtbot, second)
    assert cancelled.value.status_code == 503 and cancelled.value.body["code"] == "cancelled"
    r = wait(qtbot, first)
    assert r.choices[0].message.content and r.model_extra["timings"]["queued_ms"] > 0
    qtbot.waitUntil(lambda: not win.engine.generating, timeout=REPLY_TIMEOUT_MS)
    after = send(qtbot, win, "And dogs?")
    after_prompt = prepared[-1]
    assert after_prompt.prompt_text == ref_prompt.prompt_text
    assert after_prompt.prompt_tokens == ref_prompt.prompt_tokens
    # the person's KV cache was put back after the API request: nothing to evaluate again
    assert after_prompt.cached_tokens == ref_prompt.cached_tokens > 0
    assert after.stats.evaluated_tokens == ref.stats.evaluated_tokens
    assert after.text == ref.text
    # the stored conversation holds the person's turns only
    conv_id = win.chat.conversation_id
    assert [m.content for m in win.conversations.chat_history(conv_id) if m.role.value == "user"] == [
        "Tell me about cats.",
        "And dogs?",
    ]
    print(
        f"\nre-prefill after an API request: {after.stats.evaluated_tokens} tokens in "
        f"{after.stats.prefill_s * 1000:.0f} ms (without: {ref.stats.evaluated_tokens} tokens in "
        f"{ref.stats.prefill_s * 1000:.0f} ms)"
    )


def test_refuse_while_the_person_chats(qtbot, window, bg):
    url, key = serve(window, busy_policy=BusyPolicy.REFUSE)
    short_replies(window)
    box = window.composer.box
    box.setFocus()
    qtbot.keyClicks(box, "Tell me about cats.")
    from PySide6.QtCore import Qt

    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert window.engine.generating
    with pytest.raises(openai.InternalServerError) as refused:
        wait(qtbot, bg.submit(chat, client(url, key), "hi"))
    assert refused.value.status_code == 503 and refused.value.body["code"] == "busy"
    assert "refuse" in refused.value.body["message"]
    qtbot.waitUntil(lambda: not window.engine.generating, timeout=REPLY_TIMEOUT_MS)
    r = wait(qtbot, bg.submit(chat, client(url, key), "hi"))
    assert r.choices[0].message.content
    window.server.switch(False)


def test_the_persons_reply_waits_for_an_api_request_in_flight_and_stop_ends_it_alone(qtbot, api, bg):
    """The person sends while an API request is in the engine: their reply goes next (before
    queued API requests); Stop before it starts ends only it, and the engine is not restarted.
    One request at a time (parallel sequences 1)."""
    from PySide6.QtCore import Qt

    win, c = api
    one_at_a_time(win)
    pid = win.engine.pid
    long = bg.submit(c.completions.create, model="m", prompt=COUNTING, max_tokens=60, temperature=0)
    qtbot.waitUntil(lambda: win.engine.api.in_flight is not None, timeout=10_000)
    queued = bg.submit(chat, client(c.base_url, c.api_key), "Say hello.", max_tokens=4)
    qtbot.waitUntil(lambda: len(win.engine.api.waiting) == 1, timeout=10_000)
    box = win.composer.box
    box.setFocus()
    qtbot.keyClicks(box, "Hello?")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert win.engine.generating and win.composer.button.text() != "Send"
    finished = []
    win.engine.generation_finished.connect(finished.append)
    win.chat.stop()  # before the person's reply has reached the engine
    r = wait(qtbot, long)
    assert r.usage.completion_tokens == 60 and r.choices[0].finish_reason == "length"  # not stopped by the Stop
    qtbot.waitUntil(lambda: bool(finished), timeout=10_000)
    assert finished[0].stats.stop_reason is StopReason.CANCELLED and finished[0].stats.generated_tokens == 0
    assert wait(qtbot, queued).choices[0].message.content  # then the queued API request runs
    assert win.engine.pid == pid and not win.engine.generating

"""``POST /v1/embeddings`` against the window with the real engine, on SmolLM2 and Gemma 3 (issue 23 §3).

The official ``openai`` client talks to the server the window runs (client calls in worker threads
while the Qt event loop turns, as in :mod:`tests.ui_model.test_local_api`).
"""

from __future__ import annotations

import base64
from dataclasses import replace

import numpy as np
import openai
import pytest

from app.ui.server.panel import entry_cells
from app.ui.server.request_log import RequestStatus
from tests.support.local_api import (  # noqa: F401 - the fixtures api, bg and window_model
    api_fixture,
    bg_fixture,
    smollm2_only,
    wait,
    window_model_fixture,
)
from tests.support.window import send

N_EMBD = {"SmolLM2-135M-Instruct.Q4_1": 576, "gemma-3-270m-q4_k_m": 640}


def vectors(resp) -> np.ndarray:
    return np.array([d.embedding for d in sorted(resp.data, key=lambda d: d.index)], dtype=np.float32)


def test_shapes_usage_batch_formats_and_meaning(qtbot, api, bg):
    win, c = api
    model_id = win.server.model().id
    n_embd = N_EMBD[model_id]
    texts = [
        "The cat sat on the mat.",
        "A cat was sitting on the rug.",
        "Quarterly revenue rose by four percent.",
        "How do I bake bread at home?",
        "What is a good recipe for homemade bread?",
        "The central bank raised interest rates again.",
    ]
    floats = wait(qtbot, bg.submit(c.embeddings.create, model="any", input=texts, encoding_format="float"))
    v = vectors(floats)
    assert floats.model == model_id and floats.object == "list"
    assert [d.index for d in floats.data] == list(range(len(texts))) and v.shape == (len(texts), n_embd)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)  # L2-normalized, as OpenAI's
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > len(texts) * 5
    extra = floats.model_extra["glassbox"]
    assert extra["pooling"] == "mean" and extra["pooling_from_model"] is False and extra["n_embd"] == n_embd

    # The openai package's default (base64, decoded by the client) and explicit base64 give the same numbers.
    default = wait(qtbot, bg.submit(c.embeddings.create, model="any", input=texts))
    assert np.allclose(vectors(default), v, atol=1e-6)
    raw = wait(qtbot, bg.submit(c.embeddings.create, model="any", input=texts[:2], encoding_format="base64"))
    decoded = np.stack([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in raw.data])
    assert np.allclose(decoded, v[:2], atol=1e-6)

    # One input alone: the same vector as in the batch; its usage is its own tokens.
    one = wait(qtbot, bg.submit(c.embeddings.create, model="any", input=texts[1], encoding_format="float"))
    assert len(one.data) == 1 and np.allclose(vectors(one)[0], v[1], atol=1e-4)
    assert 5 < one.usage.prompt_tokens < floats.usage.prompt_tokens

    # Token ids are embedded as they are.
    ids = [1, 504, 2365, 3174, 335, 260, 2327, 30]
    by_ids = wait(qtbot, bg.submit(c.embeddings.create, model="any", input=[ids, ids[:4]], encoding_format="float"))
    assert by_ids.usage.prompt_tokens == len(ids) + 4 and vectors(by_ids).shape == (2, n_embd)

    # Meaning: each sentence is nearer (cosine) to its paraphrase than to any unrelated sentence.
    cos = v @ v.T
    for a, para in ((0, 1), (3, 4), (2, 5)):
        others = [j for j in range(len(texts)) if j not in (a, para)]
        assert cos[a, para] > max(cos[a, j] for j in others), (a, cos.round(3))

    entry = win.server.entries[-1]
    assert entry.endpoint == "embeddings" and entry.status is RequestStatus.DONE
    assert f"2 vectors of {n_embd} values" in entry.reply and "the model declares none" in entry.reply
    assert entry_cells(entry)[2:4] == ("embeddings", "done")
    assert entry.transcript.startswith("[inputs]\n⟨8 token ids⟩\n⟨4 token ids⟩\n\n[embeddings]\n2 vectors")
    assert entry_cells(entry)[-1] == f"{by_ids.usage.prompt_tokens} / 0"  # the Server panel's tokens in/out


@smollm2_only
def test_bad_requests_get_a_400_naming_the_field(qtbot, api, bg):
    win, c = api
    n_ctx = win.server.model().n_ctx

    def refused(**kw):
        with pytest.raises(openai.BadRequestError) as bad:
            c.embeddings.create(model="any", **{"encoding_format": "float", **kw})
        return bad.value

    err = wait(qtbot, bg.submit(refused, input="hello", dimensions=64))
    assert err.status_code == 400 and err.body["param"] == "dimensions" and "576" in err.body["message"]
    ok = wait(
        qtbot, bg.submit(c.embeddings.create, model="any", input="hello", dimensions=576, encoding_format="float")
    )
    assert len(ok.data[0].embedding) == 576

    err = wait(qtbot, bg.submit(refused, input=["fine", " word" * (n_ctx + 8)]))
    assert err.status_code == 400 and "input[1]" in err.body["message"] and f"{n_ctx:,}" in err.body["message"]
    assert err.body["code"] == "context_overflow"

    for kw, param in (
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({"input": [{"text": "x"}]}, "input"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
    ):
        err = wait(qtbot, bg.submit(refused, **kw))
        assert err.status_code == 400 and err.body["param"] == param, (kw, err.body)

    err = wait(qtbot, bg.submit(refused, input=[[1, 2, 10**9]]))
    assert "10000000" in err.body["message"] and "vocabulary" in err.body["message"]

    bad_key = openai.OpenAI(base_url=c.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_key.embeddings.create(model="any", input="hello")
    bad_key.close()
    # The engine lives on: a good request after the bad ones is answered.
    again = wait(qtbot, bg.submit(c.embeddings.create, model="any", input="hello", encoding_format="float"))
    assert np.allclose(vectors(again)[0], vectors(ok)[0], atol=1e-6)


@smollm2_only
def test_embeddings_leave_the_chat_and_its_kv_cache_alone(qtbot, api, bg):
    """Embeddings run in a context of their own, even while the person's reply is written: the
    person's next turn reuses the KV cache of their first turn as if nothing had happened."""
    win, c = api
    win.sampler_panel.set_settings(replace(win.sampler_panel.settings(), max_tokens=12), emit=True)
    prepared = []
    win.engine.prompt_prepared.connect(prepared.append)
    first_reply = send(qtbot, win, "Tell me about cats.")
    first = prepared[-1]
    done = wait(qtbot, bg.submit(c.embeddings.create, model="any", input=["cats", "dogs"] * 8))
    assert len(done.data) == 16
    send(qtbot, win, "And dogs?")
    second = prepared[-1]
    # The whole first turn (prompt and reply, less the tokens the template re-renders) is reused.
    assert second.cached_tokens >= first.prompt_tokens, (first, second)
    assert first_reply


@smollm2_only
def test_the_server_panel_cancels_a_running_embeddings_request(qtbot, api, bg):
    win, c = api
    long_inputs = [f"{k}. " + "the river runs past the mill " * 60 for k in range(40)]  # many seconds of work
    fut = bg.submit(c.embeddings.create, model="any", input=long_inputs)
    qtbot.waitUntil(lambda: bool(win.server.entries) and win.server.entries[-1].status is RequestStatus.RUNNING)
    win.server_panel.table.selectRow(0)  # newest first
    assert win.server_panel.cancel.isEnabled()
    win.server_panel.cancel.click()
    qtbot.waitUntil(fut.done, timeout=5_000)  # not the whole request's time
    with pytest.raises(openai.InternalServerError) as cancelled:
        fut.result()
    assert cancelled.value.status_code == 503 and cancelled.value.body["code"] == "cancelled"
    assert "Server panel" in cancelled.value.body["message"] and "went away" not in cancelled.value.body["message"]
    assert win.server.entries[-1].status is RequestStatus.CANCELLED
    again = wait(qtbot, bg.submit(c.embeddings.create, model="any", input="hello", encoding_format="float"))
    assert len(again.data) == 1

"""``Embed`` in the real engine process (app/engine/embeddings.py): beside a reply in flight on SmolLM2,
and a model that declares its pooling (a tiny GGUF with ``llama.pooling_type``)."""

from __future__ import annotations

import time

import numpy as np

from app.core import protocol as P
from app.core.chat.context import ChatMessage, Role
from app.core.sampling.params import SamplerSettings
from tests.support.engine import start_engine
from tests.support.models import write_tiny_model

TEXTS = ("The cat sat on the mat.", "Interest rates rose again.")


def vectors(ev: P.Embedded) -> np.ndarray:
    return np.frombuffer(ev.vectors, dtype="<f4").reshape(len(ev.token_counts), ev.n_embd)


def test_embeddings_are_answered_while_a_reply_streams_and_do_not_change_it(engine):
    host = engine.host
    alone = host.request(P.Embed(host.next_id(), TEXTS, 4096))
    assert isinstance(alone, P.Embedded) and alone.pooling is P.Pooling.MEAN and not alone.model_pooling
    greedy = SamplerSettings(temperature=0.0, max_tokens=64)
    msgs = (ChatMessage(Role.USER, "Count from 1 to 100, separated by commas."),)
    ref = engine.generate(msgs, temperature=0.0, max_tokens=64)
    assert isinstance(ref, P.Finished)

    host.clear_cancel()
    gen_id, embed_id = host.next_id(), host.next_id()
    host.send(P.Generate(gen_id, msgs, greedy))
    order: list[object] = []
    while not order or not isinstance(order[-1], P.TokenBatch):  # the reply is decoding
        order.append(host.recv_raw(60))
    host.send(P.Embed(embed_id, TEXTS, 4096))
    ends: dict[int, object] = {}
    while len(ends) < 2:
        ev = host.recv_raw(60)
        if isinstance(ev, P.TERMINAL_EVENTS):
            ends[ev.request_id] = ev
    first, *_ = ends
    assert first == embed_id, "the embeddings waited for the reply instead of running beside it"
    beside = ends[embed_id]
    assert isinstance(beside, P.Embedded) and np.allclose(vectors(beside), vectors(alone), atol=1e-6)
    assert isinstance(ends[gen_id], P.Finished) and ends[gen_id].text == ref.text  # the reply is the same


def test_a_cancelled_request_ends_at_once_and_the_next_is_answered(engine):
    host = engine.host
    slow_id, next_id = host.next_id(), host.next_id()
    long_inputs = tuple(f"{k}. " + "the river runs past the mill " * 60 for k in range(40))  # ~14k tokens, many s
    t0 = time.monotonic()
    host.send(P.Embed(slow_id, long_inputs, 4096))  # the cancel comes while it is tokenized or evaluated
    host.send(P.CancelEmbed(slow_id))
    ev = host.recv_raw(60)
    assert isinstance(ev, P.Failed) and ev.request_id == slow_id and ev.kind is P.FailureKind.CANCELLED
    assert time.monotonic() - t0 < 3, "the cancel waited for the whole request"
    assert "client went away" in ev.message
    after = host.request(P.Embed(next_id, TEXTS, 4096))
    assert isinstance(after, P.Embedded) and len(after.token_counts) == 2


def test_a_model_that_declares_its_pooling_gets_it_and_a_reranker_is_refused(tmp_path):
    merges = {"tokenizer.ggml.merges": ["t 0"], "llama.attention.layer_norm_rms_epsilon": 1e-5}
    last = write_tiny_model(tmp_path / "last.gguf", extra={**merges, "llama.pooling_type": 3})
    eng = start_engine(last, n_ctx=256)
    try:
        ev = eng.host.request(P.Embed(eng.host.next_id(), ((1, 2, 3), (4, 5)), 256))
        assert isinstance(ev, P.Embedded), getattr(ev, "message", ev)
        assert ev.pooling is P.Pooling.LAST and ev.model_pooling and ev.token_counts == (3, 2) and ev.n_embd == 64
        over = eng.host.request(P.Embed(eng.host.next_id(), (tuple(range(1, 60)),), 32))
        assert (
            isinstance(over, P.Failed) and over.kind is P.FailureKind.CONTEXT_OVERFLOW and "limit of 32" in over.message
        )
        rank = write_tiny_model(tmp_path / "rank.gguf", extra={**merges, "llama.pooling_type": 4})
        assert isinstance(eng.load(rank, n_ctx=256), P.ModelLoaded)
        refused = eng.host.request(P.Embed(eng.host.next_id(), ((1, 2),), 256))
        assert isinstance(refused, P.Failed) and refused.kind is P.FailureKind.BAD_SETTINGS
        assert "reranker" in refused.message
    finally:
        eng.host.stop()

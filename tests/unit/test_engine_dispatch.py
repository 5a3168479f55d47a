"""The engine child's dispatch (app/engine/child.py): the request-type tables, the threads requests go to, and
how answers and failures come back; on a recording session and on a real Session with no model (no model file)."""

from __future__ import annotations

import queue
import typing

import pytest

from app.core import protocol as P
from app.core.chat.context import ChatMessage, LoadSettings
from app.core.sampling.alternatives import StoredStep
from app.core.sampling.params import SamplerSettings
from app.engine import child
from app.engine.errors import EngineError
from app.engine.llama_log import LlamaLog
from app.engine.session import Session

USER = (ChatMessage("user", "Hi"),)


class _Recording:
    """A session that answers each call with what was called and on which request."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def _answer(self, name: str, req: object) -> tuple[str, object]:
        self.calls.append((name, req))
        return (name, req)

    def load(self, req):
        return self._answer("load", req)

    def generate(self, req):
        return self._answer("generate", req)

    def funnel(self, req):
        return self._answer("funnel", req)

    def render_prompt(self, req):
        return self._answer("render_prompt", req)

    def count_prompt(self, req):
        return self._answer("count_prompt", req)

    def inspect_token(self, req):
        return self._answer("inspect_token", req)

    def prepare_inspect(self):
        self.calls.append(("prepare_inspect", None))

    def reset(self):
        self.calls.append(("reset", None))


class _Never:
    def is_set(self) -> bool:
        return False


REQUESTS: list[tuple[object, str]] = [
    (P.LoadModel(1, "/x.gguf", LoadSettings()), "load"),
    (P.Generate(2, USER, SamplerSettings()), "generate"),
    (P.ComputeFunnel(3), "funnel"),
    (P.RenderPrompt(4), "render_prompt"),
    (P.CountPrompt(5, USER), "count_prompt"),
    (P.InspectToken(6, 0, 1), "inspect_token"),
]


def test_every_request_but_shutdown_has_a_handler():
    assert set(typing.get_args(P.Request)) - {P.Shutdown} == set(child.HANDLERS)


@pytest.mark.parametrize(("req", "method"), REQUESTS, ids=[m for _r, m in REQUESTS])
def test_a_request_runs_its_own_session_method_and_its_answer_is_emitted(req, method):
    session, sent = _Recording(), []
    child.handle(session, req, sent.append)
    assert session.calls == [(method, req)]
    assert sent == [(method, req)]


def test_reset_answers_context_reset_and_prepare_inspect_answers_nothing():
    session, sent = _Recording(), []
    child.handle(session, P.ResetContext(7), sent.append)
    child.handle(session, P.PrepareInspect(), sent.append)
    assert session.calls == [("reset", None), ("prepare_inspect", None)]
    assert sent == [P.ContextReset(7)]


def test_an_unknown_request_and_a_bug_fail_the_request_not_the_engine(monkeypatch):
    session, sent = _Recording(), []
    child.handle(session, P.Shutdown(), sent.append)  # the main loop's own: never a handler
    child.handle(session, "hello", sent.append)
    assert [(f.request_id, f.kind) for f in sent] == [(-1, P.FailureKind.INTERNAL)] * 2
    assert "does not know the request Shutdown" in sent[0].message and "str" in sent[1].message

    def broken(_session, _req):
        raise RuntimeError("boom")

    def refused(_session, _req):
        raise EngineError(P.FailureKind.TEMPLATE, "The template says no.")

    sent.clear()
    monkeypatch.setitem(child.HANDLERS, P.RenderPrompt, broken)
    monkeypatch.setitem(child.HANDLERS, P.CountPrompt, refused)
    child.handle(session, P.RenderPrompt(8), sent.append)
    child.handle(session, P.CountPrompt(9, USER), sent.append)
    assert [(f.request_id, f.kind) for f in sent] == [(8, P.FailureKind.INTERNAL), (9, P.FailureKind.TEMPLATE)]
    assert "RuntimeError: boom" in sent[0].message and sent[1].message == "The template says no."


def test_a_closed_pipe_ends_the_engine_instead_of_failing_the_request():
    def gone(_event: object) -> None:
        raise child.ParentGone()

    with pytest.raises(child.ParentGone):
        child.handle(_Recording(), P.RenderPrompt(1), gone)


class _Pipe:
    def __init__(self, requests: list[object]) -> None:
        self._requests = list(requests)

    def recv(self) -> object:
        if not self._requests:
            raise EOFError
        return self._requests.pop(0)


def _drain(q: queue.SimpleQueue[object]) -> list[object]:
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


def test_the_reader_answers_funnels_at_once_and_hands_inspections_and_embeddings_to_their_threads():
    gen, funnel, inspect, prepare, embed = (
        P.Generate(1, USER, SamplerSettings()),
        P.ComputeFunnel(2),
        P.InspectToken(3, 0, 1),
        P.PrepareInspect(),
        P.Embed(5, ("a",), 512),
    )
    session, sent = _Recording(), []
    inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
    inspections: queue.SimpleQueue[object] = queue.SimpleQueue()
    embeds: queue.SimpleQueue[object] = queue.SimpleQueue()
    child._read(
        _Pipe([gen, funnel, prepare, embed, inspect, P.ResetContext(4), P.Shutdown()]),
        session,
        sent.append,
        inbox,
        inspections,
        embeds,
    )
    assert session.calls == [("funnel", funnel)]  # the reader ran the funnel itself
    assert sent == [("funnel", funnel)]
    assert _drain(inbox) == [gen, P.ResetContext(4), P.Shutdown()]
    assert _drain(inspections) == [prepare, inspect, None]  # Shutdown ends the inspect thread too
    assert _drain(embeds) == [embed, None]  # and the embed thread


def test_a_closed_pipe_ends_every_loop():
    inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
    inspections: queue.SimpleQueue[object] = queue.SimpleQueue()
    embeds: queue.SimpleQueue[object] = queue.SimpleQueue()
    child._read(_Pipe([P.ResetContext(1)]), _Recording(), lambda _e: None, inbox, inspections, embeds)
    assert _drain(inbox) == [P.ResetContext(1), None] and _drain(inspections) == [None] and _drain(embeds) == [None]


# ------------------------------------------------------------------- a real Session, no model
@pytest.fixture
def bare():
    sent: list[object] = []
    return Session(sent.append, _Never(), LlamaLog()), sent


def test_without_a_model_each_request_says_so(bare, tmp_path):
    session, sent = bare
    for req in (
        P.Generate(1, USER, SamplerSettings()),
        P.ComputeFunnel(2),
        P.RenderPrompt(3),
        P.CountPrompt(4, USER),
        P.InspectToken(5, 0, 1),
    ):
        child.handle(session, req, sent.append)
    assert [(f.request_id, f.kind) for f in sent] == [(i, P.FailureKind.NO_MODEL) for i in range(1, 6)]
    sent.clear()
    child.handle(session, P.ResetContext(6), sent.append)
    child.handle(session, P.PrepareInspect(), sent.append)
    child.handle(session, P.LoadModel(7, str(tmp_path / "missing.gguf"), LoadSettings()), sent.append)
    assert sent[0] == P.ContextReset(6)
    assert len(sent) == 2 and (sent[1].request_id, sent[1].kind) == (7, P.FailureKind.BAD_MODEL)
    assert "missing.gguf" in sent[1].message


def _stored(ids: tuple[int, ...] = (5, 6), settings: SamplerSettings | None = None) -> StoredStep:
    return StoredStep(
        reply_id=9,
        step=3,
        ids=ids,
        logits=tuple(float(-i) for i in range(len(ids))),
        logsumexp=0.5,
        drawn=5,
        history=(1, 2),
        texts={5: "a", 6: "b"},
        settings=settings or SamplerSettings(),
        seed=42,
    )


def test_a_stored_step_is_checked_before_the_model_is_needed(bare):
    """A stored step's own faults are named first (the settings, then the candidates); a model is needed
    only to run llama.cpp's samplers on it."""
    session, sent = bare
    bad = SamplerSettings(temperature=-1.0)
    for req in (
        P.ComputeFunnel(1, stored=_stored(settings=bad)),
        P.ComputeFunnel(2, stored=_stored(), sampler=bad),
        P.ComputeFunnel(3, stored=_stored(ids=(), settings=bad)),
        P.ComputeFunnel(4, stored=_stored(ids=())),
        P.ComputeFunnel(5, stored=_stored()),
    ):
        child.handle(session, req, sent.append)
    assert [(f.request_id, f.kind) for f in sent] == [
        (1, P.FailureKind.BAD_SETTINGS),
        (2, P.FailureKind.BAD_SETTINGS),
        (3, P.FailureKind.BAD_SETTINGS),
        (4, P.FailureKind.NO_LOGITS),
        (5, P.FailureKind.NO_MODEL),
    ]
    assert "temperature" in sent[0].message and "Token 4 of the reply" in sent[3].message

"""The engine client on a scripted host, without the window: the API queue and the person's reply share
the one engine, one Generate at a time, and a death or a switch ends what was in flight exactly once."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.context import ChatMessage, LoadSettings, StopReason
from app.core.sampling.params import SamplerSettings
from app.ui.engine.client import EngineState
from tests.support.fake_engine import CrashMidReply, Endless, FakeEngine, reply
from tests.support.window import WAIT_MS

ASK = (ChatMessage("user", "Count."),)
ENDLESS = SamplerSettings(max_tokens=-1)


def _loaded(qtbot, tiny_model) -> FakeEngine:
    client = FakeEngine()
    with qtbot.waitSignal(client.model_loaded, timeout=WAIT_MS):
        client.load_model(str(tiny_model), LoadSettings())
    return client


def _api(text: str = "api") -> P.Generate:
    return P.Generate(0, (ChatMessage("user", text),), ENDLESS, external=True)


def test_the_persons_reply_waits_for_the_api_request_in_flight_and_stop_ends_it_alone(qtbot, tiny_model):
    client = _loaded(qtbot, tiny_model)
    try:
        client.script(Endless("api "), reply("mine"), Endless("second "))
        api_events: list = []
        ticket = client.api.submit(_api(), api_events.append)
        waiting: list = []
        second = client.api.submit(_api("second"), waiting.append)
        assert client.api.in_flight == ticket and client.api.waiting == (second,)
        qtbot.waitUntil(lambda: any(isinstance(e, P.TokenEvent) for e in api_events), timeout=WAIT_MS)
        assert client.state is EngineState.READY and not client.generating  # the person's chat is idle
        # The person sends: their reply goes next, ahead of the waiting API request, and is not sent yet.
        rid = client.generate(ASK, SamplerSettings())
        assert rid is not None and client.generating and client.state is EngineState.GENERATING
        assert [g.external for g in client.sent(P.Generate)] == [True]
        client.cancel()  # Stop before it was sent: it will end at once, nothing evaluated
        assert client.api.in_flight == ticket  # Stop was the person's: the API request goes on
        with qtbot.waitSignal(client.generation_finished, timeout=WAIT_MS) as mine:
            assert client.api.cancel(ticket)
        assert isinstance(api_events[-1], P.Finished) and api_events[-1].stats.stop_reason == StopReason.CANCELLED
        fin = mine.args[0]
        assert fin.request_id == rid and fin.stats.stop_reason == StopReason.CANCELLED
        assert fin.stats.generated_tokens == 0 and fin.text == ""
        # The waiting API request went in as soon as the person's reply had ended, not before.
        assert [(g.external, g.messages[0].content) for g in client.sent(P.Generate)] == [
            (True, "api"),
            (False, "Count."),
            (True, "second"),
        ]
        assert client.api.in_flight == second and client.api.waiting == ()
        assert client.api.cancel(second)
        qtbot.waitUntil(lambda: bool(waiting) and isinstance(waiting[-1], P.Finished), timeout=WAIT_MS)
        assert client.api.in_flight is None and client.state is EngineState.READY
    finally:
        client.shutdown()


def test_a_waiting_api_request_cancelled_ends_at_once(qtbot, tiny_model):
    client = _loaded(qtbot, tiny_model)
    try:
        client.script(Endless())
        first: list = []
        client.api.submit(_api(), first.append)
        later: list = []
        ticket = client.api.submit(_api("later"), later.append)
        assert client.api.cancel(ticket) and client.api.waiting == ()
        assert len(later) == 1 and isinstance(later[0], P.Failed) and later[0].kind is P.FailureKind.CANCELLED
        assert not client.api.cancel(ticket)  # it has ended
    finally:
        client.shutdown()
    assert isinstance(first[-1], P.Failed) and first[-1].kind is P.FailureKind.ENGINE


def test_a_crash_ends_the_reply_and_every_api_request_once(qtbot, tiny_model):
    client = _loaded(qtbot, tiny_model)
    try:
        client.script(CrashMidReply(("a", "b"), "The engine process was killed (SIGKILL)."))
        ended: list[int] = []
        client.generation_ended.connect(ended.append)
        rid = client.generate(ASK, SamplerSettings())
        queued: list = []
        client.api.submit(_api(), queued.append)  # waits: the person's reply is in the engine
        with qtbot.waitSignal(client.engine_crashed, timeout=WAIT_MS) as died:
            pass
        assert died.args[0] == "The engine process was killed (SIGKILL)."
        assert ended == [rid] and client.state is EngineState.DEAD and client.model is None
        assert len(queued) == 1 and isinstance(queued[0], P.Failed) and queued[0].kind is P.FailureKind.ENGINE
        assert client.generate(ASK, SamplerSettings()) is None
    finally:
        client.shutdown()
    assert ended == [rid]


def test_a_second_load_goes_to_a_fresh_host_without_a_second_engine_ready(qtbot, tiny_model):
    client = _loaded(qtbot, tiny_model)
    try:
        ready: list = []
        states: list = []
        client.engine_ready.connect(ready.append)
        client.state_changed.connect(states.append)
        client.reset_context()
        with qtbot.waitSignal(client.model_loaded, timeout=WAIT_MS):
            client.load_model(str(tiny_model), LoadSettings(n_ctx=512))
        assert client.model is not None and client.model.n_ctx == 512
        assert ready == [] and states == [EngineState.LOADING, EngineState.READY]
        fin_rid = client.generate(ASK, SamplerSettings())
        with qtbot.waitSignal(client.generation_finished, timeout=WAIT_MS) as done:
            pass
        # A fresh engine: nothing of the first one's KV cache.
        assert done.args[0].request_id == fin_rid and done.args[0].stats.cached_tokens == 0
        assert [type(r).__name__ for r in client.requests] == ["LoadModel", "ResetContext", "LoadModel", "Generate"]
    finally:
        client.shutdown()


def test_with_parallel_sequences_api_requests_go_together_and_the_persons_reply_is_not_held(qtbot, tiny_model):
    """Issue 23 §4: with N = 2, two API requests are in the engine at once (GenerateParallel), a third waits;
    the person's reply goes to the engine at once (the engine pauses the API's sequences), and cancelling
    an API request sends CancelSequence for it alone, never the shared Stop flag."""
    client = _loaded(qtbot, tiny_model)
    try:
        client.api.set_parallel(2)
        client.script(Endless("a "), Endless("b "), reply("mine"), Endless("c "))
        events: dict[str, list] = {"a": [], "b": [], "c": []}
        tickets = {k: client.api.submit(_api(k), events[k].append) for k in ("a", "b", "c")}
        sent = client.sent(P.GenerateParallel)
        assert [(g.generate.messages[0].content, g.n_seq) for g in sent] == [("a", 2), ("b", 2)]
        assert client.api.in_flight_tickets == (tickets["a"], tickets["b"]) and client.api.waiting == (tickets["c"],)
        rid = client.generate(ASK, SamplerSettings())
        assert rid is not None and [g.request_id for g in client.sent(P.Generate)] == [rid]  # sent, not held
        assert client.api.cancel(tickets["a"])
        assert [c.request_id for c in client.sent(P.CancelSequence)] == [sent[0].request_id]
        qtbot.waitUntil(lambda: bool(events["a"]) and isinstance(events["a"][-1], P.Finished), timeout=WAIT_MS)
        assert events["a"][-1].stats.stop_reason == StopReason.CANCELLED
        # its sequence is free: the waiting request goes in
        qtbot.waitUntil(lambda: len(client.sent(P.GenerateParallel)) == 3, timeout=WAIT_MS)
        for k in ("b", "c"):
            assert client.api.cancel(tickets[k])
        qtbot.waitUntil(lambda: client.api.in_flight_tickets == () and not client.generating, timeout=WAIT_MS)
    finally:
        client.shutdown()


def test_a_model_switch_stops_every_parallel_sequence_and_loads_when_they_have_ended(qtbot, tiny_model):
    client = _loaded(qtbot, tiny_model)
    try:
        client.api.set_parallel(2)
        client.script(Endless("a "), Endless("b "))
        events: dict[str, list] = {"a": [], "b": []}
        for k in events:
            client.api.submit(_api(k), events[k].append)
        sent = [g.request_id for g in client.sent(P.GenerateParallel)]
        assert len(sent) == 2
        loads_before = len(client.sent(P.LoadModel))
        with qtbot.waitSignal(client.model_loaded, timeout=WAIT_MS):
            client.load_model(str(tiny_model), LoadSettings())
            assert sorted(c.request_id for c in client.sent(P.CancelSequence)) == sorted(sent)
            assert len(client.sent(P.LoadModel)) == loads_before  # sent once they have ended
        assert all(isinstance(events[k][-1], P.Finished) for k in events)
        assert all(events[k][-1].stats.stop_reason == StopReason.CANCELLED for k in events)
        assert client.api.in_flight_tickets == () and client.state is EngineState.READY
    finally:
        client.shutdown()

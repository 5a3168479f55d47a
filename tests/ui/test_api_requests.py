"""The local API's side of the engine (app/ui/engine/api_requests.py) against a recorded door, without an
engine: what it asks of the client, in what order (the Stop flag cleared before a plain Generate, set
and watched to stop one, the person's held reply sent first), and what it never touches (a parallel
sequence is stopped by CancelSequence, never by the shared flag). tests/ui/test_engine_client.py runs
the same rules through the real client on a scripted host."""

from __future__ import annotations

import itertools

from app.core import protocol as P
from app.core.chat.context import ChatMessage, GenerationStats
from app.core.sampling.params import SamplerSettings
from app.ui.engine.api_requests import EMBED_STOPPED, STOPPED, ApiRequests, EngineDoor
from app.ui.engine.requests import RequestKind

K = RequestKind


class _Flag:
    def __init__(self, log: list) -> None:
        self.log = log

    def cancel(self) -> None:
        self.log.append("cancel")

    def clear_cancel(self) -> None:
        self.log.append("clear")

    def watch_stop(self) -> None:
        self.log.append("watch")

    def unwatch_stop(self) -> None:
        self.log.append("unwatch")


class _Engine:
    """The client's half, recorded: every request asked or sent and every touch of the Stop flag."""

    def __init__(self, *, remote: object = None) -> None:
        self.log: list = []
        self.free = {False: True, True: True}
        self._ids = itertools.count(100)
        self.remote = remote
        self.api = ApiRequests(
            EngineDoor(
                free=lambda parallel: self.free[parallel],
                running=lambda: True,
                model=lambda: object(),
                remote=lambda: self.remote,
                ask=self._ask,
                send=lambda req: self.log.append(("send", req)),
                stop=_Flag(self.log),
                after=self._after,
            )
        )
        self.answers = self.api.answers()

    def _ask(self, kind: RequestKind, make) -> int:
        rid = next(self._ids)
        self.log.append((kind, make(rid)))
        return rid

    def _after(self) -> None:
        self.log.append("after")
        self.api.pump()

    def end(self, rid: int) -> None:
        self.answers[(K.EXTERNAL, P.Finished)](P.Finished(rid, "", GenerationStats(), elapsed_s=0.0))

    def asked(self) -> list:
        return [e[1] for e in self.log if isinstance(e, tuple) and e[0] is K.EXTERNAL]


def _gen(text: str = "api") -> P.Generate:
    return P.Generate(0, (ChatMessage("user", text),), SamplerSettings(), external=True)


def test_one_plain_generate_at_a_time_the_stop_flag_cleared_first_and_the_next_after_it(qtbot):
    eng = _Engine()
    got: dict[str, list] = {"a": [], "b": []}
    eng.free[False] = False  # the person's reply is in the engine: nothing goes
    ta = eng.api.submit(_gen("a"), got["a"].append)
    tb = eng.api.submit(_gen("b"), got["b"].append)
    assert eng.log == [] and eng.api.waiting == (ta, tb)
    eng.free[False] = True
    eng.api.pump()
    assert eng.log == ["clear", (K.EXTERNAL, eng.asked()[0])] and eng.asked()[0].request_id == 100
    assert eng.api.in_flight == ta and eng.api.waiting == (tb,)
    assert eng.api.cancel(ta) and eng.log[-2:] == ["cancel", "watch"]  # stopped like Stop
    eng.end(100)
    assert isinstance(got["a"][-1], P.Finished)
    assert eng.log[4:] == ["unwatch", "after", "clear", (K.EXTERNAL, eng.asked()[1])]
    assert eng.api.in_flight == tb and eng.asked()[1].messages[0].content == "b"


def test_the_persons_reply_held_behind_a_plain_generate_goes_first_and_remembers_stop(qtbot):
    eng = _Engine()
    person = P.Generate(7, (ChatMessage("user", "mine"),), SamplerSettings())
    assert not eng.api.hold_behind(person)  # nothing in the engine: the client sends it now
    eng.api.submit(_gen("a"), lambda _e: None)
    eng.api.submit(_gen("b"), lambda _e: None)
    assert eng.api.hold_behind(person) and eng.api.cancel_held()
    del eng.log[:]
    eng.end(100)
    assert eng.log == ["unwatch", "clear", ("send", person), "cancel", "watch"]  # ahead of "b"; no "after"
    assert eng.api.in_flight is None and len(eng.api.waiting) == 1


def test_parallel_sequences_go_together_and_each_stops_alone_never_by_the_shared_flag(qtbot):
    eng = _Engine()
    eng.api.set_parallel(2)
    eng.free[False] = False  # the person's reply runs: sequences still go (the engine pauses them)
    tickets = [eng.api.submit(_gen(k), lambda _e: None) for k in "abc"]
    sent = eng.asked()
    assert [(type(r).__name__, r.n_seq) for r in sent] == [("GenerateParallel", 2)] * 2
    assert eng.api.in_flight_tickets == tuple(tickets[:2]) and eng.api.waiting == (tickets[2],)
    assert eng.api.ticket_of(sent[1].request_id) == tickets[1]
    assert eng.api.cancel(tickets[0]) and eng.log[-1] == ("send", P.CancelSequence(sent[0].request_id))
    eng.end(sent[0].request_id)
    assert not {"clear", "cancel", "watch", "unwatch"} & {e for e in eng.log if isinstance(e, str)}
    assert eng.api.in_flight_tickets == (tickets[1], tickets[2])  # the waiting one took the free sequence


def test_a_remote_engine_takes_one_plain_generate_at_a_time_and_no_embeddings(qtbot):
    eng = _Engine(remote="a server")
    eng.api.set_parallel(4)
    eng.api.submit(_gen("a"), lambda _e: None)
    eng.api.submit(_gen("b"), lambda _e: None)
    assert not eng.api.parallel_in_use and [type(r).__name__ for r in eng.asked()] == ["Generate"]
    assert eng.api.embed(P.Embed(0, ("x",), 512), lambda _e: None) is None


def test_the_engine_stopping_ends_every_api_request_and_embedding_once_with_its_message(qtbot):
    eng = _Engine()
    got: list = []
    eng.api.submit(_gen("a"), got.append)
    eng.api.submit(_gen("b"), got.append)
    rid = eng.api.embed(P.Embed(0, ("x",), 512), got.append)
    assert rid is not None and eng.log[-1] == (K.EMBED, P.Embed(rid, ("x",), 512))
    eng.api.engine_stopped()
    assert [(type(e).__name__, e.kind, e.message) for e in got] == [
        ("Failed", P.FailureKind.ENGINE, STOPPED),
        ("Failed", P.FailureKind.ENGINE, STOPPED),
        ("Failed", P.FailureKind.ENGINE, EMBED_STOPPED),
    ]
    assert not eng.api.cancel_embed(rid) and eng.api.in_flight is None and eng.api.waiting == ()

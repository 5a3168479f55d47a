"""The engine client's plain parts without Qt: the table that matches answers to requests, and the
local API's queue with the person's reply held behind it (app/ui/engine/requests.py, external.py)."""

from __future__ import annotations

import subprocess
import sys

from app.core import protocol as P
from app.core.chat.context import ChatMessage, GenerationStats
from app.core.sampling.params import SamplerSettings
from app.ui.engine.external import ExternalQueue
from app.ui.engine.requests import RequestKind, RequestTable

K = RequestKind


def _gen(rid: int = 0, text: str = "hi") -> P.Generate:
    return P.Generate(rid, (ChatMessage("user", text),), SamplerSettings())


def _tok(rid: int, i: int) -> P.TokenEvent:
    return P.TokenEvent(rid, f"t{i}", 100 + i, f"t{i}", i, 0.01 * i, 3 + i)


def _finished(rid: int) -> P.Finished:
    return P.Finished(rid, "t0t1", GenerationStats(), elapsed_s=0.1)


# ------------------------------------------------------------------ the request table
def test_an_answer_is_matched_to_its_request_and_the_terminal_one_ends_it():
    table = RequestTable()
    table.expect(7, K.REPLY)
    table.expect(8, K.FUNNEL)
    assert table.match(P.PrefillProgress(7, 10, 10, 0.01)) is K.REPLY
    assert table.match(P.TokenBatch(7, (_tok(7, 0),))) is K.REPLY
    assert table.one(K.REPLY) == 7 and len(table) == 2  # non-terminal events keep the request waiting
    assert table.match(_finished(7)) is K.REPLY
    assert table.one(K.REPLY) is None and len(table) == 1
    assert table.match(_finished(7)) is None  # a second terminal event answers nothing
    # A Failed answers whichever request has its id: here the funnel.
    assert table.match(P.Failed(8, P.FailureKind.NO_LOGITS, "no")) is K.FUNNEL and len(table) == 0


def test_events_of_no_waiting_request_match_nothing():
    table = RequestTable()
    table.expect(3, K.LOAD)
    assert table.match(P.ContextReset(9)) is None  # ResetContext is not waited for
    assert table.match(P.LogLine("warning", "x")) is None  # no request id at all
    assert table.match(P.EngineReady("v", "", False)) is None
    assert table.one(K.LOAD) == 3


def test_forgetting_a_kind_and_clearing():
    table = RequestTable()
    for rid, kind in ((1, K.COUNT), (2, K.RENDER), (3, K.COUNT), (4, K.LOAD)):
        table.expect(rid, kind)
    assert table.one(K.COUNT) == 3  # the newest
    assert table.forget(K.COUNT) == (1, 3) and table.one(K.COUNT) is None
    assert table.match(P.PromptCounted(1, 10, 2, 512, 0, 10)) is None
    table.clear()
    assert len(table) == 0 and table.match(P.PromptRendered(2, "", (), 0, P.TemplateSource.PLAIN, None, None)) is None


# ------------------------------------------------------------------ the API queue
def test_external_requests_go_in_order_one_at_a_time_with_their_own_events():
    changes: list[tuple] = []
    got: dict[int, list] = {1: [], 2: []}
    q = ExternalQueue(lambda: changes.append((q.tickets, q.in_flight)))
    t1 = q.submit(_gen(text="first"), got[1].append)
    t2 = q.submit(_gen(text="second"), got[2].append)
    assert (t1, t2) == (1, 2) and q.tickets == (1, 2) and q.in_flight is None
    req = q.start_next(41)
    assert req is not None and req.request_id == 41 and req.messages[0].content == "first"
    assert q.in_flight == 1 and q.in_flight_id == 41 and q.tickets == (2,)
    assert q.start_next(42) is None  # one in the engine at a time
    q.deliver(P.PromptPrepared(41, 0.001, 3, 0, 3, 0, (), ""))
    q.deliver(P.TokenBatch(41, (_tok(41, 0), _tok(41, 1))))
    q.end(_finished(41))
    assert [type(e).__name__ for e in got[1]] == ["PromptPrepared", "TokenEvent", "TokenEvent", "Finished"]
    assert [e.index for e in got[1] if isinstance(e, P.TokenEvent)] == [0, 1]
    assert got[2] == [] and q.in_flight is None
    assert changes == [((1,), None), ((1, 2), None), ((2,), 1), ((2,), None)]
    req2 = q.start_next(43)
    assert req2 is not None and req2.messages[0].content == "second" and q.tickets == ()


def test_a_waiting_request_is_cancelled_at_once_and_the_one_in_flight_is_left_to_stop():
    q = ExternalQueue()
    got: list = []
    q.submit(_gen(), got.append)
    t2 = q.submit(_gen(), got.append)
    q.start_next(5)
    assert q.cancel_waiting(t2) and q.tickets == ()
    assert len(got) == 1 and isinstance(got[0], P.Failed) and got[0].kind is P.FailureKind.CANCELLED
    assert not q.cancel_waiting(1)  # in the engine: the client sets the cancel flag instead
    assert not q.cancel_waiting(99) and q.in_flight == 1


def test_every_request_ends_once_when_the_engine_goes():
    q = ExternalQueue()
    got: list = []
    for _ in range(3):
        q.submit(_gen(), got.append)
    q.start_next(12)
    q.fail_all("The engine stopped.")
    assert [(e.request_id, e.kind, e.message) for e in got] == [
        (12, P.FailureKind.ENGINE, "The engine stopped."),
        (0, P.FailureKind.ENGINE, "The engine stopped."),
        (0, P.FailureKind.ENGINE, "The engine stopped."),
    ]
    assert q.tickets == () and q.in_flight is None
    q.end(_finished(12))  # a late Finished of the failed request reaches no sink
    assert len(got) == 3


def test_the_persons_reply_is_held_behind_the_request_in_flight_and_remembers_stop():
    q = ExternalQueue()
    assert not q.cancel_held() and q.take_held() is None
    person = _gen(30, "mine")
    q.hold(person)
    assert q.holding
    assert q.take_held() == (person, False) and not q.holding
    q.hold(person)
    assert q.cancel_held()
    assert q.take_held() == (person, True)
    q.hold(person)
    q.drop_held()
    assert q.take_held() is None


def test_with_parallel_sequences_up_to_the_limit_go_in_and_each_event_reaches_its_own_sink():
    """Issue 23 §4: up to N requests in the engine at once, sent as parallel sequences, events by request id."""
    got: dict[int, list] = {1: [], 2: [], 3: []}
    q = ExternalQueue()
    for n in (1, 2, 3):
        q.submit(_gen(text=f"r{n}"), got[n].append)
    assert q.start_next(51, limit=2) is not None and q.start_next(52, limit=2) is not None
    assert q.start_next(53, limit=2) is None  # two in the engine: the third waits
    assert q.in_flight_tickets == (1, 2) and q.tickets == (3,) and q.parallel_ids() == (51, 52)
    assert not q.serial_in_flight and q.request_id_of(2) == (52, True) and q.ticket_of(51) == 1
    q.deliver(P.TokenBatch(52, (_tok(52, 0),)))
    q.deliver(P.TokenBatch(51, (_tok(51, 0), _tok(51, 1))))
    assert q.end(_finished(52)) is True  # it was a parallel sequence
    assert [e.request_id for e in got[2]] == [52, 52] and [e.request_id for e in got[1]] == [51, 51]
    assert q.start_next(53, limit=2) is not None and q.in_flight_tickets == (1, 3)
    q.fail_all("gone")
    assert isinstance(got[1][-1], P.Failed) and isinstance(got[3][-1], P.Failed) and q.in_flight is None


def test_one_at_a_time_a_request_is_serial_and_not_a_parallel_sequence():
    q = ExternalQueue()
    q.submit(_gen(), lambda _e: None)
    q.start_next(7)
    assert q.serial_in_flight and q.parallel_ids() == () and q.request_id_of(1) == (7, False)
    assert q.end(_finished(7)) is False


def test_the_table_and_the_queue_load_no_qt():
    code = (
        "import sys, app.ui.engine.requests, app.ui.engine.external\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ what a death means
def test_a_death_names_the_rpc_servers():
    """(Which file was loading is the model loader's to add: tests/ui/test_model_loader.py.)"""
    from app.engine.host import EngineDied
    from app.ui.engine.host_link import crash_description

    died = EngineDied(-6)
    assert crash_description(died, ()) == died.description
    assert died.description.startswith("The engine was killed by SIGABRT")
    text = crash_description(died, ("10.0.0.2:50052", "10.0.0.3:50052"))
    assert text.startswith(died.description)
    assert "RPC server(s) 10.0.0.2:50052, 10.0.0.3:50052" in text and "goes away" in text

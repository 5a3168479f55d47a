"""The engine's parallel API sequences (app/engine/parallel/, issue 23 §4) on SmolLM2, through the pipe:
refusals in words, stop reasons, a sequence's cells reused by the next request's common prefix, cancelling a waiting and a decoding request, a model switch under them."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.context import ChatMessage, Role, StopReason
from app.core.sampling.params import SamplerSettings

COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"


def gen(prompt: str = COUNTING, stop_strings: tuple[str, ...] = (), **sampler) -> P.Generate:
    sampler.setdefault("temperature", 0)
    sampler.setdefault("max_tokens", 8)
    return P.Generate(0, (), SamplerSettings(**sampler), stop_strings, raw_prompt=prompt, external=True)


def collect(host, ids, timeout=60.0) -> dict[int, list]:
    """Every event of the requests ``ids`` until each has its terminal one (TokenBatch as TokenEvents)."""
    got: dict[int, list] = {rid: [] for rid in ids}
    ended: set[int] = set()
    while ended != set(ids):
        ev = host.recv(timeout)
        assert ev is not None, f"no event in {timeout} s; ended: {ended}"
        rid = getattr(ev, "request_id", None)
        if rid in got:
            got[rid].append(ev)
            if isinstance(ev, P.TERMINAL_EVENTS):
                ended.add(rid)
    return got


def send(host, req: P.Generate, n_seq: int = 2) -> int:
    rid = host.next_id()
    host.send(P.GenerateParallel(rid, req, n_seq))
    return rid


def test_refusals_name_the_value_and_stop_reasons_are_a_replys(engine):
    h = engine.host
    bad = send(h, gen(), n_seq=1)
    over = send(h, gen("word " * 5000))
    none = send(h, gen(max_tokens=0))
    full = send(h, gen(max_tokens=40))
    stop = send(h, gen(max_tokens=40, stop_strings=("15",)))
    got = collect(h, [bad, over, none, full, stop])
    assert got[bad][-1].kind is P.FailureKind.BAD_SETTINGS and "2 to 16" in got[bad][-1].message
    assert got[over][-1].kind is P.FailureKind.CONTEXT_OVERFLOW and "4096" in got[over][-1].message
    fin = got[none][-1]
    assert isinstance(fin, P.Finished) and fin.stats.stop_reason is StopReason.MAX_TOKENS and fin.text == ""
    fin = got[stop][-1]
    assert fin.stats.stop_reason is StopReason.STOP_STRING and "15" not in fin.text and "14" in fin.text
    # it waited for a sequence, and the one it got held the same prompt: only its last token is evaluated again
    assert fin.stats.cached_tokens == fin.stats.prompt_tokens - 1 and fin.stats.evaluated_tokens == 1
    fin = got[full][-1]
    assert isinstance(fin, P.Finished) and fin.stats.generated_tokens == 40
    assert fin.text == "".join(e.text for e in got[full] if isinstance(e, P.TokenEvent))
    assert fin.stats.n_ctx == 4096 and fin.stats.cached_tokens == 0 and "llama_decode_ms" in fin.stats.unreported
    assert fin.stats.prefill_s > 0 and fin.stats.ttft_s >= fin.stats.prefill_s and fin.stats.decode_tok_s > 0


def test_a_waiting_request_and_a_decoding_one_are_cancelled_alone(engine):
    h = engine.host
    first, second, third = (send(h, gen(max_tokens=100)) for _ in range(3))  # two sequences: the third waits
    h.send(P.CancelSequence(third))
    got = collect(h, [third])
    assert got[third][-1].kind is P.FailureKind.CANCELLED
    while True:  # the first has tokens: cancel it mid-decode
        ev = h.recv(30)
        if isinstance(ev, P.TokenEvent) and ev.request_id == first and ev.index >= 3:
            break
    h.send(P.CancelSequence(first))
    got = collect(h, [first, second])
    assert got[first][-1].stats.stop_reason is StopReason.CANCELLED and got[first][-1].stats.generated_tokens < 100
    assert got[second][-1].stats.stop_reason is StopReason.MAX_TOKENS and got[second][-1].stats.generated_tokens == 100


def test_the_persons_turn_between_api_steps_is_the_same_as_alone(engine):
    """A turn in the chat context while API sequences decode: the same greedy text as alone (they pause)."""
    h = engine.host
    chat = (ChatMessage(Role.USER, "Name three fruits."),)
    h.request(P.ResetContext(h.next_id()))
    alone = engine.generate(chat, temperature=0, max_tokens=16)
    h.request(P.ResetContext(h.next_id()))
    api = send(h, gen(max_tokens=60))
    while not isinstance(ev := h.recv(30), P.TokenEvent):
        assert ev is not None
    seen: list = []
    mine = engine.generate(chat, events=seen, temperature=0, max_tokens=16)
    assert mine.text == alone.text and mine.stats.generated_tokens == alone.stats.generated_tokens
    ended = [e for e in seen if isinstance(e, P.Finished) and e.request_id == api]
    fin = ended[0] if ended else collect(h, [api])[api][-1]
    assert fin.stats.generated_tokens == 60


def test_a_model_switch_ends_the_sequences_with_a_message_and_the_new_model_serves(fresh_engine, smollm2):
    eng = fresh_engine(n_ctx=1024)
    h = eng.host
    rid = send(h, gen(max_tokens=2000))
    while not isinstance(ev := h.recv(30), P.TokenEvent):
        assert ev is not None
    load = h.next_id()
    h.send(P.LoadModel(load, str(smollm2), eng.loaded.settings))
    got = collect(h, [rid, load])
    assert got[rid][-1].kind is P.FailureKind.ENGINE and "unloaded" in got[rid][-1].message
    assert isinstance(got[load][-1], P.ModelLoaded)
    after = send(h, gen())
    assert collect(h, [after])[after][-1].stats.generated_tokens == 8

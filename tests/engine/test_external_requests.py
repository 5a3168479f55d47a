"""Requests from the local API in the engine: raw prompts, candidates on every token, and the
person's KV cache kept across them (app.engine.kv_snapshot)."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.context import ChatMessage, ContextPolicy, Role, StopReason
from app.core.sampling.params import SamplerSettings

GREEDY = SamplerSettings(temperature=0, max_tokens=12)
CHAT = (ChatMessage(Role.SYSTEM, "You are helpful."), ChatMessage(Role.USER, "Name three fruits."))


def external(engine, **fields):
    fields.setdefault("messages", (ChatMessage(Role.USER, "Say hi."),))
    req = P.Generate(engine.host.next_id(), sampler=GREEDY, external=True, context_policy=ContextPolicy.STOP, **fields)
    engine.host.clear_cancel()
    events: list = []
    return engine.host.request(req, on_event=events.append), events


def person_turns(engine, between=None):
    engine.host.request(P.ResetContext(engine.host.next_id()))
    first = engine.generate(CHAT, temperature=0, max_tokens=12)
    if between is not None:
        between()
    prepared: list = []
    second = engine.generate(
        (*CHAT, ChatMessage(Role.ASSISTANT, first.text), ChatMessage(Role.USER, "And three vegetables?")),
        events=prepared,
        temperature=0,
        max_tokens=12,
    )
    return second, next(e for e in prepared if isinstance(e, P.PromptPrepared))


def test_the_persons_cache_is_kept_across_an_api_request(engine):
    ref, ref_prompt = person_turns(engine)
    after, after_prompt = person_turns(engine, between=lambda: external(engine))
    assert after_prompt.prompt_text == ref_prompt.prompt_text and after_prompt.prompt_tokens == ref_prompt.prompt_tokens
    assert after_prompt.cached_tokens == ref_prompt.cached_tokens > 20  # the whole first turn, reused
    assert after.stats.evaluated_tokens == ref.stats.evaluated_tokens and after.text == ref.text


def test_without_the_external_flag_the_api_request_would_take_the_cache(engine):
    """What the flag prevents: the same request sent as the person's own evicts their cache."""

    def as_person():
        engine.generate((ChatMessage(Role.USER, "Say hi."),), temperature=0, max_tokens=12)

    ref, ref_prompt = person_turns(engine)
    after, after_prompt = person_turns(engine, between=as_person)
    assert after_prompt.cached_tokens < ref_prompt.cached_tokens
    assert after.stats.evaluated_tokens > ref.stats.evaluated_tokens


def test_raw_prompt_is_used_as_it_is_and_candidates_come_with_every_token(engine):
    fin, events = external(engine, messages=(), raw_prompt="1, 2, 3, 4,", top_candidates=3, candidates_every_token=True)
    prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
    assert prepared.prompt_text == "1, 2, 3, 4," and "<|im_start|>" not in prepared.prompt_text
    assert fin.stats.stop_reason is StopReason.MAX_TOKENS and fin.text.lstrip().startswith("5")
    tokens = [e for e in events if isinstance(e, P.TokenEvent)]
    assert len(tokens) == 12 and all(len(t.candidates) == 3 and t.logsumexp is not None for t in tokens)


def test_raw_prompt_longer_than_the_context_is_refused(engine):
    fin, _ = external(engine, messages=(), raw_prompt="word " * 5000)
    assert isinstance(fin, P.Failed) and fin.kind is P.FailureKind.CONTEXT_OVERFLOW

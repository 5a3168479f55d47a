"""Helpers for the speculative decoding tests: one turn with or without speculation, and the check that
two replies are the same or differ only at a near-tie (llama.cpp's batch kernels, see app.engine.speculative.loop)."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.context import ChatMessage
from app.core.sampling.params import SamplerSettings
from tests.support.engine import Engine

#: How far apart llama.cpp's CPU kernels put the same position's logits in a one-token batch and in a longer
#: one: 0.59 measured on SmolLM2 Q4_1 (app.engine.llama_context.GlassboxLlama.logits_batch); for the top 8
#: tokens of 6 positions of a code prompt, 6-token batch against one-token steps: SmolLM2 up to 0.43, Gemma 3
#: up to 0.85 (docs/guide/benchmarks.md, bench/speculative.py). Each model's test uses its own figure.
BATCH_KERNEL_MARGIN = 0.6
GEMMA_BATCH_KERNEL_MARGIN = 0.9
#: Top candidates asked for per token: the near-tie check looks for the flipped token among them.
NEAR_TIE_CANDIDATES = 8

CODE = """def parse_config(path):
    values = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise ValueError(f"line {number}: expected key = value")
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def merge(defaults, overrides):
    out = dict(defaults)
    for key, value in overrides.items():
        if value is None:
            continue
        out[key] = value
    return out
"""

#: For a base model (Gemma 3 270M, no chat template): a document whose continuation is the listing again.
COPY_DOCUMENT = f"```python\n{CODE}```\n\nThe same file with parse_config renamed to read_config:\n\n```python\n"

REPEAT_PROMPT = f"Here is a Python file:\n\n```python\n{CODE}```\n\nRepeat the file exactly, but rename parse_config to read_config."


def turn(
    eng: Engine,
    prompt: str,
    *,
    speculate: bool | None,
    events: list | None = None,
    on_event=None,
    system: str = "You are a helpful assistant.",
    context_policy: str | None = None,
    **sampler,
) -> P.Finished:
    """One turn of ``prompt`` (with per-token top candidates, for the near-tie check)."""
    msgs = (ChatMessage("system", system), ChatMessage("user", prompt))
    eng.host.clear_cancel()
    seen = events if events is not None else []

    def handle(ev):
        seen.append(ev)
        if on_event is not None:
            on_event(ev)

    req = P.Generate(
        eng.host.next_id(),
        msgs,
        SamplerSettings(**sampler),
        (),
        NEAR_TIE_CANDIDATES,
        False,
        context_policy,
        candidates_every_token=True,
        speculate=speculate,
    )
    fin = eng.host.request(req, timeout=120, on_event=handle)
    assert isinstance(fin, P.Finished), getattr(fin, "message", fin)
    return fin


def token_events(events: list) -> list[P.TokenEvent]:
    """The TokenEvents of a turn's events, in order."""
    out: list[P.TokenEvent] = []
    for ev in events:
        if isinstance(ev, P.TokenBatch):
            out.extend(ev.events)
        elif isinstance(ev, P.TokenEvent):
            out.append(ev)
    return out


def same_or_near_tie(
    plain: list[P.TokenEvent], spec: list[P.TokenEvent], *, greedy: bool, margin: float = BATCH_KERNEL_MARGIN
) -> str:
    """ "same" when both replies have the same tokens; else "near tie at i" after checking that the first
    differing token is the only kind of difference: the tokens before it agree, and there the two runs'
    logits of both tokens are within ``margin`` (the model's measured batch-kernel difference) of each
    other (greedy: the plain run's top two are those tokens, within the margin of each other)."""
    a, b = [e.token_id for e in plain], [e.token_id for e in spec]
    if a == b:
        return "same"
    i = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
    assert i < min(len(a), len(b)), f"one reply is a prefix of the other: {len(a)} and {len(b)} tokens"
    pc = {t: logit for t, _text, logit in plain[i].candidates}
    sc = {t: logit for t, _text, logit in spec[i].candidates}
    if greedy:
        assert a[i] in pc and b[i] in pc, (
            f"token {i}: {b[i]} is not among the plain run's top candidates {plain[i].candidates}"
        )
        gap = pc[a[i]] - pc[b[i]]
        assert 0 <= gap <= margin, f"token {i}: not a near tie (gap {gap:.3f} logits)"
        assert b[i] in sc and sc[b[i]] >= sc.get(a[i], -1e9)
    for t in set(pc) & set(sc):
        assert abs(pc[t] - sc[t]) <= margin, f"token {i}: logits of {t} differ by {pc[t] - sc[t]:.3f}"
    return f"near tie at {i}"

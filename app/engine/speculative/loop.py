"""The speculative decode loop: draft, verify in one batch with the model's own sampler, keep what agrees.

A round, with the model's last sampled token ``t`` pending (sampled, not yet evaluated):

1. the drafter proposes ``d1..dk`` continuing prompt + reply (:mod:`app.engine.speculative.drafters`),
   k the length that pays on this machine (:mod:`app.core.speculative.budget`: measured verification
   costs and acceptance by position; k = 0 is a plain step, ``SKIPPED``), at most draft_max;
2. ``[t, d1..dk]`` are evaluated in ONE ``llama_decode``, logits at each of those positions only
   (:class:`~app.engine.speculative.verify.Verifier`);
3. at each position i the model's own sampler chain draws (``llama_sampler_sample(chain, ctx, i)``),
   once per position as the plain loop does; while the draw equals ``d(i+1)`` the draft token is
   accepted (it is already in the KV cache) and the next position is read; the first draw that
   differs is the model's token, kept, and ends the round (after all k accepted, the draw at the
   last position is a token the round gains for free);
4. the rejected tail is removed from the KV cache (``llama_memory_seq_rm``); the draft model's cache
   follows by common prefix on its next draft.

So the reply is the one the plain loop (:mod:`app.engine.decode`) gives: the same chain, the same
draws, the same seed; every event, stored logits step and alternative is the model's, from the logits
row of the position it was drawn at. One known difference: llama.cpp's CPU kernels compute a position
in a k-token batch slightly differently from a one-token batch (up to ~0.6 logit on SmolLM2 Q4_1),
so a near-tie can flip.

Stop is read between rounds (a round is one llama_decode); stop strings, end-of-generation tokens and
max_tokens end a reply inside a round (the draft is cut to what max_tokens leaves). A full context:
``STOP`` ends the reply; ``ROLLING`` makes room as the plain loop does and drafts no more for the rest
of the reply (every round is then one token, the plain loop's step): the draft model's cache and the
n-gram history would have to be rebuilt after a shift, and a shift is rare, so the simplest correct
choice is to stop speculating.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.core import protocol as P
from app.core.chat.context import ContextPolicy, StopReason
from app.core.speculative.budget import DraftBudget, VerifyCost
from app.core.speculative.settings import SpeculationSettings
from app.core.speculative.stats import RoundEnd, SpeculationStats
from app.engine.constraint.sampler import draw_for
from app.engine.decode import DecodeResult
from app.engine.errors import CancelFlag
from app.engine.forced import ForcedTokens
from app.engine.funnel_store import ReplyLogits
from app.engine.inspector import Inspector, Logits
from app.engine.speculative.drafters import Draft
from app.engine.speculative.verify import Verifier
from app.engine.token_sink import TokenSink
from app.engine.vocab import Vocab


class Drafting(Protocol):
    """A drafter (:class:`~app.engine.speculative.drafters.PromptLookup`, ``DraftModel``).

    Attributes:
        weights_bytes: its own model's weights, bytes (0: no model).
        forward_passes: its llama_decode calls so far.
    """

    @property
    def weights_bytes(self) -> int: ...

    @property
    def forward_passes(self) -> int: ...

    def prepare(self, context: Sequence[int]) -> None: ...

    def draft(self, context: Sequence[int], k: int) -> Draft: ...

    def close(self) -> None: ...


@dataclass
class _Tally:
    """The counts of :class:`SpeculationStats` while the reply runs (times in ns)."""

    draft_max: int
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    accepted_at: list[int] = field(default_factory=list)
    drafted_at: list[int] = field(default_factory=list)
    ends: dict[RoundEnd, int] = field(default_factory=dict)
    draft_ns: int = 0
    verify_ns: int = 0
    sample_ns: int = 0
    accepted_tokens: list[int] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.accepted_at = [0] * self.draft_max
        self.drafted_at = [0] * self.draft_max

    def stats(
        self,
        s: SpeculationSettings,
        weights_bytes: int,
        generated: int,
        draft_bytes: int = 0,
        verify_steps: tuple[float, ...] = (),
    ) -> SpeculationStats:
        """The reply's :class:`SpeculationStats` (trailing draft positions never drafted left out);
        ``draft_bytes``: the draft model's weight bytes read in the reply (weights x its llama_decode calls);
        ``verify_steps``: :meth:`VerifyCost.steps`."""
        n = max((i + 1 for i, c in enumerate(self.drafted_at) if c), default=0)
        return SpeculationStats(
            drafter=s.drafter,
            draft_max=s.draft_max,
            rounds=self.rounds,
            drafted=self.drafted,
            accepted=self.accepted,
            accepted_at=tuple(self.accepted_at[:n]),
            drafted_at=tuple(self.drafted_at[:n]),
            round_ends=tuple((e, c) for e, c in self.ends.items()),
            draft_s=self.draft_ns / 1e9,
            verify_s=self.verify_ns / 1e9,
            sample_s=self.sample_ns / 1e9,
            accepted_tokens=tuple(self.accepted_tokens),
            rejected=tuple(self.rejected),
            weight_bytes_per_token=weights_bytes * self.rounds / generated if generated else 0.0,
            draft_weight_bytes_per_token=draft_bytes / generated if generated else 0.0,
            adaptive=s.adaptive,
            verify_steps=verify_steps,
        )


def speculative_loop(
    *,
    llm: Any,
    chain: Any,
    vocab: Vocab,
    inspector: Inspector,
    req: P.Generate,
    stop_strings: tuple[str, ...],
    n_ctx: int,
    policy: ContextPolicy,
    cancel: CancelFlag,
    emit: Callable[[object], None],
    t0: int,
    shift_context: Callable[[list[int]], bool],
    drafter: Drafting,
    settings: SpeculationSettings,
    history: Sequence[int],
    weights_bytes: int,
    cost: VerifyCost | None = None,
    store: ReplyLogits | None = None,
    forced: ForcedTokens | None = None,
    prefix: Sequence[int] = (),
) -> DecodeResult:
    """Decode with speculation (see the module docstring); the arguments shared with
    :func:`app.engine.decode.decode_loop` mean what they mean there.

    Args:
        drafter: proposes the drafts.
        settings: the speculation settings (draft_max).
        history: the tokens before the reply's first sampled one (the prompt, a branch's prefix
            included): with the reply so far, what the drafter continues.
        weights_bytes: the model's weights, bytes (``weight_bytes_per_token``).
        cost: the loaded model's measured round costs (kept across replies; None: a new one).

    Returns:
        The :class:`DecodeResult`, its ``speculation`` filled.

    Raises:
        EngineError: ``internal`` when llama_decode fails.
    """
    sink = TokenSink(
        vocab=vocab, inspector=inspector, req=req, stop_strings=stop_strings, emit=emit, t0=t0, prefix=prefix
    )
    gen = sink.generated
    max_tokens = req.sampler.max_tokens
    tally = _Tally(settings.draft_max)
    shifts = 0
    drafting = True
    want, keep_rows = sink.wants_logits, store is not None
    verifier = Verifier(llm, min(settings.draft_max + 1, llm.n_batch))
    cost = cost if cost is not None else VerifyCost(verifier.capacity)
    budget = DraftBudget(cost, verifier.capacity - 1, settings.adaptive)
    sample = draw_for(req, vocab.n_tokens)  # llama_sampler_sample, checked under an output constraint
    passes0 = drafter.forward_passes

    def draw(row: Logits | None, idx: int, context_used: int) -> tuple[int, StopReason | None]:
        """Sample at output row ``idx`` (-1: the last), record the step, hand the token to the sink."""
        lse, cands = sink.look(row) if want and row is not None else (0.0, ())
        ts = time.perf_counter_ns()
        token = int(sample(chain, llm.ctx, idx))
        tally.sample_ns += time.perf_counter_ns() - ts
        if forced is not None:
            token = forced.next(token)
        if store is not None and row is not None:
            store.record(row, token)
        used = context_used - 1 if vocab.is_eog(token) else min(context_used, n_ctx)
        return token, sink.take(token, used, row if want else None, lse, cands)

    try:
        if budget.may_pay(verifier.capacity - 1):
            # a draft model reads the prompt now (prefill, not the first round); not at all once its
            # drafts are known not to pay here, even accepted whole
            tp = time.perf_counter_ns()
            drafter.prepare(history)
            tally.draft_ns += time.perf_counter_ns() - tp
        # The first token: from the prefill's logits, as the plain loop draws it.
        first = inspector.logits() if want or keep_rows else None
        _, reason = draw(first, -1, llm.n_tokens + 1)
        while reason is None:
            if cancel.is_set():
                reason = StopReason.CANCELLED
                break
            if 0 <= max_tokens <= len(gen):
                reason = StopReason.MAX_TOKENS
                break
            if llm.n_tokens >= n_ctx:
                if policy == ContextPolicy.STOP:
                    reason = StopReason.CONTEXT_FULL
                    break
                sink.flush()
                if not shift_context(gen):
                    reason = StopReason.CANCELLED if cancel.is_set() else StopReason.CONTEXT_FULL
                    break
                shifts += 1
                drafting = False  # the rest of the reply decodes one token per round (module docstring)
            n = llm.n_tokens
            k = min(verifier.capacity - 1, n_ctx - n - 1)
            if max_tokens >= 0:
                k = min(k, max_tokens - len(gen) - 1)
            td = time.perf_counter_ns()
            draft, why = _draft(drafter, budget, [*history, *gen], k if drafting else 0)
            spent = time.perf_counter_ns() - td
            tally.draft_ns += spent
            if draft and drafter.weights_bytes:
                # a draft model's llama_decode calls, catching up on the round before included (prompt
                # lookup's ~0.1 ms a round is not a cost per drafted token)
                cost.drafted(len(draft), spent / 1e9)
            tv = time.perf_counter_ns()
            rows = verifier.decode([gen[-1], *draft])
            spent = time.perf_counter_ns() - tv
            tally.verify_ns += spent
            cost.verified(len(draft) + 1, spent / 1e9)
            sampled0, accepted0 = tally.sample_ns, tally.accepted
            tally.rounds += 1
            tally.drafted += len(draft)
            for i in range(len(draft)):
                tally.drafted_at[i] += 1
            end = why
            kept = n + len(draft) + 1
            for i in range(len(draft) + 1):
                token, reason = draw(rows[i] if want or keep_rows else None, i, n + i + 2)
                hit = i < len(draft) and token == draft[i]
                if hit:
                    tally.accepted += 1
                    tally.accepted_at[i] += 1
                    tally.accepted_tokens.append(len(gen) - 1)
                elif i < len(draft):
                    tail = b"".join(vocab.piece(t) for t in draft[i:]).decode("utf-8", errors="replace")
                    tally.rejected.append((len(gen) - 1, tail))
                    end = RoundEnd.MISMATCH
                if reason is not None or not hit:
                    kept = n + i + 1  # the round's pending token and the accepted drafts before row i
                    if reason is not None:
                        end = RoundEnd.STOPPED
                    break
            budget.judged(len(draft), tally.accepted - accepted0)
            cost.drew(tally.accepted - accepted0 + 1, (tally.sample_ns - sampled0) / 1e9)
            verifier.keep(kept)
            tally.ends[end] = tally.ends.get(end, 0) + 1
    finally:
        verifier.close()
    text = sink.finish()
    draft_bytes = drafter.weights_bytes * (drafter.forward_passes - passes0)
    spec = tally.stats(settings, weights_bytes, len(gen), draft_bytes, cost.steps())
    return DecodeResult(text, reason, len(gen), sink.t_first, sink.t_last, shifts, spec)


def _draft(drafter: Drafting, budget: DraftBudget, context: list[int], k: int) -> tuple[list[int], RoundEnd]:
    """The round's draft: up to ``k`` tokens (the room left), as many as the budget says pay.

    A budget of 0 is a plain step: ``SKIPPED`` when the drafter had a draft (prompt lookup is asked,
    ~0.1 ms; a draft model is not, its drafting is the cost saved), else ``NO_DRAFT``.
    """
    if k <= 0:
        return [], RoundEnd.NO_DRAFT
    want = budget.length(k)
    if want > 0:
        draft, why = drafter.draft(context, want)
        return draft[:want], why
    if drafter.weights_bytes:
        return [], RoundEnd.SKIPPED
    had, why = drafter.draft(context, 1)
    return [], RoundEnd.SKIPPED if had else why

"""The turn in flight, as the panels see it: engine events folded into figures.

Every time comes from the engine's clock (``t_s`` on events), never from when
the UI happened to receive or paint them.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field, fields

from app.core import protocol as P
from app.core.chat.context import GenerationStats, StopReason
from app.core.inspection.timeline import TimelineRecorder
from app.core.sampling.alternatives import ReplyAlternatives


class TurnPhase(str, enum.Enum):
    """Where the turn is: nothing yet, evaluating the prompt, sampling tokens, over, or cut off."""

    IDLE = "idle"
    PREFILL = "prefill"
    DECODE = "decode"
    DONE = "done"
    FAILED = "failed"


@dataclass
class TokenRecord:
    token_id: int
    piece: str
    t_s: float
    p: float | None


RATE_WINDOW = 8  # tokens in the moving window of the decode-speed plot

# Versions and serials are drawn from one counter for every LiveTurn: a panel that switches from one
# turn to another (the chat shown changed: app/ui/chat/shown.py) never mistakes the new one for
# the one it drew.
_COUNTER = itertools.count(1)


@dataclass
class LiveTurn:
    """Figures of the current (or last) turn, updated event by event.

    Attributes:
        phase: a :class:`TurnPhase`.
        prompt: the PromptPrepared event.
        prefill_done / prefill_total: the prompt's prefill, tokens (a mid-reply context
            rebuild does not count here: it is not the prompt's prefill).
        prefill_elapsed_s: seconds spent in the prompt's prefill so far.
        rebuilding: a context rebuild (rolling policy) is being evaluated now.
        rebuild_done / rebuild_total: the rebuild in progress, tokens.
        rebuilt_tokens / rebuilt_s: tokens the finished rebuilds evaluated, and their seconds.
        kept_tokens: tokens of the cache the last rebuild kept as they were.
        last_rebuild_tokens: tokens the last rebuild evaluated.
        shift_dropped_messages: messages the context shifts left out (after the prompt's own drop).
        tokens: the sampled tokens with their engine times.
        final: the engine's final stats once finished.
        candidates: the last token's top candidates ``(id, text, logit)`` and its logsumexp.
        stored: ``final`` is a stored reply's stats (the chat just opened), not a turn of
            this session: no tokens, no prompt, the KV cache holds something else.
        made_by: the model file that wrote the stored reply ("": not known, or a turn of this session).
        timeline: the turn on the engine's clock, folded from the same events
            (:class:`~app.core.inspection.timeline.TimelineRecorder`).
        alternatives: the reply's kept alternatives once it ended (every step of the stored
            reply: a continued or branched reply's earlier steps too).
        alternatives_offset: the step of ``tokens[0]`` in ``alternatives`` (the steps before it
            were generated earlier: the part a reply continues, a branch's prefix).
        message_id: the stored reply this turn is of (None: none, or a stored reply's figures).
        request_id: its engine request (None until it was sent).
        serial: a new value on every :meth:`reset` (another turn), unique over every LiveTurn.
        version: a new value on every change, unique over every LiveTurn, so views repaint only
            when needed.
    """

    phase: TurnPhase = TurnPhase.IDLE
    prompt: P.PromptPrepared | None = None
    prefill_done: int = 0
    prefill_total: int = 0
    prefill_elapsed_s: float = 0.0
    tokens: list[TokenRecord] = field(default_factory=list)
    n_past: int = 0
    final: GenerationStats | None = None
    candidates: tuple[tuple[int, str, float], ...] = ()
    shifts: int = 0
    rebuilding: bool = False
    rebuild_done: int = 0
    rebuild_total: int = 0
    rebuilt_tokens: int = 0
    rebuilt_s: float = 0.0
    kept_tokens: int = 0
    last_rebuild_tokens: int = 0
    shift_dropped_messages: int = 0
    stored: bool = False
    made_by: str = ""
    timeline: TimelineRecorder = field(default_factory=TimelineRecorder)
    alternatives: ReplyAlternatives | None = None
    alternatives_offset: int = 0
    message_id: int | None = None
    request_id: int | None = None
    serial: int = field(default_factory=lambda: next(_COUNTER))
    version: int = field(default_factory=lambda: next(_COUNTER))
    _rate: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []), repr=False)
    _rate_from: int = field(default=1, repr=False)  # the next token index rate_series has not covered

    def reset(self, phase: TurnPhase = TurnPhase.IDLE) -> None:
        """Forget the last turn (a new model, another chat); ``phase`` is the new phase."""
        fresh = LiveTurn()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))
        self.phase = phase
        self.serial = next(_COUNTER)
        self._bump()

    def _bump(self) -> None:
        self.version = next(_COUNTER)

    def show_stored(self, stats: GenerationStats, made_by: str = "", alts: ReplyAlternatives | None = None) -> None:
        """Show a stored reply's figures (the last reply of the chat just opened), written by the model file
        ``made_by`` ("": not known) and, when it kept its alternatives ``alts``, its tokens (``tokens`` from
        them: no engine times, ``p`` None, so the colour comes from the kept candidates, as the reply's Tokens
        button colours it)."""
        self.reset(TurnPhase.DONE)
        self.final = stats
        self.stored = True
        self.made_by = made_by
        self.n_past = stats.context_used
        if alts is not None:
            self.alternatives = alts
            self.tokens = [TokenRecord(t, alts.texts.get(t, ""), 0.0, None) for t in alts.tokens]

    def start(self, message_id: int | None = None) -> None:
        """Reset for a new turn (prefill begins) of stored reply ``message_id``."""
        self.reset(TurnPhase.PREFILL)
        self.message_id = message_id

    def sent(self, request_id: int) -> None:
        """The turn's request went to the engine as ``request_id``."""
        self.request_id = request_id

    def on_prompt(self, ev: P.PromptPrepared) -> None:
        self.timeline.on_prompt(ev)
        self.prompt = ev
        self.prefill_total = ev.to_evaluate
        self.n_past = ev.cached_tokens
        self._bump()

    def on_prefill(self, ev: P.PrefillProgress) -> None:
        self.timeline.on_prefill(ev)
        if ev.rebuild:  # the context is rebuilt mid-reply: the prompt's prefill figures stay
            self.rebuilding = True
            self.rebuild_done = ev.done
            self.rebuild_total = ev.total
            self._bump()
            return
        self.prefill_done = ev.done
        self.prefill_total = ev.total
        start = self.prompt.elapsed_s if self.prompt else 0.0
        self.prefill_elapsed_s = max(0.0, ev.elapsed_s - start)
        self.n_past = (self.prompt.cached_tokens if self.prompt else 0) + ev.done
        self._bump()

    def on_token(self, ev: P.TokenEvent) -> None:
        self.timeline.on_token(ev)
        self.phase = TurnPhase.DECODE
        self.tokens.append(TokenRecord(ev.token_id, ev.piece, ev.t_s, ev.p))
        self.n_past = ev.n_past
        if ev.candidates:
            self.candidates = ev.candidates
        self._bump()

    def on_alternatives(self, alts: ReplyAlternatives | None, offset: int) -> None:
        """The reply's alternatives arrived (it ended); ``offset``: the step of its first token of this turn."""
        self.alternatives = alts
        self.alternatives_offset = offset
        self._bump()

    # -------------------------------------------------------------- one numbering of tokens
    def context_position(self, step: int) -> int | None:
        """The context position (0-based, as Inspect counts) of the reply's token ``step`` (0-based,
        counted over the whole reply, as the Funnel and the Tokens panel count): the prompt's tokens
        come first. None: no prompt yet, or a step before this turn's first token (the part a reply
        continues, a branch's prefix: they are in the prompt, not counted here)."""
        if self.prompt is None or step < self.alternatives_offset:
            return None
        return self.prompt.prompt_tokens + step - self.alternatives_offset

    def reply_step(self, position: int) -> int | None:
        """The reply's token (0-based over the whole reply) at context position ``position``; the
        inverse of :meth:`context_position` (None: a prompt token, or no prompt yet)."""
        if self.prompt is None or position < self.prompt.prompt_tokens:
            return None
        return position - self.prompt.prompt_tokens + self.alternatives_offset

    @property
    def reply_steps(self) -> int:
        """Tokens in the whole reply so far: its kept alternatives' steps, or the earlier part and this turn's."""
        if self.alternatives is not None:
            return max(self.alternatives.n_steps, self.alternatives_offset + len(self.tokens))
        return self.alternatives_offset + len(self.tokens)

    def on_shift(self, ev: P.ContextShifted) -> None:
        self.shifts += 1
        self.n_past = ev.n_past
        self.rebuilding = False
        self.rebuilt_tokens += ev.evaluated_tokens
        self.rebuilt_s += ev.rebuild_s
        self.kept_tokens = ev.kept_tokens
        self.last_rebuild_tokens = ev.evaluated_tokens
        self.shift_dropped_messages += ev.dropped_messages
        self._bump()

    def on_finished(self, stats: GenerationStats | None, end_s: float = 0.0) -> None:
        """The turn ended (``stats`` None: it failed or the engine went away); ``end_s``: when,
        engine seconds since the request arrived (0: unknown)."""
        self.timeline.on_finished(end_s, stats.stop_reason if stats is not None else StopReason.ERROR)
        self.phase = TurnPhase.DONE if stats is not None else TurnPhase.FAILED
        self.final = stats
        self.rebuilding = False
        if stats is not None:
            self.n_past = stats.context_used
        self._bump()

    # -------------------------------------------------------------- live figures
    @property
    def dropped_messages(self) -> int:
        """Oldest messages left out this turn: to fit the prompt, then by context shifts."""
        if self.final is not None:
            return self.final.dropped_messages
        return (self.prompt.dropped_messages if self.prompt else 0) + self.shift_dropped_messages

    def context_parts(self) -> tuple[int, int, int]:
        """What the KV cache holds, tokens: ``(reused, evaluated, generated)``.

        Reused: kept from before this turn's prefill (after a context rebuild: what the
        last rebuild kept). Evaluated: by the prompt's prefill (after a rebuild: by the
        rebuild). Generated: decoded since then.
        """
        if self.prompt is None and self.final is not None:  # a stored reply: its own figures
            f = self.final
            return f.cached_tokens, f.evaluated_tokens, max(0, f.context_used - f.cached_tokens - f.evaluated_tokens)
        if self.shifts:
            reused, evaluated = self.kept_tokens, self.last_rebuild_tokens
            return reused, evaluated, max(0, self.n_past - reused - evaluated)
        reused = self.prompt.cached_tokens if self.prompt else 0
        evaluated = (self.prompt.to_evaluate if self.prompt else 0) if self.final else self.prefill_done
        return reused, evaluated, max(0, self.n_past - reused - evaluated)

    @property
    def ttft_s(self) -> float | None:
        if self.final is not None and self.final.generated_tokens:
            return self.final.ttft_s
        return self.tokens[0].t_s if self.tokens else None

    @property
    def prefill_tok_s(self) -> float | None:
        if self.final is not None and self.final.evaluated_tokens:
            return self.final.prefill_tok_s
        if self.prefill_elapsed_s > 0 and self.prefill_done:
            return self.prefill_done / self.prefill_elapsed_s
        return None

    @property
    def rebuild_tok_s(self) -> float | None:
        """Tokens per second of the finished context rebuilds (None: none yet)."""
        return self.rebuilt_tokens / self.rebuilt_s if self.rebuilt_s > 0 and self.rebuilt_tokens else None

    @property
    def decode_tok_s(self) -> float | None:
        """(generated - 1) / (t_last - t_first), the same formula the engine reports."""
        if self.final is not None and self.final.generated_tokens > 1:
            return self.final.decode_tok_s
        if len(self.tokens) >= 2:
            dt = self.tokens[-1].t_s - self.tokens[0].t_s
            return (len(self.tokens) - 1) / dt if dt > 0 else None
        return None

    @property
    def generated(self) -> int:
        if self.final is not None:
            return self.final.generated_tokens
        return len(self.tokens)

    def rate_series(self) -> tuple[list[float], list[float]]:
        """Decode speed over the turn: ``(times_s, tokens/s)`` over a moving window of ``RATE_WINDOW`` tokens.

        Extended from the last call (the Stats plot asks 5 times a second: the cost is the new
        tokens', not the reply's). The lists are this turn's own: read them, do not change them.
        """
        ts = self.tokens
        xs, ys = self._rate
        for i in range(self._rate_from, len(ts)):
            j = max(0, i - RATE_WINDOW)
            dt = ts[i].t_s - ts[j].t_s
            if dt > 0:
                xs.append(ts[i].t_s)
                ys.append((i - j) / dt)
        self._rate_from = max(self._rate_from, len(ts))
        return xs, ys

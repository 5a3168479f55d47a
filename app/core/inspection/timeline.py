"""The turn on a time axis: when each phase of one reply happened, on the engine's clock.

A :class:`TurnTimeline` is what the Timeline panel draws and what a reply's provenance
keeps (``MessageMeta.timeline``): the request's arrival (time 0), the chat template and
tokenization, the KV cache's reused prefix, each prefill slice, the first token (TTFT),
every decode step, the stop. All times are seconds since the request reached the engine,
as the engine measured them (``time.perf_counter_ns`` in the engine process), never when
the window happened to receive an event.

:class:`TimelineRecorder` folds the protocol's events of one turn into a timeline as
they arrive (PromptPrepared, PrefillProgress, TokenEvent, ContextShifted, Finished).

Stored form (:meth:`TurnTimeline.to_dict`): the decode steps' latencies as float32
milliseconds and the token ids as int32, each base64 of little-endian values (about
10.7 bytes per generated token with the pieces' text on top), so a long reply's
timeline stays small in the conversation store.
"""

from __future__ import annotations

import base64
import binascii
import statistics
import struct
from dataclasses import dataclass, field
from typing import Any

from app.core import protocol as P
from app.core.chat.context import StopReason

TIMELINE_FORMAT = 1
SLOW_STEP_FACTOR = 2.0  # a decode step slower than this many times the median is marked slow


@dataclass(frozen=True)
class PrefillSlice:
    """One llama_decode call of prefill (or of a context rebuild, rolling policy).

    Attributes:
        start_s, end_s: when it began and ended, seconds since the request arrived.
        tokens: prompt tokens it evaluated.
        rebuild: a mid-reply context rebuild, not the prompt's prefill.
    """

    start_s: float
    end_s: float
    tokens: int
    rebuild: bool = False

    @property
    def seconds(self) -> float:
        return max(0.0, self.end_s - self.start_s)

    @property
    def tok_s(self) -> float:
        """Tokens per second of this slice (0 when it took no measurable time)."""
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class TurnTimeline:
    """One reply's phases on the engine's clock (seconds since the request arrived).

    Attributes:
        template_s: seconds spent rendering the chat template (from 0).
        tokenize_s: seconds spent tokenizing the rendered prompt (after the template).
        reuse_s: seconds spent finding and keeping the prefix the KV cache already held
            (it ends at ``prepared_s``).
        prepared_s: when prefill started.
        prompt_tokens: tokens of the rendered prompt.
        cached_tokens: of those, reused from the KV cache (not evaluated).
        slices: the prefill slices, then any context rebuild's slices, in order.
        token_times_s: when each token was sampled; the first is the TTFT.
        token_ids: each sampled token's id.
        token_pieces: each sampled token's text (special tokens as their text).
        first_token: the reply's tokens before ``token_ids[0]`` (a branch's prefix, the part a
            reply continues): token i here is the reply's token ``first_token + i + 1``, counted
            from 1 as the Tokens panel and the funnel count them.
        end_s: when the turn ended (0: not known, e.g. the engine died).
        stop_reason: why it ended (None while in flight).
    """

    template_s: float = 0.0
    tokenize_s: float = 0.0
    reuse_s: float = 0.0
    prepared_s: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    slices: tuple[PrefillSlice, ...] = ()
    token_times_s: tuple[float, ...] = ()
    token_ids: tuple[int, ...] = ()
    token_pieces: tuple[str, ...] = ()
    first_token: int = 0
    end_s: float = 0.0
    stop_reason: StopReason | None = None

    # ---------------------------------------------------------------- derived figures
    @property
    def ttft_s(self) -> float | None:
        """Time to the first token, seconds (None before it)."""
        return self.token_times_s[0] if self.token_times_s else None

    @property
    def prefill_end_s(self) -> float:
        """When the prompt's prefill ended (``prepared_s`` when nothing was evaluated)."""
        ends = [s.end_s for s in self.slices if not s.rebuild]
        return ends[-1] if ends else self.prepared_s

    def step_latencies_ms(self) -> list[float]:
        """Each decode step's latency, milliseconds: token i's sample time minus token i-1's
        (index i-1 in the list is step i; the first token's time is the TTFT, not a step)."""
        t = self.token_times_s
        return [(t[i] - t[i - 1]) * 1000.0 for i in range(1, len(t))]

    def median_step_ms(self) -> float | None:
        """The median decode step, milliseconds (None with fewer than two tokens)."""
        lat = self.step_latencies_ms()
        return statistics.median(lat) if lat else None

    def slow_steps(self, factor: float = SLOW_STEP_FACTOR) -> tuple[int, ...]:
        """Token indices (1-based step = token index) whose step took more than ``factor`` x the median."""
        lat = self.step_latencies_ms()
        if len(lat) < 2:
            return ()
        med = statistics.median(lat)
        return tuple(i + 1 for i, v in enumerate(lat) if med > 0 and v > factor * med)

    @property
    def is_empty(self) -> bool:
        return not self.prepared_s and not self.slices and not self.token_times_s

    # ---------------------------------------------------------------- stored form
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready compact values (see the module docstring for the encoding)."""
        t = self.token_times_s
        return {
            "format": TIMELINE_FORMAT,
            "template_s": self.template_s,
            "tokenize_s": self.tokenize_s,
            "reuse_s": self.reuse_s,
            "prepared_s": self.prepared_s,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "slices": [[s.start_s, s.end_s, s.tokens, int(s.rebuild)] for s in self.slices],
            "ttft_s": t[0] if t else None,
            "steps_ms_f32": _pack("f", self.step_latencies_ms()),
            "ids_i32": _pack("i", list(self.token_ids)),
            "pieces": list(self.token_pieces),
            "first_token": self.first_token,
            "end_s": self.end_s,
            "stop_reason": self.stop_reason.value if self.stop_reason is not None else None,
        }

    @classmethod
    def from_dict(cls, data: object) -> TurnTimeline | None:
        """A timeline from its stored values; None when ``data`` is not one (wrong types, damaged
        base64, counts that disagree): a reply without a readable timeline shows none."""
        if not isinstance(data, dict) or data.get("format") != TIMELINE_FORMAT:
            return None
        try:
            steps = _unpack("f", data.get("steps_ms_f32", ""))
            ids = _unpack("i", data.get("ids_i32", ""))
        except (ValueError, binascii.Error, struct.error):
            return None
        ttft = _num(data.get("ttft_s"))
        pieces = data.get("pieces")
        if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
            return None
        times: list[float] = []
        if ttft is not None:
            times.append(ttft)
            for ms in steps:
                times.append(times[-1] + ms / 1000.0)
        if len(ids) != len(times) or len(pieces) != len(times):
            return None
        slices: list[PrefillSlice] = []
        raw_slices = data.get("slices")
        for row in raw_slices if isinstance(raw_slices, list) else ():
            if not (isinstance(row, list) and len(row) == 4):
                return None
            start, end, n = _num(row[0]), _num(row[1]), row[2]
            if start is None or end is None or not isinstance(n, int):
                return None
            slices.append(PrefillSlice(start, end, n, bool(row[3])))
        stop = data.get("stop_reason")
        return cls(
            template_s=_num(data.get("template_s")) or 0.0,
            tokenize_s=_num(data.get("tokenize_s")) or 0.0,
            reuse_s=_num(data.get("reuse_s")) or 0.0,
            prepared_s=_num(data.get("prepared_s")) or 0.0,
            prompt_tokens=_int(data.get("prompt_tokens")),
            cached_tokens=_int(data.get("cached_tokens")),
            slices=tuple(slices),
            token_times_s=tuple(times),
            token_ids=tuple(ids),
            token_pieces=tuple(pieces),
            first_token=_int(data.get("first_token")),
            end_s=_num(data.get("end_s")) or 0.0,
            stop_reason=StopReason.parse(stop) if isinstance(stop, str) else None,
        )


def _pack(kind: str, values: list[float] | list[int]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}{kind}", *values)).decode("ascii")


def _unpack(kind: str, text: object) -> list[Any]:
    if not isinstance(text, str):
        raise ValueError("not text")
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 4:
        raise ValueError("not whole 4-byte values")
    return list(struct.unpack(f"<{len(raw) // 4}{kind}", raw))


def _num(v: object) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf"):
        return float(v)
    return None


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


@dataclass
class TimelineRecorder:
    """Folds one turn's events into a :class:`TurnTimeline` as they arrive (the UI thread).

    Call :meth:`on_prompt`, :meth:`on_prefill`, :meth:`on_token`, :meth:`on_shift` and
    :meth:`on_finished` with the turn's events in order; :meth:`snapshot` gives the timeline so far.
    """

    _prompt: P.PromptPrepared | None = None
    _slices: list[PrefillSlice] = field(default_factory=list)
    _times: list[float] = field(default_factory=list)
    _ids: list[int] = field(default_factory=list)
    _pieces: list[str] = field(default_factory=list)
    first_token: int = 0  # the reply's tokens before this request's first (TurnTimeline.first_token)
    _cursor_s: float = 0.0  # the latest engine time seen: where the next slice starts
    _end_s: float = 0.0
    _stop: StopReason | None = None

    def on_prompt(self, ev: P.PromptPrepared) -> None:
        self._prompt = ev
        self._cursor_s = ev.elapsed_s

    def on_prefill(self, ev: P.PrefillProgress) -> None:
        """A slice ended (``slice_tokens`` > 0); progress inside a slice only moves nothing."""
        if ev.slice_tokens <= 0:
            return
        self._slices.append(PrefillSlice(self._cursor_s, ev.elapsed_s, ev.slice_tokens, ev.rebuild))
        self._cursor_s = ev.elapsed_s

    def on_token(self, ev: P.TokenEvent) -> None:
        self._times.append(ev.t_s)
        self._ids.append(ev.token_id)
        self._pieces.append(ev.piece)
        self._cursor_s = max(self._cursor_s, ev.t_s)

    def on_shift(self, ev: P.ContextShifted) -> None:
        """A context rebuild ended: its slices were recorded as they ended (``rebuild``)."""

    def on_finished(self, end_s: float, reason: StopReason) -> None:
        """The turn ended at ``end_s`` (engine seconds; 0: unknown, the last event's time is used)."""
        self._end_s = end_s if end_s > 0 else self._cursor_s
        self._stop = reason

    def snapshot(self) -> TurnTimeline:
        p = self._prompt
        return TurnTimeline(
            template_s=p.template_s if p else 0.0,
            tokenize_s=p.tokenize_s if p else 0.0,
            reuse_s=p.reuse_s if p else 0.0,
            prepared_s=p.elapsed_s if p else 0.0,
            prompt_tokens=p.prompt_tokens if p else 0,
            cached_tokens=p.cached_tokens if p else 0,
            slices=tuple(self._slices),
            token_times_s=tuple(self._times),
            token_ids=tuple(self._ids),
            token_pieces=tuple(self._pieces),
            first_token=self.first_token,
            end_s=self._end_s,
            stop_reason=self._stop,
        )

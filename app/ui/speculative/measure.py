""" "Measure speed-up": the reply shown's prompt regenerated greedily both ways, and the two decode speeds.

:data:`PAIRS` pairs of :class:`~app.core.protocol.requests.Generate` requests with the same messages, stop
strings and chat template, the sampler at temperature 0 (greedy: both give the model's own text, so the
runs decode the same tokens), mirostat off and ``max_tokens`` at most :data:`MAX_TOKENS`, one
``speculate=False`` and one ``speculate=True``, in alternating order (plain first, then speculated first,
...: a warm-up or a machine growing busy favours neither way). The result is the median of the pairs'
speed ratios and their range (:class:`~app.ui.speculative.figures.Speedup`; one pair read ×1.80, ×1.12,
×0.82 and ×1.06 on four presses on a shared CPU). They go through the local API's queue on the engine
(:class:`~app.ui.engine.api_requests.ApiRequests`, ``external=True``, as the local API's requests): the
engine keeps the person's KV cache and their next turn runs as if nothing had happened, and nothing is
stored in the chat. The result is a measurement shown in the Speculation view, never a new reply or
branch (decided in issue 22: the person's reply is what they asked for; a greedy rerun is a benchmark of it).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, Signal

from app.core import protocol as P
from app.core.chat.context import ChatMessage
from app.core.sampling.params import Mirostat, SamplerSettings
from app.ui.engine.api_requests import ApiRequests
from app.ui.speculative.figures import Speedup, parted_at

MAX_TOKENS = 256  # the longest rerun: enough tokens for a steady decode speed, short enough to wait for
PAIRS = 3  # plain/speculated pairs measured: a median and a range, not one pair's chance


@dataclass(frozen=True)
class MeasureSource:
    """What the two runs regenerate: the reply shown's prompt and how it was made.

    Attributes:
        messages: the conversation before the reply (system prompt first, the question last).
        sampler: the reply's sampler settings (made greedy for the runs).
        stop_strings: the reply's stop strings.
        chat_template: the person's chat template override (None: the GGUF's).
    """

    messages: tuple[ChatMessage, ...]
    sampler: SamplerSettings
    stop_strings: tuple[str, ...] = ()
    chat_template: str | None = None


def greedy_requests(src: MeasureSource) -> tuple[P.Generate, P.Generate]:
    """The two requests of a pair: without speculation, then with it (``request_id`` 0: the client numbers them)."""
    n = src.sampler.max_tokens
    sampler = replace(
        src.sampler, temperature=0.0, mirostat=Mirostat.OFF, max_tokens=MAX_TOKENS if n < 0 else min(n, MAX_TOKENS)
    )
    base = P.Generate(
        0, src.messages, sampler, src.stop_strings, external=True, chat_template=src.chat_template, speculate=False
    )
    return base, replace(base, speculate=True)


def paired_requests(src: MeasureSource, pairs: int = PAIRS) -> list[P.Generate]:
    """:func:`greedy_requests` ``pairs`` times, the order alternated: plain first, speculated first, ..."""
    plain, spec = greedy_requests(src)
    out: list[P.Generate] = []
    for i in range(pairs):
        out += [plain, spec] if i % 2 == 0 else [spec, plain]
    return out


def speedup_of(ends: list[P.Finished], sent: list[P.Generate]) -> Speedup:
    """The :class:`Speedup` of finished runs ``ends`` (in the order of ``sent``, whole pairs): the median
    pair's speeds (the pair whose ratio is :attr:`Speedup.ratio`), each pair's ratio, where the first pair's texts part, the first speculated run's counts."""
    pairs = []
    for i in range(0, len(ends) - 1, 2):
        a, b = ends[i], ends[i + 1]
        pairs.append((a, b) if sent[i].speculate is False else (b, a))
    ratios = tuple(s.stats.decode_tok_s / p.stats.decode_tok_s if p.stats.decode_tok_s > 0 else 0.0 for p, s in pairs)
    plain0, spec0 = pairs[0]
    # The speeds shown are the median pair's, so they give the ratio shown (medians of each speed need
    # not: the review of issue 22 read "x0.95: 19.2 tok/s speculated, 24.0 plain").
    mid_plain, mid_spec = pairs[ratios.index(statistics.median_low(ratios))]
    return Speedup(
        mid_plain.stats.decode_tok_s,
        mid_spec.stats.decode_tok_s,
        plain0.stats.generated_tokens,
        spec0.stats.generated_tokens,
        parted_at(plain0.text, spec0.text),
        spec0.stats.speculation,
        ratios,
    )


class SpeedupMeasure(QObject):
    """Runs one measurement at a time through ``api``, the engine's API side (see the module docstring): its
    runs are queued at once and run one after another (each capped at :data:`MAX_TOKENS`); :meth:`cancel` stops them all.

    Signals:
        progressed(str, bool): the state in words, and whether a measurement is running.
        measured(Speedup): the :class:`~app.ui.speculative.figures.Speedup` of a finished measurement.
    """

    progressed = Signal(str, bool)
    measured = Signal(Speedup)

    def __init__(self, api: ApiRequests, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.api = api
        self.sent: list[P.Generate] = []  # the requests of the measurement running (or last run)
        self._ends: list[P.Finished] = []
        self._tickets: list[int] = []
        self.running = False
        self.result: Speedup | None = None

    def start(self, src: MeasureSource | str) -> None:
        """Measure ``src`` (a text: why there is nothing to measure, said as the state)."""
        if self.running:
            return
        if isinstance(src, str):
            self.progressed.emit(src, False)
            return
        self.running = True
        self._ends = []
        self.sent = paired_requests(src)
        self._say_next()
        self._tickets = [self.api.submit(req, self._sink) for req in self.sent]
        if self.running:  # again, now that its tickets are known (the top bar names them as this measurement)
            self._say_next()

    def tickets(self) -> frozenset[int]:
        """The API tickets of the measurement running (empty: none runs)."""
        return frozenset(self._tickets) if self.running else frozenset()

    def cancel(self) -> None:
        """Stop a running measurement (its runs are cancelled; nothing is shown)."""
        for t in self._tickets:
            self.api.cancel(t)

    def _sink(self, ev: object) -> None:
        if not self.running or not isinstance(ev, (P.Finished, P.Failed)):
            return
        if isinstance(ev, P.Failed):
            self.running = False
            self.cancel()
            self.progressed.emit(f"The measurement failed: {ev.message}", False)
            return
        self._ends.append(ev)
        if len(self._ends) < len(self.sent):
            self._say_next()
            return
        self.running = False
        result = speedup_of(self._ends, self.sent)
        self.result = result
        self.progressed.emit(result.sentence(), False)
        self.measured.emit(result)

    def _say_next(self) -> None:
        """The state: which run goes next, of how many."""
        i = len(self._ends)
        how = "with" if self.sent[i].speculate else "without"
        self.progressed.emit(
            f"Measuring: run {i + 1} of {len(self.sent)}, regenerating greedily {how} speculation…", True
        )

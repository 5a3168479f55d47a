""" "Measure speed-up": the reply shown's prompt regenerated greedily both ways, and the two decode speeds.

Two :class:`~app.core.protocol.requests.Generate` requests with the same messages, stop strings and chat
template, the sampler at temperature 0 (greedy: both give the model's own text, so the two runs decode
the same tokens), mirostat off and ``max_tokens`` at most :data:`MAX_TOKENS`: first ``speculate=False``,
then ``speculate=True``. They go through the engine client's external queue (``external=True``, as the
local API's requests): the engine keeps the person's KV cache and their next turn runs as if nothing had
happened, and nothing is stored in the chat. The result is a measurement shown in the Speculation view,
never a new reply or branch (decided in issue 22: the person's reply is what they asked for; a greedy
rerun is a benchmark of it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, Signal

from app.core import protocol as P
from app.core.chat.context import ChatMessage
from app.core.sampling.params import Mirostat, SamplerSettings
from app.ui.engine.client import EngineClient
from app.ui.speculative.figures import Speedup, parted_at

MAX_TOKENS = 256  # the longest rerun: enough tokens for a steady decode speed, short enough to wait for


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
    """The two requests: without speculation, then with it (``request_id`` 0: the client numbers them)."""
    n = src.sampler.max_tokens
    sampler = replace(
        src.sampler, temperature=0.0, mirostat=Mirostat.OFF, max_tokens=MAX_TOKENS if n < 0 else min(n, MAX_TOKENS)
    )
    base = P.Generate(
        0, src.messages, sampler, src.stop_strings, external=True, chat_template=src.chat_template, speculate=False
    )
    return base, replace(base, speculate=True)


class SpeedupMeasure(QObject):
    """Runs one measurement at a time on ``engine`` (see the module docstring).

    Signals:
        progressed(str, bool): the state in words, and whether a measurement is running.
        measured(Speedup): the :class:`~app.ui.speculative.figures.Speedup` of a finished measurement.
    """

    progressed = Signal(str, bool)
    measured = Signal(Speedup)

    def __init__(self, engine: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
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
        self.sent = list(greedy_requests(src))
        self.progressed.emit("Measuring: regenerating greedily without speculation…", True)
        self._tickets = [self.engine.submit_external(req, self._sink) for req in self.sent]

    def cancel(self) -> None:
        """Stop a running measurement (its runs are cancelled; nothing is shown)."""
        for t in self._tickets:
            self.engine.cancel_external(t)

    def _sink(self, ev: object) -> None:
        if not self.running or not isinstance(ev, (P.Finished, P.Failed)):
            return
        if isinstance(ev, P.Failed):
            self.running = False
            self.cancel()
            self.progressed.emit(f"The measurement failed: {ev.message}", False)
            return
        self._ends.append(ev)
        if len(self._ends) == 1:
            self.progressed.emit("Measuring: regenerating greedily with speculation…", True)
            return
        self.running = False
        plain, spec = self._ends
        result = Speedup(
            plain.stats.decode_tok_s,
            spec.stats.decode_tok_s,
            plain.stats.generated_tokens,
            spec.stats.generated_tokens,
            parted_at(plain.text, spec.text),
            spec.stats.speculation,
        )
        self.result = result
        self.progressed.emit(result.sentence(), False)
        self.measured.emit(result)

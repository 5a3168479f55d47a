"""What happens to each sampled token of a reply, whichever loop sampled it (plain or speculative).

:class:`TokenSink` keeps the reply's tokens, its text stream (stop strings, UTF-8 held back) and the
pending :class:`~app.core.protocol.TokenEvent` s, which go to the UI in batches: the first token at
once (TTFT), then at most every ``TOKEN_FLUSH_S``. :meth:`TokenSink.look` reads what the Sampler
panel wants of one position's logits (the probability's log-sum-exp, top candidates at most every
``CANDIDATES_EVERY_S``). Both decode loops (:mod:`app.engine.decode`,
:mod:`app.engine.speculative.loop`) use it, so a token's event is made in one place.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.chat.textstream import TextStream
from app.engine.alternative import prefix_text
from app.engine.inspector import Inspector, Logits
from app.engine.vocab import Vocab, display_piece

# Tokens are sent to the UI in batches at most this often, seconds (the first token at once).
TOKEN_FLUSH_S = 0.03
# Top candidates for the Sampler panel at most this often, seconds (it repaints at ~10 Hz).
CANDIDATES_EVERY_S = 0.1


class TokenSink:
    """One reply's sampled tokens: events, text, stop strings.

    Args:
        vocab: the model's vocabulary.
        inspector: the model's inspector (log-sum-exp and top candidates of a logits row).
        req: the request (``top_candidates``, ``candidates_every_token``, ``request_id``).
        stop_strings: every stop string (the request's and the prompt format's).
        emit: sends an event to the UI.
        t0: when the request arrived (perf_counter_ns).
        prefix: the reply's tokens already in the KV cache (a branch): their text starts the reply's
            and goes out with the first token's event.

    Attributes:
        generated: the tokens sampled so far (an end-of-generation token included).
        t_first, t_last: perf_counter_ns of the first and last sample (0: none).
    """

    def __init__(
        self,
        *,
        vocab: Vocab,
        inspector: Inspector,
        req: P.Generate,
        stop_strings: tuple[str, ...],
        emit: Callable[[object], None],
        t0: int,
        prefix: Sequence[int] = (),
    ) -> None:
        self._vocab = vocab
        self._inspector = inspector
        self._req = req
        self._emit = emit
        self._t0 = t0
        self.stream = TextStream(stop_strings)
        self._head = prefix_text(self.stream, prefix, vocab) if prefix else ""
        self.generated: list[int] = []
        self.t_first = self.t_last = 0
        self._pending: list[P.TokenEvent] = []
        self._last_flush = 0
        self._last_cands = 0
        self._flush_ns = int(TOKEN_FLUSH_S * 1e9)
        self._cands_ns = int(CANDIDATES_EVERY_S * 1e9)

    @property
    def wants_logits(self) -> bool:
        """The request asked for each token's probability and top candidates."""
        return self._req.top_candidates > 0

    def look(self, logits: Logits) -> tuple[float, tuple[tuple[int, str, float], ...]]:
        """The log-sum-exp of one position's ``logits`` and, when due, its top candidates (else ``()``)."""
        lse = self._inspector.logsumexp(logits)
        cands: tuple[tuple[int, str, float], ...] = ()
        if self._req.candidates_every_token or time.perf_counter_ns() - self._last_cands >= self._cands_ns:
            cands = self._inspector.top_candidates(logits, self._req.top_candidates)
            self._last_cands = time.perf_counter_ns()
        return lse, cands

    def take(
        self,
        token: int,
        context_used: int,
        logits: Logits | None = None,
        lse: float = 0.0,
        cands: tuple[tuple[int, str, float], ...] = (),
    ) -> StopReason | None:
        """Add a sampled token: its event (sent now when a flush is due), its text.

        Args:
            token: the sampled token.
            context_used: the context's tokens once this token is evaluated (what the event shows).
            logits, lse, cands: its position's logits (for its probability), their log-sum-exp and the
                top candidates (:meth:`look`); None/()/0 when the request asked for none.

        Returns:
            ``EOS`` (an end-of-generation token: shown in the token view, never in the text),
            ``STOP_STRING`` (the text reached a stop string), or None: go on.
        """
        now = time.perf_counter_ns()
        if not self.generated:
            self.t_first = now
        self.t_last = now
        self.generated.append(token)
        p = math.exp(float(logits[token]) - lse) if logits is not None else None
        rid, index, elapsed = self._req.request_id, len(self.generated) - 1, (now - self._t0) / 1e9
        if self._vocab.is_eog(token):
            event = P.TokenEvent(rid, self._head, token, self._vocab.display(token), index, elapsed, context_used, p=p)
            self._pending.append(event)
            return StopReason.EOS
        piece = self._vocab.piece(token)
        res = self.stream.push(piece)
        self._pending.append(
            P.TokenEvent(
                rid,
                self._head + res.text if self._head else res.text,
                token,
                display_piece(piece),
                index,
                elapsed,
                context_used,
                p=p,
                candidates=cands,  # () unless asked for and due
                logsumexp=lse if cands else None,
            )
        )
        self._head = ""
        if now - self._last_flush >= self._flush_ns:
            self.flush()
            self._last_flush = now
        return StopReason.STOP_STRING if res.stopped else None

    def flush(self) -> None:
        """Send the pending token events (if any) as one :class:`~app.core.protocol.TokenBatch`."""
        if self._pending:
            self._emit(P.TokenBatch(self._req.request_id, tuple(self._pending)))
            self._pending.clear()

    def finish(self) -> str:
        """Send what is pending; the whole reply's text (stop string removed, held-back text flushed)."""
        self.flush()
        self.stream.finish()
        return self.stream.text

"""OpenAI response bodies from engine events: completions, stream chunks, logprobs, usage, timings.

``timings`` follow llama-server's names: ``prompt_n`` (prompt tokens evaluated), ``prompt_ms``,
``prompt_per_second``, ``predicted_n`` (tokens sampled), ``predicted_ms`` (first to last token),
``predicted_per_second`` ((predicted_n - 1) / predicted_ms: the first token belongs to TTFT, as in
the Stats panel), ``cache_n`` (prompt tokens reused from the KV cache); Glassbox adds ``ttft_ms``
(request reaching the engine to first token) and ``queued_ms`` (time waiting for the engine). A speculated
reply adds llama-server's ``draft_n`` (drafted tokens verified) and ``draft_n_accepted`` (those accepted).

A chat request with tools gets its calls back as OpenAI's ``tool_calls`` (``finish_reason``
``tool_calls``, ``content`` null unless the model wrote words too); a stream holds back what may be
a call (:mod:`app.server.tool_replies`) and sends the calls whole in one delta.
"""

from __future__ import annotations

import math
from typing import Any

from app.core import protocol as P
from app.core.chat.context import GenerationStats, StopReason
from app.core.tools.calls import ParsedReply
from app.server.gateway import ApiJob, ModelCard
from app.server.schema import Endpoint
from app.server.tool_replies import CallWatch, delta_calls, message_calls

_FINISH = {
    StopReason.EOS: "stop",
    StopReason.STOP_STRING: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTEXT_FULL: "length",
    StopReason.CANCELLED: "stop",
    StopReason.ERROR: "stop",
}


def finish_reason(stats: GenerationStats) -> str:
    """OpenAI's ``finish_reason`` for a turn: ``stop`` or ``length``."""
    return _FINISH[stats.stop_reason]


def piece_bytes(piece: str) -> list[int]:
    """The bytes of a token's display text (fragments of a character are shown as ``⟨F0 9F⟩``)."""
    if piece.startswith("⟨") and piece.endswith("⟩"):
        try:
            return list(bytes.fromhex(piece[1:-1]))
        except ValueError:
            pass
    return list(piece.encode("utf-8"))


def usage(stats: GenerationStats) -> dict[str, Any]:
    """OpenAI's ``usage``, with the cached prompt tokens in ``prompt_tokens_details``."""
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.generated_tokens,
        "total_tokens": stats.prompt_tokens + stats.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.cached_tokens},
    }


def timings(stats: GenerationStats, queued_s: float) -> dict[str, Any]:
    """llama-server-style ``timings`` (see the module docstring), milliseconds and tokens/s."""
    out: dict[str, Any] = {
        "cache_n": stats.cached_tokens,
        "prompt_n": stats.evaluated_tokens,
        "prompt_ms": stats.prefill_s * 1000,
        "prompt_per_second": stats.prefill_tok_s,
        "predicted_n": stats.generated_tokens,
        "predicted_ms": stats.decode_s * 1000,
        "predicted_per_second": stats.decode_tok_s,
        "ttft_ms": stats.ttft_s * 1000,
        "queued_ms": queued_s * 1000,
    }
    if stats.speculation is not None:
        out["draft_n"] = stats.speculation.drafted
        out["draft_n_accepted"] = stats.speculation.accepted
    return out


class ReplyBuilder:
    """Collects one job's token events and writes its response bodies.

    Args:
        job: the request.
        model: the model that answers (its name goes in every body).
    """

    def __init__(self, job: ApiJob, model: ModelCard) -> None:
        self.job = job
        self.model = model
        req = job.request
        self.chat = req.endpoint is Endpoint.CHAT
        self.id = f"{'chatcmpl' if self.chat else 'cmpl'}-glassbox-{job.id}"
        self.object = "chat.completion" if self.chat else "text_completion"
        self.sent_text = ""  # streamed so far
        self.tokens: list[P.TokenEvent] = []
        self._eog = set(model.eog_token_ids)
        names = req.tool_names
        self._watch = CallWatch(names, req.tool_choice.forced) if self.chat and names is not None else None
        self._streamed = ""  # the reply's text so far (tools: some of it held back)
        self._pending: list[P.TokenEvent] = []  # tokens whose text is held back (tools)
        self._parsed: ParsedReply | None = None

    def calls(self, fin: P.Finished) -> ParsedReply | None:
        """The finished reply's tool calls, or None when it has none (or no tools were offered)."""
        if self._watch is None:
            return None
        if self._parsed is None:
            self._parsed = self._watch.parse(fin.text)
        return self._parsed if self._parsed.calls else None

    # ------------------------------------------------------------------------- logprobs
    def take(self, tok: P.TokenEvent) -> None:
        """Record a token (for logprobs); the end-of-generation token is left out."""
        if tok.token_id not in self._eog:
            self.tokens.append(tok)

    def _alternatives(self, tok: P.TokenEvent) -> list[tuple[str, float]]:
        if not tok.candidates or tok.logsumexp is None:
            return []
        lse = tok.logsumexp
        return [(text, logit - lse) for _id, text, logit in tok.candidates[: self.job.request.top_logprobs]]

    @staticmethod
    def _logprob(tok: P.TokenEvent) -> float:
        return math.log(tok.p) if tok.p and tok.p > 0 else -9999.0

    def logprobs(self, tokens: list[P.TokenEvent]) -> dict[str, Any] | None:
        """``logprobs`` for ``tokens`` in the endpoint's format, or None when not asked."""
        if not self.job.request.logprobs:
            return None
        if self.chat:
            return {
                "content": [
                    {
                        "token": t.piece,
                        "logprob": self._logprob(t),
                        "bytes": piece_bytes(t.piece),
                        "top_logprobs": [
                            {"token": s, "logprob": lp, "bytes": piece_bytes(s)} for s, lp in self._alternatives(t)
                        ],
                    }
                    for t in tokens
                ]
            }
        offsets, pos = [], 0
        for t in tokens:
            offsets.append(pos)
            pos += len(t.text)
        return {
            "tokens": [t.piece for t in tokens],
            "token_logprobs": [self._logprob(t) for t in tokens],
            "top_logprobs": [dict(self._alternatives(t)) for t in tokens],
            "text_offset": offsets,
        }

    # --------------------------------------------------------------------------- bodies
    def _choice(self, text: str, finish: str | None, tokens: list[P.TokenEvent], *, delta: bool) -> dict[str, Any]:
        lp = self.logprobs(tokens) if tokens or not delta else None
        if self.chat:
            body: dict[str, Any] = (
                {"delta": {"content": text} if text or finish is None else {}}
                if delta
                else {"message": {"role": "assistant", "content": text}}
            )
            return {"index": 0, **body, "logprobs": lp, "finish_reason": finish}
        return {"index": 0, "text": text, "logprobs": lp, "finish_reason": finish}

    def _head(self, chunk: bool) -> dict[str, Any]:
        obj = f"{self.object}.chunk" if chunk and self.chat else self.object
        return {"id": self.id, "object": obj, "created": self.job.created, "model": self.model.id}

    def completion(self, fin: P.Finished, queued_s: float) -> dict[str, Any]:
        """The whole (non-streamed) response."""
        choice = self._choice(fin.text, finish_reason(fin.stats), self.tokens, delta=False)
        parsed = self.calls(fin)
        if parsed is not None:
            choice["message"] = {
                "role": "assistant",
                "content": parsed.content or None,
                "tool_calls": message_calls(parsed),
            }
            choice["finish_reason"] = "tool_calls"
        return {
            **self._head(False),
            "choices": [choice],
            "usage": usage(fin.stats),
            "timings": timings(fin.stats, queued_s),
            "system_fingerprint": "glassbox",
        }

    def first_chunk(self) -> dict[str, Any]:
        """The stream's first chat chunk (the assistant role, no text)."""
        return {
            **self._head(True),
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            ],
        }

    def text_chunk(self, tokens: list[P.TokenEvent]) -> dict[str, Any] | None:
        """A chunk for newly sampled ``tokens``; None when they add neither text nor logprobs."""
        text = "".join(t.text for t in tokens)
        kept = [t for t in tokens if t.token_id not in self._eog]
        if self._watch is not None:  # send only what cannot be a call; logprobs go with their text
            self._streamed += text
            self._pending += kept
            text = self._streamed[len(self.sent_text) : self._watch.sendable(self._streamed)]
            if not text:
                return None
            kept, self._pending = self._pending, []
        if not text and not (kept and self.job.request.logprobs):
            return None
        self.sent_text += text
        return {**self._head(True), "choices": [self._choice(text, None, kept, delta=True)]}

    def call_chunks(self, fin: P.Finished) -> list[dict[str, Any]]:
        """The stream's chunk with the reply's tool calls, whole (sent before :meth:`last_chunk`);
        none when the reply has no calls. Words before the calls not sent yet go with them."""
        parsed = self.calls(fin)
        if parsed is None:
            return []
        delta: dict[str, Any] = {"tool_calls": delta_calls(parsed)}
        if parsed.content and not self.sent_text.strip():
            delta = {"content": parsed.content, **delta}
        self.sent_text = fin.text  # nothing of it goes out as text any more
        lp = self.logprobs(self._pending) if self._pending else None
        self._pending = []
        return [{**self._head(True), "choices": [{"index": 0, "delta": delta, "logprobs": lp, "finish_reason": None}]}]

    def last_chunk(self, fin: P.Finished, queued_s: float) -> dict[str, Any]:
        """The chunk with ``finish_reason`` (and any text held back for a stop string or a possible
        tool call), with ``timings``; ``tool_calls`` after :meth:`call_chunks` sent calls."""
        rest = fin.text[len(self.sent_text) :] if fin.text.startswith(self.sent_text) else ""
        self.sent_text += rest
        finish = "tool_calls" if self.calls(fin) is not None else finish_reason(fin.stats)
        pending, self._pending = self._pending, []
        return {
            **self._head(True),
            "choices": [self._choice(rest, finish, pending, delta=True)],
            "timings": timings(fin.stats, queued_s),
        }

    def usage_chunk(self, fin: P.Finished) -> dict[str, Any]:
        """The ``stream_options.include_usage`` chunk: no choices, the usage."""
        return {**self._head(True), "choices": [], "usage": usage(fin.stats)}

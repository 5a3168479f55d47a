"""One reply from a remote engine, turned into the events the local engine sends.

:func:`generate` streams ``POST <base>/chat/completions`` (``/completions`` for a raw prompt) and
emits, through ``emit``, what :mod:`app.core.protocol` defines for a reply: one
:class:`~app.core.protocol.PromptPrepared`, :class:`~app.core.protocol.TokenBatch` es, then exactly
one :class:`~app.core.protocol.Finished` or :class:`~app.core.protocol.Failed`. So every panel works
on a remote engine as on the local one, with what the server reports:

- **Prompt tokens**: llama-server renders the chat template (``/apply-template``) and tokenizes
  (``/tokenize``, with pieces) before the reply; other servers report the count in ``usage`` only.
- **Tokens**: the reply asks for ``logprobs`` (and ``top_logprobs`` when the Tokens panel is shown),
  so each streamed chunk says how many tokens it carries and which; a chunk without them counts as one
  "token" while streaming, and the final count comes from the server (below), never from chunks.
- **Figures**: llama-server's ``timings`` give prefill (prompt_n in prompt_ms), cached tokens
  (cache_n) and decode (predicted_n in predicted_ms: the same (n - 1) / (t_last - t_first) as the local
  engine). Without them, ``usage`` gives the token counts and this side's clock the decode time
  (first to last content chunk), and what nobody reported is listed in ``GenerationStats.unreported``.
  TTFT is measured here: request sent to first text received (the network included).
- **Alternatives**: ``top_logprobs`` become the token's candidates with logit = log-probability and
  logsumexp = 0, so the panels' ``exp(logit - logsumexp)`` is the server's probability.

Stop: :meth:`RemoteReply.cancel` cuts the HTTP stream (llama-server then stops generating) and the
reply ends with Finished, stop reason ``cancelled``, holding the text received so far.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from app.core import protocol as P
from app.core.chat.context import GenerationStats, StopReason
from app.core.constraint.model import ConstraintKind
from app.core.remote import RemoteEndpoint, RemoteFacts, ServerKind
from app.core.sampling.params import SamplerSettings
from app.remote.http import Call, RemoteError, post_json

MAX_PROMPT_TOKENS_SHOWN = 4096  # PromptPrepared.new_tokens' limit, as the local engine's

Emit = Callable[[object], None]

_FINISH = {"stop": StopReason.EOS, "eos": StopReason.EOS, "length": StopReason.MAX_TOKENS}


def request_body(req: P.Generate, facts: RemoteFacts) -> dict[str, Any]:
    """The JSON body for ``req``: OpenAI's fields plus llama.cpp's samplers (top_k, min_p, repeat_penalty),
    which llama-server, vLLM and llama-cpp-python's server use and others ignore; an output constraint as
    ``response_format`` (JSON, a JSON schema) or llama-server's ``grammar`` (GBNF)."""
    s: SamplerSettings = req.sampler
    body: dict[str, Any] = {
        "model": facts.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": s.top_k,
        "min_p": s.min_p,
        "repeat_penalty": s.repeat_penalty,
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.frequency_penalty,
        "logprobs": True,
    }
    if s.seed is not None:
        body["seed"] = s.seed
    if s.max_tokens > 0:
        body["max_tokens"] = s.max_tokens
    if req.stop_strings:
        # llama-server takes any number; OpenAI's API allows up to 4
        body["stop"] = list(req.stop_strings) if facts.kind is ServerKind.LLAMA_SERVER else list(req.stop_strings)[:4]
    if req.raw_prompt is not None:
        body["prompt"] = req.raw_prompt
        body["logprobs"] = max(1, req.top_candidates)  # the completions API's logprobs is a count
    else:
        body["messages"] = [{"role": str(m.role), "content": m.content} for m in req.messages]
        # At least 1: llama-cpp-python's server sends logprobs only with top_logprobs, and llama-server
        # computes 20 when none is given; the logprobs are what count the tokens in each chunk.
        body["top_logprobs"] = min(20, max(1, req.top_candidates))
    c = req.constraint
    if c is not None and c.kind == ConstraintKind.JSON:
        body["response_format"] = {"type": "json_object"}
    elif c is not None and c.kind == ConstraintKind.JSON_SCHEMA:
        schema = json.loads(c.text)
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    elif c is not None and c.kind == ConstraintKind.GBNF:
        body["grammar"] = c.text  # llama-server's and llama-cpp-python's server's field; others ignore it
    return body


def _prompt_tokens(endpoint: RemoteEndpoint, req: P.Generate) -> tuple[str, tuple[tuple[int, str], ...]] | None:
    """llama-server: the rendered prompt and its ``(id, piece)`` tokens, or None when it cannot say."""
    root = endpoint.server_root
    try:
        prompt: object = req.raw_prompt
        if prompt is None:
            msgs = [{"role": str(m.role), "content": m.content} for m in req.messages]
            rendered = post_json(endpoint, root + "/apply-template", {"messages": msgs})
            prompt = rendered.get("prompt") if isinstance(rendered, dict) else None
        if not isinstance(prompt, str):
            return None
        out = post_json(
            endpoint, root + "/tokenize", {"content": prompt, "add_special": True, "with_pieces": True}
        )  # fmt: skip
    except RemoteError:
        return None
    toks = out.get("tokens") if isinstance(out, dict) else None
    if not isinstance(toks, list):
        return None
    pairs: list[tuple[int, str]] = []
    for t in toks:
        if not isinstance(t, dict) or not isinstance(t.get("id"), int):
            return None
        piece = t.get("piece")
        text = piece if isinstance(piece, str) else bytes(piece).decode("utf-8", "replace") if piece else ""
        pairs.append((t["id"], text))
    return prompt, tuple(pairs)


class RemoteReply:
    """One streamed reply; :meth:`run` blocks (call it on a worker thread), :meth:`cancel` from any thread.

    Args:
        endpoint: the server; facts: what the connection test learnt (kind, n_ctx, /tokenize);
        req: the Generate request; emit: called on the worker thread with each event, in order.
    """

    def __init__(self, endpoint: RemoteEndpoint, facts: RemoteFacts, req: P.Generate, emit: Emit) -> None:
        self.endpoint = endpoint
        self.facts = facts
        self.req = req
        self.emit = emit
        self._cancelled = threading.Event()
        self._call: Call | None = None
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Stop: cut the stream; the reply ends with what was received (stop reason ``cancelled``)."""
        self._cancelled.set()
        with self._lock:
            call = self._call
        if call is not None:
            call.abort()

    def run(self) -> None:
        """Stream the reply, emitting its events; always ends with one Finished or Failed."""
        rid = self.req.request_id
        try:
            self._run()
        except RemoteError as exc:
            self.emit(P.Failed(rid, P.FailureKind.REMOTE, exc.message))
        except Exception as exc:
            self.emit(P.Failed(rid, P.FailureKind.INTERNAL, f"The remote engine's client failed: {exc!r}"))

    def _run(self) -> None:
        req, rid = self.req, self.req.request_id
        t0 = time.monotonic()
        shown = _prompt_tokens(self.endpoint, req) if self.facts.can_tokenize else None
        prompt_text, prompt_toks = shown if shown is not None else ("", ())
        n_prompt = len(prompt_toks)
        self.emit(
            P.PromptPrepared(
                rid, time.monotonic() - t0, n_prompt, 0, n_prompt, 0, prompt_toks[:MAX_PROMPT_TOKENS_SHOWN], prompt_text
            )
        )
        path = "/completions" if req.raw_prompt is not None else "/chat/completions"
        call = Call(self.endpoint, self.endpoint.base_url + path, request_body(req, self.facts))
        with self._lock:
            self._call = call
        if self._cancelled.is_set():
            call.abort()
        t_send = time.monotonic()
        text_parts: list[str] = []
        index = 0
        t_first: float | None = None
        t_last = 0.0
        finish: str | None = None
        usage: dict[str, Any] = {}
        timings: dict[str, Any] = {}
        counted_all = True  # every content chunk carried its tokens' logprobs
        try:
            for event in call.events():
                if isinstance(event.get("usage"), dict):
                    usage = event["usage"]
                if isinstance(event.get("timings"), dict):
                    timings = event["timings"]
                choices = event.get("choices")
                if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                    continue
                choice = choices[0]
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
                content = _content(choice)
                toks = _logprob_tokens(choice)
                if not content and not toks:
                    continue
                now = time.monotonic() - t_send
                if t_first is None:
                    t_first = now
                t_last = now
                if content:
                    text_parts.append(content)
                if not toks:
                    counted_all = False
                    toks = [(-1, content, None, ())]
                batch = []
                for k, (tid, piece, p, tops) in enumerate(toks):
                    last = k == len(toks) - 1
                    cands = tops[: req.top_candidates]  # none unless the Tokens panel asked
                    batch.append(
                        P.TokenEvent(
                            rid,
                            content if last else "",
                            tid,
                            piece,
                            index,
                            now + (t_send - t0),
                            min(n_prompt + index + 1, self.facts.n_ctx) if self.facts.n_ctx else n_prompt + index + 1,
                            p,
                            cands,
                            0.0 if cands else None,
                        )
                    )
                    index += 1
                self.emit(P.TokenBatch(rid, tuple(batch)))
        except RemoteError as exc:
            if not self._cancelled.is_set():
                raise RemoteError(exc.kind, exc.message, exc.status) from None
        cancelled = self._cancelled.is_set()
        stop = StopReason.CANCELLED if cancelled else _FINISH.get(finish or "stop", StopReason.EOS)
        stats = self._stats(
            stop, usage, timings, n_prompt, index if counted_all else None, t_first, t_last, t_send - t0
        )  # fmt: skip
        self.emit(P.Finished(rid, "".join(text_parts), stats))

    def _stats(
        self,
        stop: StopReason,
        usage: dict[str, Any],
        timings: dict[str, Any],
        n_prompt: int,
        counted: int | None,
        t_first: float | None,
        t_last: float,
        t_prepare: float,
    ) -> GenerationStats:
        """The turn's figures from what the server reported (see the module docstring)."""
        unreported: list[str] = []
        seed = self.req.sampler.seed
        if seed is None:
            unreported.append("seed")
        ttft = t_prepare + t_first if t_first is not None else 0.0
        if _num(timings.get("predicted_n")) is not None:  # llama-server
            cache_n = int(_num(timings.get("cache_n")) or 0)
            prompt_n = int(_num(timings.get("prompt_n")) or 0)
            prompt_ms = float(_num(timings.get("prompt_ms")) or 0.0)
            gen_n = int(_num(timings.get("predicted_n")) or 0)
            gen_ms = float(_num(timings.get("predicted_ms")) or 0.0)
            prompt_total = cache_n + prompt_n
            return GenerationStats(
                prompt_tokens=prompt_total,
                cached_tokens=cache_n,
                evaluated_tokens=prompt_n,
                prefill_s=prompt_ms / 1000,
                ttft_s=ttft,
                generated_tokens=gen_n,
                decode_s=gen_ms / 1000,
                n_ctx=self.facts.n_ctx,
                context_used=prompt_total + gen_n,
                stop_reason=stop,
                seed=seed or 0,
                llama_prefill_ms=prompt_ms,
                llama_decode_ms=gen_ms,
                llama_n_prefill=prompt_n,
                llama_n_decode=gen_n,
                unreported=(*unreported, "kv_used_bytes", "kv_allocated_bytes"),
            )
        prompt_total = int(_num(usage.get("prompt_tokens")) or n_prompt)
        gen = _num(usage.get("completion_tokens"))
        generated = int(gen) if gen is not None else counted
        if not prompt_total:
            unreported.append("prompt_tokens")
        if generated is None:
            unreported.append("generated_tokens")
        details = usage.get("prompt_tokens_details")
        cached = _num(details.get("cached_tokens")) if isinstance(details, dict) else None
        if cached is None:
            unreported.append("cached_tokens")
        unreported += ["evaluated_tokens", "prefill_s", "llama_prefill_ms", "llama_decode_ms"]
        unreported += ["llama_n_prefill", "llama_n_decode", "kv_used_bytes", "kv_allocated_bytes"]
        if not self.facts.n_ctx:
            unreported.append("n_ctx")
        n_gen = generated or 0
        return GenerationStats(
            prompt_tokens=prompt_total,
            cached_tokens=int(cached or 0),
            ttft_s=ttft,
            generated_tokens=n_gen,
            decode_s=max(0.0, t_last - t_first) if t_first is not None and n_gen > 1 else 0.0,
            n_ctx=self.facts.n_ctx,
            context_used=prompt_total + n_gen,
            stop_reason=stop,
            seed=seed or 0,
            unreported=tuple(unreported),
        )


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def _content(choice: dict[str, Any]) -> str:
    """The text a chunk adds: the chat delta's ``content``, or the completions API's ``text``."""
    delta = choice.get("delta")
    if isinstance(delta, dict):
        c = delta.get("content")
        return c if isinstance(c, str) else ""
    t = choice.get("text")
    return t if isinstance(t, str) else ""


Tok = tuple[int, str, float | None, tuple[tuple[int, str, float], ...]]


def _logprob_tokens(choice: dict[str, Any]) -> list[Tok]:
    """The chunk's tokens from its ``logprobs``: ``(id or -1, text, p, top candidates (id, text, logprob))``.

    The chat API's ``logprobs.content`` list (llama-server adds each token's ``id``) or the
    completions API's ``tokens`` / ``token_logprobs`` / ``top_logprobs`` lists.
    """
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        return []
    out: list[Tok] = []
    content = lp.get("content")
    if isinstance(content, list):
        for item in content:
            if not isinstance(item, dict) or not isinstance(item.get("token"), str):
                continue
            logprob = _num(item.get("logprob"))
            tops = item.get("top_logprobs")
            cands = tuple(
                (c["id"] if isinstance(c.get("id"), int) else -1, str(c["token"]), float(c["logprob"]))
                for c in (tops if isinstance(tops, list) else [])
                if isinstance(c, dict) and isinstance(c.get("token"), str) and _num(c.get("logprob")) is not None
            )
            tid = item["id"] if isinstance(item.get("id"), int) else -1
            out.append((tid, item["token"], math.exp(logprob) if logprob is not None else None, cands))
        return out
    tokens, lps, tops = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
    if isinstance(tokens, list):
        for i, tok in enumerate(tokens):
            logprob = _num(lps[i]) if isinstance(lps, list) and i < len(lps) else None
            top = tops[i] if isinstance(tops, list) and i < len(tops) and isinstance(tops[i], dict) else {}
            cands = tuple((-1, str(k), float(v)) for k, v in top.items() if _num(v) is not None)
            out.append((-1, str(tok), math.exp(logprob) if logprob is not None else None, cands))
    return out

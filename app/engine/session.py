"""The engine's model session: owns llama_cpp.Llama and runs one turn at a time.

One turn, step by step (each step measured with ``time.perf_counter_ns``):

1. Render the chat template from the GGUF metadata (Jinja2, as transformers
   and llama-cpp-python do) and tokenize with special tokens parsed.
2. Fit the context (policy STOP: refuse with both numbers; ROLLING: drop the
   oldest turns).
3. Keep the longest common token prefix with what the KV cache holds
   (``llama_memory_seq_rm`` of the rest) so turn N+1 evaluates only what is new.
4. Prefill the rest in slices of at most ``n_batch`` tokens at fixed positions
   (reproducible), with the cancel flag checked between slices and, through
   llama.cpp's abort callback, between graph nodes inside a slice.
5. Decode loop: sample with llama.cpp's own sampler chain, detokenize without
   splitting UTF-8 characters, stop at end-of-generation tokens, stop strings,
   max_tokens, the context limit or the cancel flag.

llama.cpp's own counters (``llama_perf_context``) are reported next to ours
as a cross-check.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import llama_cpp
import numpy as np
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.core import protocol as P
from app.core.chat import ChatMessage, ContextPolicy, GenerationStats, LoadSettings, StopReason
from app.core.gguf_info import GGUFError, GGUFInfo, read_gguf_info
from app.core.memory import KVCacheLayout, kv_cache_layout
from app.core.sampling import SamplerSettings
from app.core.textstream import TextStream
from app.engine.llama_log import LlamaLog

log = logging.getLogger("glassbox.engine")

# Tokens kept free for the reply when the rolling policy trims the prompt.
ROLLING_RESERVE_FRACTION = 0.25
MAX_REPORTED_PROMPT_TOKENS = 4096
# Tokens are sent to the UI in batches at most this often (the first token at once).
TOKEN_FLUSH_S = 0.03
# Top candidates for the Sampler panel at most this often (it repaints at ~10 Hz).
CANDIDATES_EVERY_S = 0.1


class CancelFlag(Protocol):
    def is_set(self) -> bool: ...


class EngineError(Exception):
    """A request failed in a way the person can act on (becomes a ``Failed`` event)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def available_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def auto_threads() -> int:
    """Decode threads for llama.cpp: one CPU fewer than available (at least 1, at most 8).

    llama.cpp's threads meet at a barrier after every graph node; when one of them
    loses its CPU to another process (the window repainting, a browser), the
    others wait. Measured here on 2 CPUs with one busy process beside it:
    2 threads fell to 0.6-6.7 tok/s on SmolLM2, 1 thread kept 40-85 tok/s.
    Leaving a CPU for the window keeps decode speed steady.
    """
    return max(1, min(available_cpus() - 1, 8))


def auto_threads_batch() -> int:
    """Prefill threads: the same rule as decode (one CPU fewer than available, at most 16).

    Prefill scales with threads when the machine is idle (SmolLM2 here: 165 tok/s on
    1 thread, 260 on 2), but it collapses the same way decode does when another
    process takes a CPU: a 23-token slice took over 2 s on 2 threads beside a busy
    neighbour. Set n_threads in the Model panel to use every CPU on an idle machine.
    """
    return max(1, min(available_cpus() - 1, 16))


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def display_piece(piece: bytes) -> str:
    """A token's bytes as text for the token view: fragments of a UTF-8 character as ⟨F0 9F⟩."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return "⟨" + piece.hex(" ").upper() + "⟩"


@dataclass
class _Prompt:
    tokens: list[int]
    text: str
    dropped: int


class PlainTranscript:
    """Prompt format for models without a chat template (base models).

    ``System\\n\\nUser: ...\\nAssistant: ...``; generation stops at a new "User:" line.
    """

    stop = ("\nUser:",)

    def render(self, messages: Sequence[ChatMessage], continue_last: bool) -> str:
        parts: list[str] = []
        for m in messages:
            if m.role == "system":
                if m.content.strip():
                    parts.append(m.content.strip() + "\n\n")
            elif m.role == "user":
                parts.append(f"User: {m.content}\n")
            else:
                parts.append(f"Assistant: {m.content}\n")
        if continue_last and messages and messages[-1].role == "assistant":
            parts[-1] = parts[-1][:-1]  # keep going inside the last assistant line
        else:
            parts.append("Assistant:")
        return "".join(parts)


class Session:
    """Owns one loaded model and its context. Not thread-safe: one request at a time.

    Args:
        emit: called with each event (the process loop sends it to the UI).
        cancel: the shared cancel flag (``multiprocessing.Event``).
        llama_log: the process's llama.cpp log capture.
    """

    def __init__(self, emit: Callable[[object], None], cancel: CancelFlag, llama_log: LlamaLog) -> None:
        self.emit = emit
        self.cancel = cancel
        self.llama_log = llama_log
        self.llm: llama_cpp.Llama | None = None
        self.info: GGUFInfo | None = None
        self.settings = LoadSettings()
        self.layout: KVCacheLayout | None = None
        self.n_ctx = 0
        self._vocab = None
        self._formatter: Jinja2ChatFormatter | None = None
        self._plain = PlainTranscript()
        self._template_stop: tuple[str, ...] = ()
        self._piece_buf = ctypes.create_string_buffer(256)
        self._add_bos = False
        self._bos = -1
        self._nodes_per_ubatch = 0  # graph nodes of one full ubatch (for progress within a slice)
        self._lse_buf: np.ndarray | None = None

    # ----------------------------------------------------------------------------------- load
    def load(self, req: P.LoadModel) -> P.ModelLoaded:
        """Load ``req.path``; the previous model (if any) is freed first.

        Raises:
            EngineError: ``bad_model`` (the file fails validation; llama.cpp never sees it)
                or ``load`` (llama.cpp refused it; its error lines are quoted).
        """
        t0 = time.perf_counter()
        try:
            info = read_gguf_info(req.path)
        except GGUFError as exc:
            raise EngineError("bad_model", exc.message) from None
        missing = info.missing_parts()
        if missing:
            raise EngineError(
                "bad_model",
                f"{Path(req.path).name}: this model is split into {len(info.split_paths())} files and "
                f"{', '.join(p.name for p in missing)} {'is' if len(missing) == 1 else 'are'} missing. "
                "Download the missing part(s) into the same folder.",
            )
        self.unload()
        s = req.settings
        gpu = bool(llama_cpp.llama_supports_gpu_offload())
        n_threads = s.n_threads or auto_threads()
        n_threads_batch = s.n_threads or auto_threads_batch()
        n_ctx_req = s.n_ctx or info.context_length or 4096
        n_batch = max(16, s.n_batch)
        self.llama_log.mark()
        try:
            llm = llama_cpp.Llama(
                model_path=req.path,
                n_ctx=n_ctx_req,
                n_batch=n_batch,
                n_ubatch=min(n_batch, 512),
                n_threads=n_threads,
                n_threads_batch=n_threads_batch,
                n_gpu_layers=s.n_gpu_layers if gpu else 0,
                swa_full=s.swa_full,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            details = self.llama_log.errors_since_mark()
            why = "; ".join(details) if details else str(exc)
            raise EngineError(
                "load",
                f"llama.cpp could not load {Path(req.path).name}: {why}. "
                "The file passed Glassbox's checks, so this llama.cpp build may not support this "
                f"architecture ({info.architecture}) or quantization ({info.quant_type}), or memory ran out.",
            ) from None
        self.llm = llm
        self.info = info
        self.settings = replace(s, n_threads=n_threads, n_batch=n_batch, n_gpu_layers=s.n_gpu_layers if gpu else 0)
        self.n_ctx = llm.n_ctx()
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self._bos = int(llama_cpp.llama_vocab_bos(self._vocab))
        eos = int(llama_cpp.llama_vocab_eos(self._vocab))
        eot = int(llama_cpp.llama_vocab_eot(self._vocab))
        bos_text = self._token_text(self._bos) if self._bos >= 0 else ""
        eos_text = self._token_text(eos) if eos >= 0 else ""
        self.layout = kv_cache_layout(info, self.n_ctx, n_ubatch=min(n_batch, 512), swa_full=s.swa_full)
        self._formatter = None
        self._template_stop = ()
        template = info.chat_template
        if template:
            try:
                self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text)
                self._template_stop = (eos_text,) if eos_text else ()
            except Exception as exc:  # a template jinja2 cannot compile: fall back, say so
                log.warning("chat template of %s does not compile (%s); using a plain transcript", req.path, exc)
                self.emit(
                    P.LogLine(
                        "warning", f"The model's chat template does not compile ({exc}); using a plain transcript."
                    )
                )
                template = None
        # Nodes of one ubatch's graph, for progress inside a prefill slice (refined by the
        # first full slice): the reserve graph llama.cpp logs at load has the same shape.
        self._nodes_per_ubatch = self.llama_log.graph_nodes()
        return P.ModelLoaded(
            request_id=req.request_id,
            info=info,
            settings=self.settings,
            n_ctx=self.n_ctx,
            n_batch=n_batch,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            gpu_offload=gpu,
            load_s=time.perf_counter() - t0,
            kv_allocated_bytes=self.layout.allocated_bytes,
            kv_reported_bytes=self.llama_log.kv_buffer_bytes(),
            compute_reported_bytes=self.llama_log.compute_buffer_bytes(),
            chat_template=template,
            bos_text=bos_text,
            eos_text=eos_text,
            eog_token_ids=tuple(sorted({t for t in (eos, eot) if t >= 0})),
            add_bos=self._add_bos,
        )

    def unload(self) -> None:
        """Free the model and its context."""
        if self.llm is not None:
            self.llm.close()
        self.llm = None
        self.info = None
        self._vocab = None
        self._formatter = None

    def reset(self) -> None:
        """Empty the KV cache ("New chat")."""
        if self.llm is not None:
            mem = llama_cpp.llama_get_memory(self.llm.ctx)
            if mem is not None:
                llama_cpp.llama_memory_clear(mem, True)
            self.llm.n_tokens = 0

    # ----------------------------------------------------------------------------- tokens
    def _piece(self, token: int) -> bytes:
        buf = self._piece_buf
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        if n < 0:
            self._piece_buf = buf = ctypes.create_string_buffer(-n + 16)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        return buf.raw[:n]

    def _token_text(self, token: int, special: bool = True) -> str:
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        return buf.raw[: max(n, 0)].decode("utf-8", errors="replace")

    def token_piece_text(self, token: int) -> str:
        """Text of one token for display, special tokens included (``<|im_start|>``)."""
        b = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, b, len(b), 0, True)
        return display_piece(b.raw[: max(n, 0)])

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """Token ids of ``text`` (no BOS added)."""
        llm = self._require_model()
        return llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def stream_pieces(self, tokens: Sequence[int]) -> list[str]:
        """Text each token makes visible when streamed in order (UTF-8 safe).

        This is exactly what the decode loop shows; tests use it to check that
        split characters are never broken (cases E1, E2).
        """
        stream = TextStream()
        out = [stream.push(self._piece(t)).text for t in tokens]
        tail = stream.finish().text
        if tail:
            out.append(tail)
        return out

    def _require_model(self) -> llama_cpp.Llama:
        if self.llm is None:
            raise EngineError("no_model", "No model is loaded. Open a GGUF model first (File → Open model).")
        return self.llm

    # ----------------------------------------------------------------------------- prompt
    def render(self, messages: Sequence[ChatMessage], continue_last: bool = False) -> str:
        """The prompt text for ``messages`` with the model's chat template.

        Raises:
            EngineError: ``template`` when the template rejects the conversation.
        """
        if self._formatter is None:
            return self._plain.render(messages, continue_last)
        msgs = list(messages)
        tail = ""
        if continue_last and msgs and msgs[-1].role == "assistant":
            tail = msgs.pop().content
        try:
            out = self._formatter(messages=[{"role": m.role, "content": m.content} for m in msgs]).prompt
        except Exception as exc:  # jinja2 raise_exception(...) or a template bug
            raise EngineError("template", f"The model's chat template rejected this conversation: {exc}") from None
        return out + tail

    def _tokens_for(self, messages: Sequence[ChatMessage], continue_last: bool) -> tuple[list[int], str]:
        text = self.render(messages, continue_last)
        toks = self.tokenize(text, special=True)
        if self._add_bos and self._bos >= 0 and (not toks or toks[0] != self._bos):
            toks.insert(0, self._bos)
        return toks, text

    def _fit_prompt(self, messages: list[ChatMessage], continue_last: bool, policy: ContextPolicy) -> _Prompt:
        toks, text = self._tokens_for(messages, continue_last)
        if len(toks) < self.n_ctx:
            return _Prompt(toks, text, 0)
        n_full = len(toks)
        if policy == ContextPolicy.ROLLING:
            budget = int(self.n_ctx * (1 - ROLLING_RESERVE_FRACTION))
            kept, dropped = self._drop_oldest(messages, budget, continue_last)
            if kept is not None:
                toks, text = self._tokens_for(kept, continue_last)
                return _Prompt(toks, text, dropped)
        last_len = len(self._tokens_for([m for m in messages if m.role == "system"] + messages[-1:], continue_last)[0])
        if last_len >= self.n_ctx:
            advice = (
                f"Your message alone takes {last_len} tokens. Raise n_ctx in the Model panel "
                f"(this model was trained for {self.info.context_length if self.info else '?'} tokens), "
                "or shorten the message."
            )
        else:
            advice = (
                f"Raise n_ctx in the Model panel (this model was trained for "
                f"{self.info.context_length if self.info else '?'} tokens), or set the context policy to "
                '"Drop oldest turns and go on" so the oldest messages are left out.'
            )
        raise EngineError(
            "context_overflow",
            f"The conversation is {n_full} tokens but the context holds {self.n_ctx} (n_ctx). {advice}",
        )

    def _drop_oldest(
        self, messages: list[ChatMessage], budget: int, continue_last: bool
    ) -> tuple[list[ChatMessage] | None, int]:
        """Drop the oldest non-system messages until the prompt fits in ``budget`` tokens."""
        system = [m for m in messages[:1] if m.role == "system"]
        rest = messages[len(system) :]
        dropped = 0
        while len(rest) > 1:
            # Drop a whole exchange when possible so roles keep alternating.
            n = 2 if len(rest) > 2 and rest[0].role == "user" and rest[1].role == "assistant" else 1
            rest = rest[n:]
            dropped += n
            if len(self._tokens_for(system + rest, continue_last)[0]) <= budget:
                return system + rest, dropped
        return None, dropped

    # ------------------------------------------------------------------------- generation
    def generate(self, req: P.Generate) -> P.Finished:
        """Run one turn, emitting PromptPrepared, PrefillProgress and TokenEvent events.

        Returns:
            The terminal :class:`Finished` event (the caller emits it).

        Raises:
            EngineError: no model, a sampler value out of range, context overflow (STOP
                policy, or nothing left to drop), or a template error; nothing is generated then.
        """
        t0 = time.perf_counter_ns()
        llm = self._require_model()
        assert self.layout is not None
        try:
            req.sampler.validated()
        except ValueError as exc:
            raise EngineError("bad_settings", f"The sampler settings cannot be used: {exc}.") from None
        policy = ContextPolicy(req.context_policy or self.settings.context_policy)
        messages = list(req.messages)
        prompt = self._fit_prompt(messages, req.continue_last, policy)
        llama_cpp.llama_perf_context_reset(llm.ctx)

        cached = self._rewind_to_prefix(prompt.tokens)
        new = prompt.tokens[cached:]
        self.emit(
            P.PromptPrepared(
                request_id=req.request_id,
                elapsed_s=(time.perf_counter_ns() - t0) / 1e9,
                prompt_tokens=len(prompt.tokens),
                cached_tokens=cached,
                to_evaluate=len(new),
                dropped_messages=prompt.dropped,
                new_tokens=tuple((t, self.token_piece_text(t)) for t in new[-MAX_REPORTED_PROMPT_TOKENS:]),
                prompt_text=prompt.text,
            )
        )
        seed = req.sampler.resolved_seed()
        stats = dict(
            prompt_tokens=len(prompt.tokens),
            cached_tokens=cached,
            evaluated_tokens=0,
            n_ctx=self.n_ctx,
            seed=seed,
            dropped_messages=prompt.dropped,
            kv_allocated_bytes=self.layout.allocated_bytes,
        )
        t_prefill0 = time.perf_counter_ns()
        done = self._prefill(req.request_id, new, t0)
        prefill_ns = time.perf_counter_ns() - t_prefill0
        stats.update(evaluated_tokens=done, prefill_s=prefill_ns / 1e9)
        if done < len(new):  # cancelled during prefill
            return self._finish(req, "", StopReason.CANCELLED, stats, 0, t0, 0, 0)

        chain = self._make_sampler(req.sampler, seed, prompt.tokens)
        try:
            return self._decode(req, chain, stats, t0, messages, policy)
        finally:
            llama_cpp.llama_sampler_free(chain)

    def _rewind_to_prefix(self, tokens: list[int]) -> int:
        """Keep the longest cached prefix of ``tokens`` in the KV cache; return its length."""
        llm = self.llm
        assert llm is not None
        cached_now = llm.input_ids[: llm.n_tokens].tolist()
        keep = common_prefix_len(cached_now, tokens)
        if keep >= len(tokens):
            keep = len(tokens) - 1  # re-evaluate the last token: sampling needs its logits
        keep = max(keep, 0)
        mem = llama_cpp.llama_get_memory(llm.ctx)
        if keep < llm.n_tokens:
            if not llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
                # Partial removal unsupported (e.g. SWA cache without swa_full): start over.
                llama_cpp.llama_memory_clear(mem, True)
                keep = 0
        llm.n_tokens = keep
        return keep

    def _prefill(self, request_id: int, tokens: list[int], t0: int) -> int:
        """Evaluate ``tokens`` (appended after the cached prefix), Stop-able at any moment.

        Slices end at absolute positions that are multiples of ``n_batch``, the same
        on every machine, and the last token is evaluated on its own. Both matter
        for reproducible replies: llama.cpp's results depend slightly on how a
        prompt is cut into batches (Gemma 3 270M picks a different greedy token
        after 3 tokens when the prompt is cut at 128 instead of 512), and its
        single-token path gives logits that differ from the batched path (by up to
        0.9). So a prompt is always cut the same way, whatever the speed.

        Stop works inside a slice too: while prefill runs, llama.cpp's abort
        callback (checked between graph nodes, ``llama_set_abort_callback``) reads
        the cancel flag; llama.cpp then drops the unfinished batch from the KV
        cache. The same callback reports progress within a slice about 10 times a
        second. It is removed for decode, where the flag is checked between tokens.

        Returns:
            How many were evaluated (less than ``len(tokens)`` when cancelled).
        """
        llm = self.llm
        assert llm is not None
        n_batch = self.settings.n_batch
        n_ubatch = min(n_batch, 512)
        total = len(tokens)
        start = llm.n_tokens
        done = 0
        state = {"nodes": 0, "per_ubatch": self._nodes_per_ubatch, "base": 0, "size": 0, "last": time.perf_counter_ns()}
        cancel = self.cancel

        def on_node(_data) -> bool:
            if cancel.is_set():
                return True
            state["nodes"] += 1
            per = state["per_ubatch"]
            now = time.perf_counter_ns()
            if per and now - state["last"] >= 100_000_000:
                state["last"] = now
                n_ub = -(-state["size"] // n_ubatch)
                frac = min(0.99, state["nodes"] / (per * n_ub))
                self.emit(
                    P.PrefillProgress(request_id, state["base"] + int(frac * state["size"]), total, (now - t0) / 1e9)
                )
            return False

        callback = llama_cpp.ggml_abort_callback(on_node)
        llama_cpp.llama_set_abort_callback(llm.ctx, callback, None)
        try:
            while done < total:
                if cancel.is_set():
                    return done
                pos = start + done
                if done == total - 1:
                    size = 1
                else:
                    size = min((pos // n_batch + 1) * n_batch - pos, total - 1 - done)
                state.update(nodes=0, base=done, size=size)
                try:
                    llm.eval(tokens[done : done + size])
                except RuntimeError:
                    if not cancel.is_set():
                        raise
                    # Aborted: llama.cpp removed the unfinished ubatch; drop any finished
                    # ubatches of this slice too, so the cache holds exactly llm.n_tokens tokens.
                    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), 0, llm.n_tokens, -1)
                    return done
                if size >= n_ubatch and state["nodes"]:
                    state["per_ubatch"] = self._nodes_per_ubatch = state["nodes"] // (-(-size // n_ubatch))
                done += size
                self.emit(P.PrefillProgress(request_id, done, total, (time.perf_counter_ns() - t0) / 1e9))
            return done
        finally:
            llama_cpp.llama_set_abort_callback(llm.ctx, llama_cpp.ggml_abort_callback(), None)

    def _make_sampler(self, s: SamplerSettings, seed: int, prompt_tokens: Sequence[int]):
        """llama.cpp's sampler chain for ``s`` (order: llama.cpp common defaults)."""
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = lambda smpl: llama_cpp.llama_sampler_chain_add(chain, smpl)  # noqa: E731
        last_n = self.n_ctx if s.repeat_last_n < 0 else s.repeat_last_n
        n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        add(
            llama_cpp.llama_sampler_init_penalties(
                n_vocab, last_n, s.repeat_penalty, s.frequency_penalty, s.presence_penalty
            )
        )
        if s.is_greedy:
            add(llama_cpp.llama_sampler_init_greedy())
        else:
            add(llama_cpp.llama_sampler_init_top_k(s.top_k))
            add(llama_cpp.llama_sampler_init_typical(s.typical_p, 1))
            add(llama_cpp.llama_sampler_init_top_p(s.top_p, 1))
            add(llama_cpp.llama_sampler_init_min_p(s.min_p, 1))
            add(llama_cpp.llama_sampler_init_temp(s.temperature))
            add(llama_cpp.llama_sampler_init_dist(seed))
        # Penalties look back over the context, prompt included (as llama.cpp's main example does).
        if last_n > 0 and (s.repeat_penalty != 1.0 or s.frequency_penalty != 0.0 or s.presence_penalty != 0.0):
            for t in prompt_tokens[-last_n:]:
                llama_cpp.llama_sampler_accept(chain, t)
        return chain

    def _logits(self) -> np.ndarray:
        """The last position's logits as a numpy view (n_vocab floats, no copy)."""
        llm = self.llm
        assert llm is not None
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))

    def _logsumexp(self, logits: np.ndarray) -> float:
        """log(sum(exp(logits))) over the vocabulary, in a reused float32 buffer (no allocation
        per token: 262k-token vocabularies make this the costliest step of the inspector)."""
        buf = self._lse_buf
        if buf is None or buf.shape != logits.shape:
            buf = self._lse_buf = np.empty(logits.shape, dtype=np.float32)
        m = float(logits.max())
        np.subtract(logits, m, out=buf)
        np.exp(buf, out=buf)
        return m + math.log(float(buf.sum(dtype=np.float64)))

    def _top_candidates(self, logits: np.ndarray, n: int) -> tuple[tuple[int, str, float], ...]:
        """The ``n`` highest logits as ``(token_id, text, logit)``, best first."""
        k = min(n, logits.shape[0])
        idx = np.argpartition(logits, -k)[-k:]
        idx = idx[np.argsort(-logits[idx])]
        return tuple((int(i), self.token_piece_text(int(i)), float(logits[i])) for i in idx)

    def _decode(
        self, req: P.Generate, chain, stats: dict, t0: int, messages: list[ChatMessage], policy: ContextPolicy
    ) -> P.Finished:
        """The decode loop: sample, detokenize, check stops, evaluate the token; repeat.

        Tokens go to the UI in batches (:class:`~app.core.protocol.TokenBatch`): the
        first token at once (TTFT), then at most every ``TOKEN_FLUSH_S``, so the UI
        process wakes ~30 times a second instead of once per token. With
        ``req.top_candidates`` set, each token carries its probability under the raw
        model (one log-sum-exp over the vocabulary) and, at most every
        ``CANDIDATES_EVERY_S``, the top candidates for the Sampler panel.
        """
        llm = self.llm
        assert llm is not None and self.layout is not None
        vocab = self._vocab
        stream = TextStream(
            tuple(req.stop_strings) + self._template_stop + (self._plain.stop if self._formatter is None else ())
        )
        max_tokens = req.sampler.max_tokens
        generated: list[int] = []
        t_first = t_last = 0
        shifts = 0
        reason = StopReason.EOS
        want = req.top_candidates
        emit = self.emit
        rid = req.request_id
        pending: list[P.TokenEvent] = []
        last_flush = 0
        last_cands = 0
        flush_ns = int(TOKEN_FLUSH_S * 1e9)
        cands_ns = int(CANDIDATES_EVERY_S * 1e9)
        cancel = self.cancel
        while True:
            if cancel.is_set():
                reason = StopReason.CANCELLED
                break
            if 0 <= max_tokens <= len(generated):
                reason = StopReason.MAX_TOKENS
                break
            if want:
                logits = self._logits()
                lse = self._logsumexp(logits)
                cands: tuple = ()
                if time.perf_counter_ns() - last_cands >= cands_ns:
                    cands = self._top_candidates(logits, want)
                    last_cands = time.perf_counter_ns()
            token = llama_cpp.llama_sampler_sample(chain, llm.ctx, -1)
            now = time.perf_counter_ns()
            if not generated:
                t_first = now
            t_last = now
            generated.append(token)
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                # Shown in the token view (it was sampled), never in the text, never evaluated.
                pending.append(
                    P.TokenEvent(
                        rid,
                        "",
                        token,
                        self.token_piece_text(token),
                        len(generated) - 1,
                        (now - t0) / 1e9,
                        llm.n_tokens,
                        p=math.exp(float(logits[token]) - lse) if want else None,
                    )
                )
                reason = StopReason.EOS
                break
            piece = self._piece(token)
            res = stream.push(piece)
            if want:
                pending.append(
                    P.TokenEvent(
                        rid,
                        res.text,
                        token,
                        display_piece(piece),
                        len(generated) - 1,
                        (now - t0) / 1e9,
                        llm.n_tokens + 1,
                        p=math.exp(float(logits[token]) - lse),
                        candidates=cands,
                        logsumexp=lse if cands else None,
                    )
                )
            else:
                pending.append(
                    P.TokenEvent(
                        rid,
                        res.text,
                        token,
                        display_piece(piece),
                        len(generated) - 1,
                        (now - t0) / 1e9,
                        llm.n_tokens + 1,
                    )
                )
            if now - last_flush >= flush_ns:
                emit(P.TokenBatch(rid, tuple(pending)))
                pending.clear()
                last_flush = now
            if res.stopped:
                reason = StopReason.STOP_STRING
                break
            if llm.n_tokens >= self.n_ctx:
                if policy == ContextPolicy.STOP:
                    reason = StopReason.CONTEXT_FULL
                    break
                if pending:
                    emit(P.TokenBatch(rid, tuple(pending)))
                    pending.clear()
                if not self._shift_context(req, messages, generated, stats, t0):
                    reason = StopReason.CANCELLED if cancel.is_set() else StopReason.CONTEXT_FULL
                    break
                shifts += 1
            llm.eval([token])
        if pending:
            emit(P.TokenBatch(rid, tuple(pending)))
        stream.finish()  # flushes held-back text into stream.text
        stats["context_shifts"] = shifts
        return self._finish(req, stream.text, reason, stats, len(generated), t0, t_first, t_last)

    def _shift_context(
        self, req: P.Generate, messages: list[ChatMessage], generated: list[int], stats: dict, t0: int
    ) -> bool:
        """Rolling policy: make room by dropping the oldest turns, then the oldest half of the reply.

        The KV cache is rebuilt as prompt(kept messages) + kept reply tokens; the
        screen keeps everything. Returns False when nothing could be freed or Stop
        was pressed during the rebuild.
        """
        llm = self.llm
        assert llm is not None
        reply = generated[:-1]  # the last token is sampled but not yet evaluated
        budget = int(self.n_ctx * (1 - ROLLING_RESERVE_FRACTION))
        kept, dropped = self._drop_oldest(messages, max(budget - len(reply), 1), req.continue_last)
        if kept is None:
            kept = [m for m in messages[:1] if m.role == "system"] + messages[-1:]
            dropped = len(messages) - len(kept)
        prompt, _ = self._tokens_for(kept, req.continue_last)
        room = budget - len(prompt)
        if room <= 0:
            return False
        dropped_reply = max(0, len(reply) - room)
        if dropped_reply:
            dropped_reply = max(dropped_reply, len(reply) // 2)
        seq = prompt + reply[dropped_reply:]
        if len(seq) >= self.n_ctx:
            return False
        keep = self._rewind_to_prefix(seq + [generated[-1]])
        if self._prefill(req.request_id, seq[keep:], t0) < len(seq) - keep:
            return False
        messages[:] = kept
        stats["dropped_messages"] = stats.get("dropped_messages", 0) + dropped
        self.emit(P.ContextShifted(req.request_id, dropped, dropped_reply, llm.n_tokens))
        return True

    def _finish(
        self,
        req: P.Generate,
        text: str,
        reason: StopReason,
        stats: dict,
        n_gen: int,
        t0: int,
        t_first: int,
        t_last: int,
    ) -> P.Finished:
        llm = self.llm
        assert llm is not None and self.layout is not None
        perf = llama_cpp.llama_perf_context(llm.ctx)
        ttft = (t_first - t0) / 1e9 if t_first else 0.0
        final = GenerationStats(
            prompt_tokens=stats["prompt_tokens"],
            cached_tokens=stats["cached_tokens"],
            evaluated_tokens=stats["evaluated_tokens"],
            prefill_s=stats.get("prefill_s", 0.0),
            ttft_s=ttft,
            generated_tokens=n_gen,
            decode_s=(t_last - t_first) / 1e9 if n_gen > 1 else 0.0,
            n_ctx=self.n_ctx,
            context_used=llm.n_tokens,
            kv_used_bytes=self.layout.used_bytes(llm.n_tokens),
            kv_allocated_bytes=self.layout.allocated_bytes,
            stop_reason=reason.value,
            seed=stats["seed"],
            dropped_messages=stats.get("dropped_messages", 0),
            context_shifts=stats.get("context_shifts", 0),
            llama_prefill_ms=float(perf.t_p_eval_ms),
            llama_decode_ms=float(perf.t_eval_ms),
            llama_n_prefill=int(perf.n_p_eval),
            llama_n_decode=int(perf.n_eval),
        )
        return P.Finished(req.request_id, text, final)

"""A fake engine for UI tests: engine-client-shaped, no process, scripted events.

:class:`FakeEngine` subclasses :class:`app.ui.engine.client.EngineClient` and
overrides only its public commands (``start``, ``restart``, ``shutdown``,
``load_model``, ``generate``, ``cancel``, ``reset_context``) and the public
read-outs (``state``, ``generating``, ``pid``). It answers each request with the
events of :mod:`app.core.protocol` the real engine would send, one per tick of a
QTimer on the Qt event loop, through the same signals and state changes as the
real client, so the window cannot tell the difference.

What it does not pretend: it runs no model. Token texts come from the script a
test queues (:meth:`FakeEngine.script`), or, when none is queued, from
:func:`echo_reply`. Prompt "tokens" are whitespace-separated words of the
messages, so prompt_tokens / cached_tokens follow the conversation the window
sent (a KV cache of words, reset by ``reset_context``). Engine times are set by
:attr:`FakeEngine.ttft_s` and :attr:`FakeEngine.token_s` (seconds), not measured.

Scripts (what the next ``generate`` does):
    :class:`Reply` pieces, then Finished (``stop_reason`` EOS, or MAX_TOKENS when
    the sampler's max_tokens cuts it, or CONTEXT_FULL with ``context_full=True``);
    :class:`Endless` tokens until Stop (then Finished with CANCELLED);
    :class:`CrashMidReply` some pieces, then the engine dies (``engine_crashed``);
    :class:`Refuse` Failed before any token (e.g. ``context_overflow``).
Loads: :meth:`FakeEngine.fail_next_load`, :meth:`FakeEngine.crash_next_load`.

Every request the window sends is kept in :attr:`FakeEngine.requests` (and
emitted on ``request_sent``, as the real client does).

Alternatives (``Generate.alternatives``): token ``100 + i`` at step i, its candidates
``100 + i + k`` with logits ``10 - k`` (k = 0: the token drawn, its piece; ``alt<k>`` the
others), entropy ``0.1 x i`` bits. A ``reply_prefix`` starts the reply with those tokens'
texts (every token id the fake ever named keeps its text).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from PySide6.QtCore import QObject, QTimer

from app.core import protocol as P
from app.core.chat.chat_template import SAMPLE_CONVERSATION
from app.core.chat.context import (
    ROLLING_RESERVE_FRACTION,
    ChatMessage,
    ContextPolicy,
    FlashAttention,
    GenerationStats,
    LoadSettings,
    Role,
    StopReason,
)
from app.core.gguf.gguf_info import read_gguf_info
from app.core.hardware.memory import kv_cache_layout, n_ubatch_for
from app.core.sampling.alternatives import ReplyAlternatives
from app.core.sampling.funnel import Funnel, FunnelStage, FunnelStageKind
from app.core.sampling.params import SamplerSettings
from app.ui.engine.client import EngineClient, EngineState
from tests.support.inspection import synthetic_inspection

FAKE_LLAMA_CPP_VERSION = "0.0.0-fake"
TICK_MS = 2  # one event per tick: streaming is visible to the window, and fast


# ------------------------------------------------------------------------------------------ scripts
@dataclass(frozen=True)
class Reply:
    """A reply made of ``pieces`` (one token each). ``context_full``: it ends because n_ctx is full."""

    pieces: tuple[str, ...]
    context_full: bool = False


@dataclass(frozen=True)
class Endless:
    """A reply that never ends until Stop: ``piece`` again and again."""

    piece: str = "and on "


@dataclass(frozen=True)
class CrashMidReply:
    """``pieces`` stream, then the engine dies with ``description`` (as EngineDied would say)."""

    pieces: tuple[str, ...]
    description: str = "The engine process was killed (SIGKILL)."


@dataclass(frozen=True)
class Refuse:
    """The request fails before any token: Failed(kind, message)."""

    kind: P.FailureKind
    message: str


Script = Reply | Endless | CrashMidReply | Refuse


def reply(*pieces: str, context_full: bool = False) -> Reply:
    return Reply(tuple(pieces), context_full)


def echo_reply(messages: tuple[ChatMessage, ...]) -> Reply:
    """The default reply: the words of the last user message, said back."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    return Reply(("You ", "said: ", *(w + " " for w in last.split())))


def prompt_words(messages: tuple[ChatMessage, ...]) -> list[str]:
    """The fake tokenizer: ``<role>`` then the words of each message."""
    out: list[str] = []
    for m in messages:
        out.append(f"<{m.role}>")
        out.extend(m.content.split())
    return out


@dataclass
class _Turn:
    request: P.Generate
    script: Script
    model: P.ModelLoaded
    cancelled: bool = False
    text: str = ""


# ------------------------------------------------------------------------------------------ engine
class FakeEngine(EngineClient):
    """An :class:`EngineClient` with no process behind it (see the module docstring).

    Attributes:
        requests: every request sent, in order (LoadModel, Generate, ResetContext).
        ttft_s: engine time from a request to its first token, seconds.
        token_s: engine time per decoded token, seconds (1 / tok/s).
        seed_when_random: the seed reported when the sampler asks for a random one.
    """

    def __init__(self, log_path: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(log_path, parent)
        self.requests: list[object] = []
        self.request_sent.connect(self.requests.append)
        self.ttft_s = 0.05
        self.token_s = 0.02
        self.seed_when_random = 1234
        self._fake_state = EngineState.DEAD
        self._running = False
        self._ids = itertools.count(1)
        self._scripts: deque[Script] = deque()
        self._load_faults: deque[tuple[str, str, str]] = deque()  # ("fail", message, kind) / ("crash", description, "")
        self._turn: _Turn | None = None
        self._load_rid: int | None = None
        self._kv: list[str] = []
        self._events: Iterator[object] = iter(())
        self._kept: tuple[int, SamplerSettings, list[tuple[int, str]]] | None = None  # the reply keeping logits
        self._count_queue: deque[P.CountPrompt] = deque()  # CountPrompt requests waiting for the reply in flight
        self._held = False  # pause(): no events, no answers
        self.vocab: dict[int, str] = {}  # every token id the fake named, with its text
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)

    # ------------------------------------------------------------------ test controls
    def script(self, *scripts: Script) -> None:
        """Queue what the next ``generate`` calls do, in order."""
        self._scripts.extend(scripts)

    def pause(self) -> None:
        """Hold the reply in flight where it is (no more events), and any count's answer, until :meth:`resume`."""
        self._timer.stop()
        self._held = True

    def resume(self) -> None:
        """Stream the held reply on; answer the held counts."""
        self._held = False
        self._timer.start()
        QTimer.singleShot(0, self._answer_counts)

    def fail_next_load(self, message: str, kind: P.FailureKind = P.FailureKind.LOAD) -> None:
        """The next load ends with Failed(kind, message)."""
        self._load_faults.append(("fail", message, kind))

    def crash_next_load(self, description: str = "The engine process was killed (SIGKILL).") -> None:
        """The engine dies during the next load."""
        self._load_faults.append(("crash", description, ""))

    def sent(self, kind: type) -> list:
        """The requests of one type (e.g. ``P.Generate``), in order."""
        return [r for r in self.requests if isinstance(r, kind)]

    # ------------------------------------------------------------------ read-outs
    @property
    def state(self) -> EngineState:
        return self._fake_state

    @property
    def generating(self) -> bool:
        return self._turn is not None

    @property
    def pid(self) -> int | None:
        return None  # no process

    def _enter(self, state: EngineState) -> None:
        if state != self._fake_state:
            self._fake_state = state
            self.state_changed.emit(state)

    # ------------------------------------------------------------------ commands
    def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._kv = []
        self._enter(EngineState.STARTING)
        self._play(iter([P.EngineReady(FAKE_LLAMA_CPP_VERSION, "fake engine: no CPU features used", False)]))

    def shutdown(self) -> None:
        self._timer.stop()
        self._events = iter(())
        self._running = False
        self._drop_turn()

    def _drop_turn(self) -> None:
        """The real client's reset: no load or reply in flight, no model, DEAD; a reply in flight ends."""
        turn, self._turn = self._turn, None
        self._load_rid = None
        self.model = None
        self._count_queue.clear()  # the engine died: no answers
        self._enter(EngineState.DEAD)
        if turn is not None:
            self.generation_ended.emit(turn.request.request_id)

    def load_model(self, path: str, settings: LoadSettings) -> int:
        if not self._running:
            self.start()
        rid = next(self._ids)
        self._load_rid = rid
        self.model = None
        self._enter(EngineState.LOADING)
        req = P.LoadModel(rid, path, settings)
        if self._turn is not None:
            # As the real client: the reply ends (Finished, cancelled; the state stays LOADING),
            # then the load is sent.
            self.cancel()
            self._play(self._send_then(req, self._load_events(rid, path, settings)), after_current=True)
        else:
            self.request_sent.emit(req)
            self._play(self._load_events(rid, path, settings), after_current=True)
        return rid

    def _send_then(self, req: object, events: Iterator[object]) -> Iterator[object]:
        """``events``, with ``req`` reported sent when the first of them is due (after the reply's)."""
        self.request_sent.emit(req)
        yield from events

    def generate(
        self,
        messages: tuple[ChatMessage, ...],
        sampler: SamplerSettings,
        *,
        stop_strings: tuple[str, ...] = (),
        top_candidates: int = 0,
        continue_last: bool = False,
        context_policy: str | None = None,
        keep_logits: bool = False,
        chat_template: str | None = None,
        alternatives: int = 0,
        reply_prefix: tuple[int, ...] = (),
    ) -> int | None:
        if not self._running or self._fake_state != EngineState.READY:
            return None
        rid = next(self._ids)
        req = P.Generate(
            rid,
            tuple(messages),
            sampler,
            tuple(stop_strings),
            top_candidates,
            continue_last,
            context_policy,
            keep_logits=keep_logits,
            chat_template=chat_template,
            alternatives=alternatives,
            reply_prefix=tuple(reply_prefix),
        )
        if keep_logits or alternatives:  # as the engine: alternatives come from the kept logits
            self._kept = (rid, sampler, [])
        script = self._scripts.popleft() if self._scripts else echo_reply(req.messages)
        assert self.model is not None  # READY means a model is loaded
        self._turn = _Turn(req, script, self.model)
        self._enter(EngineState.GENERATING)
        self.generation_started.emit(rid)
        self.request_sent.emit(req)
        self._play(self._reply_events(self._turn))
        return rid

    def cancel(self) -> None:
        if self._running and self._turn is not None:
            self._turn.cancelled = True

    def prepare_inspect(self) -> bool:
        """Records PrepareInspect, once per loaded model, as the real client sends it."""
        model = self.model
        if not self._running or model is None or self._prepared_for is model:
            return False
        self._prepared_for = model
        self.request_sent.emit(P.PrepareInspect())
        return True

    def reset_context(self) -> None:
        if self._running and self.model is not None:
            self.request_sent.emit(P.ResetContext(next(self._ids)))
            self._kv = []

    # ------------------------------------------------------------------ playing events
    def _play(self, events: Iterator[object], after_current: bool = False) -> None:
        self._events = itertools.chain(self._events, events) if after_current else events
        self._timer.start()

    def _tick(self) -> None:
        ev = next(self._events, None)
        if ev is None:
            self._timer.stop()
            return
        if isinstance(ev, str):  # a crash: the text is EngineDied's description
            self._crash(ev)
            return
        self._deliver(ev)

    def _deliver(self, ev: object) -> None:
        """The real client's event handling (state changes, then the signal)."""
        turn = self._turn
        rid = getattr(ev, "request_id", None)
        if isinstance(ev, P.EngineReady):
            self.ready_info = ev
            if self._fake_state == EngineState.STARTING:
                self._enter(EngineState.NO_MODEL)
            self.engine_ready.emit(ev)
        elif isinstance(ev, P.ModelLoaded) and rid == self._load_rid:
            self._load_rid = None
            self.model = ev
            self._kv = []
            self._enter(EngineState.READY)
            self.model_loaded.emit(ev)
        elif isinstance(ev, P.Failed) and rid == self._load_rid:
            self._load_rid = None
            self.model = None
            self._enter(EngineState.NO_MODEL)
            self.model_load_failed.emit(ev)
        elif turn is None or rid != turn.request.request_id:
            return  # a late event for a request that is over
        elif isinstance(ev, P.PromptPrepared):
            self.prompt_prepared.emit(ev)
        elif isinstance(ev, P.PrefillProgress):
            self.prefill_progressed.emit(ev)
        elif isinstance(ev, P.TokenBatch):
            for tok in ev.tokens:
                self.token_received.emit(tok)
        elif isinstance(ev, P.Finished):
            self._turn = None
            self._enter(self._state_after_turn())
            self.generation_finished.emit(ev)
            self.generation_ended.emit(ev.request_id)
            self._answer_counts()  # the engine's next queued requests
        elif isinstance(ev, P.Failed):
            self._turn = None
            self._enter(self._state_after_turn())
            self.generation_failed.emit(ev)
            self.generation_ended.emit(ev.request_id)
            self._answer_counts()

    def _state_after_turn(self) -> EngineState:
        """As the real client: LOADING when a load was asked during the reply, else READY / NO_MODEL."""
        if self._load_rid is not None:
            return EngineState.LOADING
        return EngineState.READY if self.model else EngineState.NO_MODEL

    def _crash(self, description: str) -> None:
        self._timer.stop()
        self._events = iter(())
        self._running = False
        self._drop_turn()
        self.engine_crashed.emit(description)

    def _load_events(self, rid: int, path: str, settings: LoadSettings) -> Iterator[object]:
        fault = self._load_faults.popleft() if self._load_faults else None
        if fault is not None and fault[0] == "crash":
            yield fault[1]
            return
        if fault is not None:
            yield P.Failed(rid, P.FailureKind(fault[2]), fault[1])
            return
        if settings.v_cache_conflict:  # as the real engine: refused before llama.cpp sees it
            yield P.Failed(rid, P.FailureKind.LOAD, f"{Path(path).name} was not loaded. {settings.v_cache_conflict}")
            return
        info = read_gguf_info(path)
        n_ctx = settings.n_ctx or int(info.arch_key("context_length", 4096))
        n_ctx = -(-n_ctx // 256) * 256  # llama.cpp pads n_ctx to 256
        layout = kv_cache_layout(
            info,
            n_ctx,
            n_ubatch=n_ubatch_for(settings.n_batch, n_ctx),
            swa_full=settings.swa_full,
            type_k=settings.type_k,
            type_v=settings.type_v,
        )
        yield P.ModelLoaded(
            request_id=rid,
            info=info,
            settings=settings,
            n_ctx=n_ctx,
            n_batch=settings.n_batch,
            n_threads=settings.n_threads or 1,
            n_threads_batch=settings.n_threads or 1,
            gpu_offload=False,
            load_s=0.01,
            kv_allocated_bytes=layout.allocated_bytes,
            kv_reported_bytes=layout.allocated_bytes,
            kv_layout=layout,
            compute_reported_bytes=0,
            # llama.cpp's CPU backend settles auto as on, and a quantized V cache forces it on.
            flash_attn_active=settings.flash_attn is not FlashAttention.OFF,
            chat_template=info.metadata.get("tokenizer.chat_template"),
            bos_text="<s>",
            eos_text="</s>",
            eog_token_ids=(2,),
            add_bos=True,
        )

    def _reply_events(self, turn: _Turn) -> Iterator[object]:
        req, script = turn.request, turn.script
        rid = req.request_id
        if isinstance(script, Refuse):
            yield P.Failed(rid, P.FailureKind(script.kind), script.message)
            return
        words = prompt_words(req.messages)
        cached = 0
        while cached < min(len(words) - 1, len(self._kv)) and words[cached] == self._kv[cached]:
            cached += 1
        to_eval = len(words) - cached
        prefill_s = self.ttft_s / 2
        yield P.PromptPrepared(
            rid,
            0.001,
            len(words),
            cached,
            to_eval,
            0,
            tuple(enumerate(words[cached:]))[:4096],
            " ".join(words),
            template_s=0.0004,
            tokenize_s=0.0003,
            reuse_s=0.0001,
        )
        yield P.PrefillProgress(rid, to_eval, to_eval, prefill_s, slice_tokens=to_eval)
        self._kv = list(words)
        n_ctx = turn.model.n_ctx
        max_tokens = req.sampler.max_tokens
        stop = StopReason.EOS
        pieces = self._pieces(script)
        n = 0
        head = "".join(self.vocab.get(t, "") for t in req.reply_prefix)
        turn.text = head
        for piece in pieces:
            if isinstance(script, CrashMidReply) and n == len(script.pieces):
                yield script.description
                return
            if turn.cancelled:
                stop = StopReason.CANCELLED
                break
            if max_tokens >= 0 and n >= max_tokens:
                stop = StopReason.MAX_TOKENS
                break
            if len(self._kv) >= n_ctx:
                stop = StopReason.CONTEXT_FULL
                break
            self._kv.append(piece)
            turn.text += piece
            ev = self._token(req, piece, n)
            if n == 0 and head:
                ev = P.TokenEvent(**{**ev.__dict__, "text": head + ev.text})
            yield P.TokenBatch(rid, (ev,))
            n += 1
        else:
            if isinstance(script, Reply) and script.context_full:
                stop = StopReason.CONTEXT_FULL
        seed = req.sampler.seed if req.sampler.seed is not None else self.seed_when_random
        t_end = self.ttft_s + max(n - 1, 0) * self.token_s + self.token_s / 2
        yield P.Finished(
            rid,
            turn.text,
            GenerationStats(
                prompt_tokens=len(words),
                cached_tokens=cached,
                evaluated_tokens=to_eval,
                prefill_s=prefill_s,
                ttft_s=self.ttft_s,
                generated_tokens=n,
                decode_s=self.token_s * max(n - 1, 0),
                n_ctx=n_ctx,
                context_used=len(self._kv),
                kv_used_bytes=turn.model.kv_allocated_bytes * len(self._kv) // n_ctx,
                kv_allocated_bytes=turn.model.kv_allocated_bytes,
                stop_reason=stop.value,
                seed=seed,
            ),
            elapsed_s=t_end,
            alternatives=self._alternatives(req, turn.text[len(head) :], n) if req.alternatives > 0 else None,
        )

    def _alternatives(self, req: P.Generate, text: str, n: int) -> ReplyAlternatives:
        """The made-up alternatives of the ``n`` tokens just streamed (see the module docstring)."""
        k = req.alternatives
        pieces = [self.vocab.get(100 + i, "") for i in range(n)]
        ids = [100 + i + j for i in range(n) for j in range(k)]
        texts = {100 + i + j: pieces[i] if j == 0 else f"alt{j}" for i in range(n) for j in range(k)}
        for t, piece in texts.items():
            self.vocab.setdefault(t, piece)
        lse = math.log(sum(math.exp(10.0 - j) for j in range(k))) + 0.01
        return ReplyAlternatives(
            k,
            tuple(100 + i for i in range(n)),
            (lse,) * n,
            tuple(0.1 * i for i in range(n)),
            tuple(ids),
            tuple(10.0 - j for _ in range(n) for j in range(k)),
            (),
            texts,
        )

    @staticmethod
    def _pieces(script: Script) -> Iterator[str]:
        if isinstance(script, Endless):
            return itertools.repeat(script.piece)
        assert isinstance(script, (Reply, CrashMidReply))
        # One more step after a crash script's pieces, where the crash happens.
        return itertools.chain(script.pieces, [""] if isinstance(script, CrashMidReply) else [])

    def compute_funnel(
        self,
        reply_id: int,
        step: int,
        sampler: SamplerSettings | None,
        rows: int = 12,
        stored: object | None = None,
    ) -> int | None:
        """A made-up funnel (no llama.cpp here): the step's 6 fake candidates (logits 10, 9, ...),
        top_k and temperature applied when on, greedy at temperature 0; answered on the next tick.
        With ``stored`` (a :class:`~app.core.sampling.alternatives.StoredStep`): its candidates, the model
        column only, and the draw (greedy: the best)."""
        if self.model is None:
            return None
        rid = next(self._ids)
        req = P.ComputeFunnel(rid, reply_id, step, sampler, rows, stored)  # type: ignore[arg-type]
        self.request_sent.emit(req)
        if stored is not None:
            funnel = self._stored_funnel(stored, sampler)
            QTimer.singleShot(0, lambda: self.funnel_computed.emit(P.FunnelComputed(rid, funnel)))
            return rid
        kept = self._kept
        if kept is None or (reply_id >= 0 and reply_id != kept[0]) or not kept[2] or step >= len(kept[2]):
            failed = P.Failed(rid, P.FailureKind.NO_LOGITS, "The funnel needs a reply generated with the funnel on.")
            QTimer.singleShot(0, lambda: self.funnel_failed.emit(failed))
            return rid
        s = sampler or kept[1]
        step = step if step >= 0 else len(kept[2]) - 1
        token, piece = kept[2][step]
        row_ids = tuple((token + k, piece if k == 0 else f"alt{k}") for k in range(6))
        logits = [10.0 - k for k in range(6)]

        def column(kind: FunnelStageKind, alive: list[float | None], picked: int = -1) -> FunnelStage:
            finite = [x for x in alive if x is not None]
            z = sum(math.exp(x - finite[0]) for x in finite)
            probs = tuple(0.0 if x is None else math.exp(x - finite[0]) / z for x in alive)
            h = -sum(q * math.log2(q) for q in probs if q > 0)
            return FunnelStage(kind, probs, len(finite), h, 0.0, picked)

        alive: list[float | None] = list(logits)
        stages = [column(FunnelStageKind.MODEL, alive)]
        if s.is_greedy:
            stages.append(FunnelStage(FunnelStageKind.GREEDY, (1.0,) + (0.0,) * 5, 1, 0.0, 0.0, token))
        else:
            if s.top_k > 0:
                alive = [x if i < s.top_k else None for i, x in enumerate(alive)]
                stages.append(column(FunnelStageKind.TOP_K, alive))
            alive = [None if x is None else x / s.temperature for x in alive]
            stages.append(column(FunnelStageKind.TEMPERATURE, alive))
            stages.append(column(FunnelStageKind.DIST, alive, token))
        funnel = Funnel(kept[0], step, row_ids, tuple(stages), token, s, 0, 6, False, 0.0)
        QTimer.singleShot(0, lambda: self.funnel_computed.emit(P.FunnelComputed(rid, funnel)))
        return rid

    def render_prompt(
        self, messages: tuple[ChatMessage, ...], chat_template: str | None = None, continue_last: bool = False
    ) -> int | None:
        """The prompt rendered with jinja2's sandbox as llama-cpp-python sets it up (``chat_template``,
        else the GGUF's, else a plain transcript); "tokens" are special-token texts and words.
        A template that does not compile or render fails with kind ``template`` naming its line."""
        if self.model is None:
            return None
        rid = next(self._ids)
        req = P.RenderPrompt(rid, tuple(messages), chat_template, continue_last)
        self.request_sent.emit(req)
        QTimer.singleShot(0, lambda: self._answer_render(req))
        return rid

    def _render(
        self, rid: int, msgs: tuple[ChatMessage, ...], chat_template: str | None
    ) -> tuple[str, P.TemplateSource] | P.Failed:
        """The prompt text and its format's source, or Failed (kind ``template``)."""
        assert self.model is not None
        gguf = self.model.chat_template
        source_text = chat_template if chat_template is not None else gguf
        if source_text is None:
            text = "".join(f"{m.role.value.title()}: {m.content}\n" for m in msgs) + "Assistant:"
            source = P.TemplateSource.PLAIN
        else:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            try:
                text = env.from_string(source_text).render(
                    messages=[{"role": m.role.value, "content": m.content} for m in msgs],
                    bos_token=self.model.bos_text,
                    eos_token=self.model.eos_text,
                    add_generation_prompt=True,
                )
            except jinja2.TemplateSyntaxError as exc:
                return P.Failed(
                    rid, P.FailureKind.TEMPLATE, f"The chat template does not compile: line {exc.lineno}: {exc.message}"
                )
            except Exception as exc:
                return P.Failed(rid, P.FailureKind.TEMPLATE, f"The chat template does not render: {exc}")
            source = P.TemplateSource.OVERRIDE if chat_template is not None else P.TemplateSource.GGUF
        if not text.strip():
            return P.Failed(rid, P.FailureKind.TEMPLATE, "The chat template renders no text.")
        return text, source

    @staticmethod
    def _prompt_pieces(text: str) -> list[str]:
        """The fake's tokens: special-token texts and words with their leading space."""
        return [p for p in re.split(r"(<[^<>\s]+>|\s*\S+)", text) if p]

    def _answer_render(self, req: P.RenderPrompt) -> None:
        assert self.model is not None
        sample = not req.messages
        msgs = SAMPLE_CONVERSATION if sample else req.messages
        out = self._render(req.request_id, msgs, req.chat_template)
        if isinstance(out, P.Failed):
            self.prompt_render_failed.emit(out)
            return
        text, source = out
        source_text = req.chat_template if req.chat_template is not None else self.model.chat_template
        pieces = tuple(
            P.PromptPiece(1000 + i, p, bool(re.fullmatch(r"<[^<>\s]+>", p)))
            for i, p in enumerate(self._prompt_pieces(text))
        )
        self.prompt_rendered.emit(
            P.PromptRendered(
                req.request_id, text, pieces, len(pieces), source, source_text, self.model.chat_template, sample
            )
        )

    def count_prompt(
        self,
        messages: tuple[ChatMessage, ...],
        chat_template: str | None = None,
        policy: ContextPolicy = ContextPolicy.STOP,
    ) -> int | None:
        """The fake's tokens (:meth:`_prompt_pieces`) of the rendered prompt and of the last message, on the
        next tick; while a reply is in flight, after it (as the engine queues it). Over n_ctx, fitted as the
        engine fits (ROLLING: the oldest non-system messages dropped until it fits what the reserve leaves; else
        refused)."""
        if self.model is None:
            return None
        rid = next(self._ids)
        req = P.CountPrompt(rid, tuple(messages), chat_template, policy)
        self.request_sent.emit(req)
        self._count_queue.append(req)
        QTimer.singleShot(0, self._answer_counts)
        return rid

    def _answer_counts(self) -> None:
        while self._count_queue and not self.generating and not self._held and self.model is not None:
            req = self._count_queue.popleft()
            out = self._render(req.request_id, req.messages, req.chat_template)
            if isinstance(out, P.Failed):
                self.prompt_count_failed.emit(out)
                continue
            n_ctx = self.model.n_ctx
            n = len(self._prompt_pieces(out[0]))
            dropped, fitted = 0, n
            if n >= n_ctx:
                dropped, fitted = -1, 0
                if req.policy is ContextPolicy.ROLLING:
                    system = [m for m in req.messages[:1] if m.role is Role.SYSTEM]
                    rest = list(req.messages[len(system) :])
                    k = 0
                    while len(rest) > 1:
                        rest, k = rest[1:], k + 1
                        kept = self._render(req.request_id, (*system, *rest), req.chat_template)
                        size = len(self._prompt_pieces(kept[0])) if not isinstance(kept, P.Failed) else n_ctx
                        if size <= int(n_ctx * (1 - ROLLING_RESERVE_FRACTION)):
                            dropped, fitted = k, size
                            break
            last = self._prompt_pieces(req.messages[-1].content) if req.messages else []
            self.prompt_counted.emit(P.PromptCounted(req.request_id, n, len(last), n_ctx, dropped, fitted))

    def inspect_token(self, position: int, token_id: int, turn_start: int = -1) -> int | None:
        """A made-up inspection (:func:`tests.support.inspection.synthetic_inspection`), on the next tick;
        a negative position fails with ``not_in_context``."""
        if self.model is None:
            return None
        rid = next(self._ids)
        self.request_sent.emit(P.InspectToken(rid, position, token_id, turn_start))
        if position < 0:
            failed = P.Failed(rid, P.FailureKind.NOT_IN_CONTEXT, "Position -1 of the context does not hold that token.")
            QTimer.singleShot(0, lambda: self.inspection_failed.emit(failed))
            return rid
        ins = synthetic_inspection(position, token_id)
        QTimer.singleShot(0, lambda: self.token_inspected.emit(P.TokenInspected(rid, ins)))
        return rid

    @staticmethod
    def _stored_funnel(st, sampler: SamplerSettings | None) -> Funnel:
        s = sampler or st.settings
        probs = tuple(math.exp(x - st.logsumexp) for x in st.logits)
        rows = tuple((t, st.texts.get(t, "")) for t in st.ids)
        model = FunnelStage(FunnelStageKind.MODEL, probs, len(st.ids), 1.0, max(0.0, 1 - sum(probs)))
        draw = FunnelStage(FunnelStageKind.GREEDY, (1.0,) + (0.0,) * (len(st.ids) - 1), 1, 0.0, 0.0, st.ids[0])
        return Funnel(st.reply_id, st.step, rows, (model, draw), st.drawn, s, st.seed, len(st.ids), False, 0.0)

    def _token(self, req: P.Generate, piece: str, index: int) -> P.TokenEvent:
        self.vocab[100 + index] = piece
        if self._kept is not None and self._kept[0] == req.request_id:
            self._kept[2].append((100 + index, piece))
        t_s = self.ttft_s + index * self.token_s
        if req.top_candidates <= 0:
            return P.TokenEvent(req.request_id, piece, 100 + index, piece, index, t_s, len(self._kv))
        # Candidates: the sampled piece first, then others with falling logits (1 apart).
        cands = tuple((100 + index + k, piece if k == 0 else f"alt{k}", 10.0 - k) for k in range(req.top_candidates))
        lse = math.log(sum(math.exp(c[2]) for c in cands))
        p = math.exp(cands[0][2] - lse)
        return P.TokenEvent(req.request_id, piece, 100 + index, piece, index, t_s, len(self._kv), p, cands, lse)

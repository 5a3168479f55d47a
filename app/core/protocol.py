"""Messages between the UI process and the engine process.

Requests go to the engine; events come back. Both are frozen dataclasses of
plain values (they are pickled over a pipe). Every request with a
``request_id`` ends with exactly one terminal event for that id:
:class:`Finished` or :class:`Failed` for :class:`Generate`,
:class:`ModelLoaded` or :class:`Failed` for :class:`LoadModel`,
:class:`ContextReset` for :class:`ResetContext`,
:class:`FunnelComputed` or :class:`Failed` for :class:`ComputeFunnel`.

Cancel is not a message: the UI sets a shared ``multiprocessing.Event`` that
the engine checks between prefill chunks and decode steps (docs/architecture.md, principle 4).
"""

from __future__ import annotations

import enum
from dataclasses import KW_ONLY, dataclass

from app.core.alternatives import ReplyAlternatives, StoredStep
from app.core.chat import ChatMessage, GenerationStats, LoadSettings
from app.core.funnel import Funnel
from app.core.gguf_info import GGUFInfo
from app.core.memory import KVCacheLayout
from app.core.sampling import SamplerSettings


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadModel:
    """Load a GGUF (replacing any loaded model).

    Attributes:
        path: the .gguf file (the first part of a split model).
        settings: n_ctx, n_gpu_layers, n_threads, n_batch, context policy, swa_full.
    """

    request_id: int
    path: str
    settings: LoadSettings


@dataclass(frozen=True)
class Generate:
    """Reply to a conversation.

    Attributes:
        messages: the whole conversation, system prompt first, last one from the user
            (or an assistant message to continue when ``continue_last`` is set).
        sampler: a snapshot of the sampler settings.
        stop_strings: extra stop strings (the template's end-of-turn text is added by the engine).
        top_candidates: how many top next-token candidates to report per token (0 = none).
        continue_last: continue the last (assistant) message instead of starting a new one.
        context_policy: what to do when the conversation outgrows n_ctx (a
            :class:`~app.core.chat.ContextPolicy` value); None: the one given at load.
        raw_prompt: a prompt text to use as it is instead of rendering ``messages`` with the
            chat template (the local API's ``/v1/completions``); special-token texts are parsed
            and BOS is added when the tokenizer wants it. ``messages`` is then ignored.
        candidates_every_token: report ``top_candidates`` on every token instead of at most
            every 0.1 s (the local API's ``top_logprobs``).
        external: a request from outside the person's chats (the local API): the engine keeps
            the person's KV cache (copied out and back, :mod:`app.engine.kv_snapshot`) and what
            it knows of their last turn (the sampled tokens their next prompt reuses,
            :mod:`app.engine.kv_reuse`), so their next turn runs as if this request had not happened.
        keep_logits: keep this reply's logits per step in the engine (top 64 and the
            log-sum-exp per step, the full vocabulary for the latest steps) so that
            :class:`ComputeFunnel` can re-run the sampler funnel on any of its tokens.
        alternatives: top candidates to keep per generated token and send back with
            :class:`Finished` (:class:`~app.core.alternatives.ReplyAlternatives`, at most
            :data:`~app.core.alternatives.MAX_PER_TOKEN`); 0 = none. Taken from the same per-step
            logits store as ``keep_logits`` (the engine then keeps the reply's logits too).
        reply_prefix: tokens the reply starts with, evaluated after the prompt before decoding
            goes on (a branch from an alternative: the first k tokens of a reply and the
            alternative chosen for token k, :mod:`app.engine.alternative`). The KV cache keeps
            the prompt and the prefix's tokens it already holds, so only the changed token is
            evaluated; the reply's text (events and :class:`Finished`) starts with the prefix's.
    """

    request_id: int
    messages: tuple[ChatMessage, ...]
    sampler: SamplerSettings
    stop_strings: tuple[str, ...] = ()
    top_candidates: int = 0
    continue_last: bool = False
    context_policy: str | None = None
    _: KW_ONLY  # the later fields are named at every call (positional use put keep_logits into raw_prompt)
    raw_prompt: str | None = None
    candidates_every_token: bool = False
    external: bool = False
    keep_logits: bool = False
    alternatives: int = 0
    reply_prefix: tuple[int, ...] = ()


@dataclass(frozen=True)
class ComputeFunnel:
    """Run the sampler funnel on a stored step of the latest reply kept with ``keep_logits``.

    Answered with :class:`FunnelComputed` or :class:`Failed` (kind ``no_logits`` when the
    step is not stored, ``bad_settings`` for settings out of range). The engine answers it
    while a reply streams too (on its own thread), with no new generation.

    Attributes:
        reply_id: the Generate request id of the reply; -1 = the latest one stored.
        step: 0-based token index in the reply; -1 = the newest.
        sampler: the settings to run the funnel with; None = the reply's own.
        rows: tokens to show.
        stored: run on this stored step instead (a reply from the conversation store: its
            kept top-N, :class:`~app.core.alternatives.StoredStep`); ``reply_id`` and ``step``
            are then ignored, and ``sampler`` None means the stored reply's own settings.
    """

    request_id: int
    reply_id: int = -1
    step: int = -1
    sampler: SamplerSettings | None = None
    rows: int = 12
    stored: StoredStep | None = None


@dataclass(frozen=True)
class ResetContext:
    """Forget the KV cache ("New chat"): the next turn starts from an empty context."""

    request_id: int


@dataclass(frozen=True)
class Shutdown:
    """End the engine process."""


Request = LoadModel | Generate | ComputeFunnel | ResetContext | Shutdown


# ---------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceMemory:
    """One GPU device llama.cpp can offload to, as its ggml backend reports it.

    Attributes:
        name: the backend's device name (``CUDA0``, ``Vulkan0``, ``Metal``).
        description: the device's own name (``NVIDIA GeForce RTX 4090``).
        integrated: an integrated GPU sharing host memory (ggml's IGPU type).
        free_bytes: memory free on the device when the engine started, bytes.
        total_bytes: the device's memory, bytes.
    """

    name: str
    description: str
    integrated: bool
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class EngineReady:
    """The engine process started and imported llama.cpp.

    Attributes:
        llama_cpp_version: llama-cpp-python's version.
        system_info: llama_print_system_info() (CPU features the build uses).
        gpu_offload: whether this build can offload layers to a GPU.
        devices: the GPU devices llama.cpp sees with their free and total memory
            (``ggml_backend_dev_memory``), for "will it fit" verdicts; CPU and
            host-memory accelerator devices are not listed, so a CPU build gives ``()``.
    """

    llama_cpp_version: str
    system_info: str
    gpu_offload: bool
    devices: tuple[DeviceMemory, ...] = ()


@dataclass(frozen=True)
class ModelLoaded:
    """A model is loaded and ready.

    Attributes:
        info: the GGUF facts (metadata, tensors).
        settings: the settings actually in effect.
        n_ctx: context length llama.cpp allocated (n_ctx padded to 256), tokens.
        n_batch: prompt tokens per llama_decode call.
        n_threads: decode threads.
        n_threads_batch: prefill threads.
        gpu_offload: whether n_gpu_layers has any effect in this build.
        load_s: seconds to load.
        kv_allocated_bytes: KV cache bytes by Glassbox's formula (app.core.memory).
        kv_layout: the KV cache's layout at the settings in effect (n_ctx, n_ubatch, swa_full);
            its ``allocated_bytes`` is ``kv_allocated_bytes``.
        kv_reported_bytes: KV cache bytes llama.cpp logged that it allocated (0 if not seen).
        compute_reported_bytes: compute buffer bytes llama.cpp logged (0 if not seen).
        chat_template: the template used, or None (plain transcript fallback).
        bos_text, eos_text: texts of BOS/EOS.
        eog_token_ids: ids that end generation (EOS, EOT, ...).
        add_bos: whether the tokenizer adds BOS.
    """

    request_id: int
    info: GGUFInfo
    settings: LoadSettings
    n_ctx: int
    n_batch: int
    n_threads: int
    n_threads_batch: int
    gpu_offload: bool
    load_s: float
    kv_allocated_bytes: int
    kv_layout: KVCacheLayout
    kv_reported_bytes: int
    compute_reported_bytes: int
    chat_template: str | None
    bos_text: str
    eos_text: str
    eog_token_ids: tuple[int, ...]
    add_bos: bool


@dataclass(frozen=True)
class PromptPrepared:
    """The prompt is tokenized and the cached prefix found; prefill starts.

    Attributes:
        prompt_tokens: tokens of the rendered prompt.
        cached_tokens: reused from the KV cache.
        to_evaluate: tokens prefill will evaluate.
        dropped_messages: oldest messages left out to fit n_ctx.
        new_tokens: ``(token_id, text)`` of the tokens to evaluate (at most 4096).
        prompt_text: the rendered prompt (chat template applied), for inspection.
        elapsed_s: seconds from the request reaching the engine to the start of prefill
            (template rendering and tokenization).
    """

    request_id: int
    elapsed_s: float
    prompt_tokens: int
    cached_tokens: int
    to_evaluate: int
    dropped_messages: int
    new_tokens: tuple[tuple[int, str], ...]
    prompt_text: str


@dataclass(frozen=True)
class PrefillProgress:
    """Prefill advanced by one chunk. Times are seconds since the request arrived.

    Attributes:
        done, total: tokens evaluated so far, and to evaluate.
        rebuild: False for the prompt's prefill; True while the rolling policy rebuilds the
            context mid-reply (``done`` / ``total`` then count the rebuild's tokens; the
            prompt's prefill figures are over and stay as they were).
    """

    request_id: int
    done: int
    total: int
    elapsed_s: float
    rebuild: bool = False


@dataclass(frozen=True)
class TokenEvent:
    """One sampled token.

    Attributes:
        text: text now safe to show (may be empty while a UTF-8 character is incomplete
            or a stop string may be starting).
        token_id: the sampled token.
        piece: the token's own text (may be a fragment of a character).
        index: 0-based position in the reply.
        t_s: engine time of the sample, seconds since the request arrived.
        n_past: tokens in the KV cache after this token is evaluated, at most n_ctx (a token
            sampled when the context is full is evaluated after a context shift, or never).
        p: probability of the sampled token under the raw model (when candidates are on).
        candidates: top ``(token_id, text, logit)`` before sampling (when asked; at most
            every 0.1 s, empty on the tokens in between).
        logsumexp: log-sum-exp over all logits, to turn the candidates' logits into
            probabilities (set with ``candidates``).
    """

    request_id: int
    text: str
    token_id: int
    piece: str
    index: int
    t_s: float
    n_past: int
    p: float | None = None
    candidates: tuple[tuple[int, str, float], ...] = ()
    logsumexp: float | None = None


@dataclass(frozen=True)
class TokenBatch:
    """Tokens sampled since the last batch, in order (the engine sends ~30 batches a second).

    :class:`~app.engine.host.EngineHost` hands them out one :class:`TokenEvent` at a time.
    """

    request_id: int
    tokens: tuple[TokenEvent, ...]


@dataclass(frozen=True)
class ContextShifted:
    """The context was rebuilt mid-reply to make room (rolling policy).

    Attributes:
        dropped_messages: messages this shift left out (the prompt's own drop, in
            PromptPrepared, and earlier shifts not counted again).
        dropped_reply_tokens: oldest reply tokens this shift left out.
        n_past: tokens in the KV cache after the rebuild.
        kept_tokens: of those, the prefix the cache already held (not evaluated again).
        evaluated_tokens: tokens the rebuild evaluated (n_past - kept_tokens).
        rebuild_s: seconds the rebuild took.
    """

    request_id: int
    dropped_messages: int
    dropped_reply_tokens: int
    n_past: int
    kept_tokens: int = 0
    evaluated_tokens: int = 0
    rebuild_s: float = 0.0


@dataclass(frozen=True)
class Finished:
    """A reply ended normally (including Stop and context full).

    Attributes:
        text: the whole reply.
        stats: the turn's measurements.
        alternatives: every generated token's top-N candidates (when the request asked
            for ``alternatives``; for a ``reply_prefix`` request, the steps after the prefix).
    """

    request_id: int
    text: str
    stats: GenerationStats
    alternatives: ReplyAlternatives | None = None


class FailureKind(str, enum.Enum):
    """Why a request failed (``Failed.kind``); the values are what logs and tests read."""

    LOAD = "load"  #: llama.cpp could not load the model (memory, unsupported architecture...)
    BAD_MODEL = "bad_model"  #: the file is not a loadable GGUF (checked before llama.cpp sees it)
    CONTEXT_OVERFLOW = "context_overflow"  #: the prompt does not fit in n_ctx under the policy
    NO_MODEL = "no_model"  #: a request that needs a model, with none loaded
    TEMPLATE = "template"  #: the chat template refused the conversation (e.g. roles not alternating)
    BAD_SETTINGS = "bad_settings"  #: sampler settings llama.cpp cannot use
    NO_LOGITS = "no_logits"  #: a funnel asked for a step whose logits are not stored
    INTERNAL = "internal"  #: a bug in the engine; details in engine.log
    # Failures the window gives a request of the local API (app/server) without the engine:
    ENGINE = "engine"  #: the engine process stopped, restarted or the server was switched off
    BUSY = "busy"  #: the person's reply is in flight and the server refuses while busy
    CANCELLED = "cancelled"  #: cancelled from the window before it started


@dataclass(frozen=True)
class Failed:
    """A request failed; ``message`` names the problem and what to do.

    Attributes:
        kind: a :class:`FailureKind`.
        stats: measurements up to the failure, when a reply had started.
    """

    request_id: int
    kind: FailureKind
    message: str
    stats: GenerationStats | None = None


@dataclass(frozen=True)
class FunnelComputed:
    """The answer to :class:`ComputeFunnel`: the step's :class:`~app.core.funnel.Funnel`."""

    request_id: int
    funnel: Funnel


@dataclass(frozen=True)
class ContextReset:
    request_id: int


@dataclass(frozen=True)
class LogLine:
    """A warning or error llama.cpp logged (level: 'warning' or 'error')."""

    level: str
    text: str


Event = (
    EngineReady
    | ModelLoaded
    | PromptPrepared
    | PrefillProgress
    | TokenEvent
    | TokenBatch
    | ContextShifted
    | Finished
    | Failed
    | ContextReset
    | FunnelComputed
    | LogLine
)

TERMINAL_EVENTS = (ModelLoaded, Finished, Failed, ContextReset, FunnelComputed)

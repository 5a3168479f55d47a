"""Messages between the UI process and the engine process.

Requests go to the engine; events come back. Both are frozen dataclasses of
plain values (they are pickled over a pipe). Every request with a
``request_id`` ends with exactly one terminal event for that id:
:class:`Finished` or :class:`Failed` for :class:`Generate`,
:class:`ModelLoaded` or :class:`Failed` for :class:`LoadModel`,
:class:`ContextReset` for :class:`ResetContext`,
:class:`FunnelComputed` or :class:`Failed` for :class:`ComputeFunnel`,
:class:`PromptRendered` or :class:`Failed` for :class:`RenderPrompt`.
:class:`PromptCounted` or :class:`Failed` for :class:`CountPrompt`.
:class:`TokenInspected` or :class:`Failed` for :class:`InspectToken`.
:class:`PrepareInspect` and :class:`Shutdown` carry no id and get no answer.

Cancel is not a message: the UI sets a shared ``multiprocessing.Event`` that
the engine checks between prefill chunks and decode steps (docs/architecture.md, principle 4).
"""

from __future__ import annotations

import enum
from dataclasses import KW_ONLY, dataclass

from app.core.chat.context import ChatMessage, ContextPolicy, GenerationStats, LoadSettings
from app.core.gguf.gguf_info import GGUFInfo
from app.core.hardware.memory import KVCacheLayout
from app.core.inspection.token_inspection import TokenInspection
from app.core.remote import RemoteFacts
from app.core.rpc import DevicePlacement
from app.core.sampling.alternatives import ReplyAlternatives, StoredStep
from app.core.sampling.funnel import Funnel
from app.core.sampling.params import SamplerSettings


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadModel:
    """Load a GGUF (replacing any loaded model).

    Attributes:
        path: the .gguf file (the first part of a split model).
        settings: n_ctx, n_gpu_layers, n_threads, n_batch, context policy, swa_full, flash
            attention, K / V cache types.
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
            :class:`~app.core.chat.context.ContextPolicy` value); None: the one given at load.
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
        chat_template: the person's chat template (Jinja2 source) to render ``messages`` with
            instead of the GGUF's (a per-model override); None: the GGUF's (or the plain
            transcript for a model without one). One that does not compile or render fails
            with kind ``template``, its line named.
        alternatives: top candidates to keep per generated token and send back with
            :class:`Finished` (:class:`~app.core.sampling.alternatives.ReplyAlternatives`, at most
            :data:`~app.core.sampling.alternatives.MAX_PER_TOKEN`); 0 = none. Taken from the same per-step
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
    chat_template: str | None = None
    alternatives: int = 0
    reply_prefix: tuple[int, ...] = ()


@dataclass(frozen=True)
class RenderPrompt:
    """Render a conversation as the model would see it, without generating (the Template view).

    Answered with :class:`PromptRendered` or :class:`Failed` (kind ``template`` naming the
    template's line for a syntax error or an exception; ``no_model``). Queued behind a reply
    in flight.

    Attributes:
        messages: the conversation, system prompt first; empty: a sample conversation with
            system, user and assistant turns (:data:`app.core.chat.chat_template.SAMPLE_CONVERSATION`).
        chat_template: a Jinja2 template to render with instead of the model's (an override
            being edited or in use); None: the GGUF's.
        continue_last: render the last (assistant) message to be continued.
    """

    request_id: int
    messages: tuple[ChatMessage, ...] = ()
    chat_template: str | None = None
    continue_last: bool = False


@dataclass(frozen=True)
class CountPrompt:
    """Count the tokens a conversation would be sent as (the composer's counter, while the person types).

    Answered with :class:`PromptCounted` or :class:`Failed` (``no_model``; ``template``). Queued
    behind a reply in flight, as :class:`RenderPrompt`.

    Attributes:
        messages: the conversation, system prompt first, the draft as its last (user) message.
        chat_template: as :class:`RenderPrompt` (the override in use; None: the GGUF's).
        policy: the context policy Send would use: over n_ctx, the prompt is fitted by it exactly as
            :class:`Generate` fits it (the oldest turns dropped, or refused).
    """

    request_id: int
    messages: tuple[ChatMessage, ...]
    chat_template: str | None = None
    policy: ContextPolicy = ContextPolicy.STOP


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
            kept top-N, :class:`~app.core.sampling.alternatives.StoredStep`); ``reply_id`` and ``step``
            are then ignored, and ``sampler`` None means the stored reply's own settings.
    """

    request_id: int
    reply_id: int = -1
    step: int = -1
    sampler: SamplerSettings | None = None
    rows: int = 12
    stored: StoredStep | None = None


@dataclass(frozen=True)
class InspectToken:
    """Inspect one position of the chat's context: logit lens, attention, embedding, experts.

    Answered with :class:`TokenInspected` or :class:`Failed` (kind ``not_in_context`` when the
    position no longer holds ``token_id``). The engine runs it on its own thread in a second
    llama.cpp context (:mod:`app.engine.inspection`), so a reply, Stop and a new message go on.

    Attributes:
        position: the context position (0-based, as the KV cache orders tokens).
        token_id: the token expected there (checked).
        turn_start: the turn's first position, for the expert load over the turn (-1: the span only).
        radius: neighbours each side in the lens grid.
        top_k: candidates per lens cell.
        neighbours: nearest vocabulary tokens in the embedding view.
        force_re_eval: evaluate everything again instead of reusing the chat's KV cache
            (benchmarks and tests compare the two paths).
    """

    request_id: int
    position: int
    token_id: int
    turn_start: int = -1
    radius: int = 2
    top_k: int = 5
    neighbours: int = 10
    force_re_eval: bool = False


@dataclass(frozen=True)
class PrepareInspect:
    """Build what the first inspection needs ahead of it: the dequantized vocabulary tables
    (0.74 s on Gemma 3's 262k x 640 embedding here, 320 MiB) and the inspect context.

    Sent when the person shows they may inspect (hovers a token, opens a token's menu), so the
    first :class:`InspectToken` does not wait for them. Runs on the engine's inspect thread, before
    any inspection queued after it; no answer (a failure is logged, and the inspection that follows
    reports it). Nothing is built twice for the same model.
    """


@dataclass(frozen=True)
class ResetContext:
    """Forget the KV cache ("New chat"): the next turn starts from an empty context."""

    request_id: int


@dataclass(frozen=True)
class Shutdown:
    """End the engine process."""


Request = (
    LoadModel
    | Generate
    | RenderPrompt
    | CountPrompt
    | ComputeFunnel
    | InspectToken
    | PrepareInspect
    | ResetContext
    | Shutdown
)


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
        rpc: whether this build has llama.cpp's RPC backend (``GGML_RPC=ON``): layers can go to
            rpc-server machines (``LoadSettings.rpc_servers``).
        remote: the engine is a remote server (:mod:`app.remote`): the other fields say nothing
            about this machine's llama.cpp build.
    """

    llama_cpp_version: str
    system_info: str
    gpu_offload: bool
    devices: tuple[DeviceMemory, ...] = ()
    rpc: bool = False
    remote: bool = False


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
        kv_allocated_bytes: KV cache bytes by Glassbox's formula (app.core.hardware.memory).
        kv_layout: the KV cache's layout at the settings in effect (n_ctx, n_ubatch, swa_full);
            its ``allocated_bytes`` is ``kv_allocated_bytes``.
        kv_reported_bytes: KV cache bytes llama.cpp logged that it allocated (0 if not seen).
        compute_reported_bytes: compute buffer bytes llama.cpp logged (0 if not seen).
        flash_attn_active: flash attention is on in this context (``settings.flash_attn`` says
            what was asked: auto is settled by llama.cpp at load, and a quantized V cache turns it on).
        chat_template: the template used, or None (plain transcript fallback).
        bos_text, eos_text: texts of BOS/EOS.
        eog_token_ids: ids that end generation (EOS, EOT, ...).
        add_bos: whether the tokenizer adds BOS.
        remote: set when the engine is a remote server (:mod:`app.remote`): what it reported.
            ``info`` then holds no tensors (the file is on the server: ``info.path`` is the model
            id), ``kv_layout`` no layers, and the byte figures are 0 (not reported).
        placement: which device holds which layers, weights and KV cache (llama.cpp's load log),
            the local CPU first; ``()`` when the log did not say.
        rpc_load_sent_bytes: TCP payload bytes sent to the RPC servers while loading (the weights
            they hold) on the connections the model keeps (llama.cpp's short query connections
            during the load, a few KiB, are not seen), 0 without RPC servers.
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
    flash_attn_active: bool = False
    remote: RemoteFacts | None = None
    placement: tuple[DevicePlacement, ...] = ()
    rpc_load_sent_bytes: int = 0


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
        template_s: of that, seconds spent rendering the chat template.
        tokenize_s: seconds spent tokenizing the rendered text (reused tokens are matched, not tokenized).
        reuse_s: seconds spent finding the prefix the KV cache holds and removing the rest
            (``llama_memory_seq_rm``); it ends at ``elapsed_s``.
    """

    request_id: int
    elapsed_s: float
    prompt_tokens: int
    cached_tokens: int
    to_evaluate: int
    dropped_messages: int
    new_tokens: tuple[tuple[int, str], ...]
    prompt_text: str
    template_s: float = 0.0
    tokenize_s: float = 0.0
    reuse_s: float = 0.0


@dataclass(frozen=True)
class PrefillProgress:
    """Prefill advanced by one chunk. Times are seconds since the request arrived.

    Attributes:
        done, total: tokens evaluated so far, and to evaluate.
        rebuild: False for the prompt's prefill; True while the rolling policy rebuilds the
            context mid-reply (``done`` / ``total`` then count the rebuild's tokens; the
            prompt's prefill figures are over and stay as they were).
        slice_tokens: tokens of the slice (one llama_decode call) that ended at ``elapsed_s``;
            0 for progress reported inside a slice.
    """

    request_id: int
    done: int
    total: int
    elapsed_s: float
    rebuild: bool = False
    slice_tokens: int = 0


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
        elapsed_s: when the turn ended, seconds since the request reached the engine.
        alternatives: every generated token's top-N candidates (when the request asked
            for ``alternatives``; for a ``reply_prefix`` request, the steps after the prefix).
    """

    request_id: int
    text: str
    stats: GenerationStats
    elapsed_s: float = 0.0
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
    NOT_IN_CONTEXT = "not_in_context"  #: an inspection asked for a position the KV cache no longer holds
    INTERNAL = "internal"  #: a bug in the engine; details in engine.log
    RPC = "rpc"  #: an RPC server of the load settings cannot be used (unreachable, busy, another version)
    # Failures the window gives a request of the local API (app/server) without the engine:
    ENGINE = "engine"  #: the engine process stopped, restarted or the server was switched off
    BUSY = "busy"  #: the person's reply is in flight and the server refuses while busy
    CANCELLED = "cancelled"  #: cancelled from the window before it started; an inspection stopped by a model unload
    REMOTE = "remote"  #: a remote engine (app.remote) could not be reached or answered with an error


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


class TemplateSource(str, enum.Enum):
    """Where a rendered prompt's format came from."""

    GGUF = "gguf"  #: the chat template in the GGUF's metadata
    OVERRIDE = "override"  #: the person's template for this model (or one being edited)
    PLAIN = "plain"  #: no template: Glassbox's plain transcript (``User: ... Assistant:``)


@dataclass(frozen=True)
class PromptPiece:
    """One token of a rendered prompt.

    Attributes:
        token_id: the token.
        text: its text for display (special tokens as their text, fragments of a UTF-8
            character as ``⟨F0 9F⟩``).
        special: a control or user-defined token (BOS, EOS, ``<|im_start|>``, ``<start_of_turn>``).
    """

    token_id: int
    text: str
    special: bool


@dataclass(frozen=True)
class PromptRendered:
    """The answer to :class:`RenderPrompt`: the prompt text and the tokens the model sees.

    Attributes:
        text: the rendered prompt.
        pieces: its tokens, BOS first when the tokenizer adds one (at most
            ``MAX_RENDERED_PIECES``; ``n_tokens`` counts them all).
        n_tokens: tokens of the whole prompt.
        source: where the format came from.
        template: the Jinja2 source used (None for the plain transcript).
        gguf_template: the GGUF's own template (None when it has none).
        sample: ``text`` renders the sample conversation, not a chat.
    """

    request_id: int
    text: str
    pieces: tuple[PromptPiece, ...]
    n_tokens: int
    source: TemplateSource
    template: str | None
    gguf_template: str | None
    sample: bool = False


MAX_RENDERED_PIECES = 16384


@dataclass(frozen=True)
class PromptCounted:
    """The answer to :class:`CountPrompt`.

    Attributes:
        n_tokens: the whole prompt's tokens as a reply would evaluate them (the chat template's
            framing, BOS and the generation prompt included), before any fitting to n_ctx.
        last_tokens: the last message's text alone, tokens (no special tokens parsed, no BOS).
        n_ctx: the loaded context, tokens.
        dropped_messages: oldest messages Send would leave out to fit n_ctx (the ROLLING policy), 0 when
            it fits as is; -1 when Send would be refused (``context_overflow``: the STOP policy, or even
            the draft with the system prompt is too long).
        fitted_tokens: the prompt's tokens after fitting (``n_tokens`` when nothing is dropped; 0 when refused).
    """

    request_id: int
    n_tokens: int
    last_tokens: int
    n_ctx: int
    dropped_messages: int = 0
    fitted_tokens: int = 0


@dataclass(frozen=True)
class FunnelComputed:
    """The answer to :class:`ComputeFunnel`: the step's :class:`~app.core.sampling.funnel.Funnel`."""

    request_id: int
    funnel: Funnel


@dataclass(frozen=True)
class TokenInspected:
    """The answer to :class:`InspectToken`."""

    request_id: int
    inspection: TokenInspection


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
    | PromptRendered
    | PromptCounted
    | TokenInspected
    | LogLine
)

TERMINAL_EVENTS = (
    ModelLoaded,
    Finished,
    Failed,
    ContextReset,
    FunnelComputed,
    PromptRendered,
    PromptCounted,
    TokenInspected,
)

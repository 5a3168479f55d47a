"""Requests: what the window asks the engine process (:mod:`app.core.protocol` has the contract).

Each carries a ``request_id`` that its one terminal answer (:mod:`app.core.protocol.answers`) repeats,
except :class:`PrepareInspect` and :class:`Shutdown`, which get no answer.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from app.core.chat.context import ChatMessage, ContextPolicy, LoadSettings
from app.core.constraint.model import OutputConstraint
from app.core.quant.comparison import CompareModels
from app.core.quant.types import QuantType
from app.core.sampling.alternatives import StoredStep
from app.core.sampling.params import SamplerSettings
from app.core.tools.spec import ToolChoice, ToolSpec


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
        speculate: None: speculate as loaded (``LoadSettings.speculation``); False: this reply
            without speculation ("measure speed-up" regenerates greedily both ways); True: with it
            when the load set a drafter up (ignored otherwise).
        constraint: the shape the reply must take (JSON, a JSON schema, a GBNF grammar;
            :class:`~app.core.constraint.model.OutputConstraint`), enforced by llama.cpp's grammar
            sampler first in the chain (:mod:`app.engine.constraint`); None or kind NONE: free text.
            A constraint that does not convert or parse fails the request with kind ``constraint``
            (the schema's part or the grammar's line named) before anything is evaluated.
        tools: functions offered to the model (the local API's ``tools``), rendered into the prompt:
            through the chat template's ``tools`` when its Jinja source reads them, else (only with
            a forced ``tool_choice``) described in the system message
            (:func:`~app.core.tools.template.tools_system_prompt`). Empty: none.
        tool_choice: with ``tools``: :attr:`~app.core.tools.spec.ToolChoiceKind.AUTO` fails with kind
            ``template`` when the template does not offer tools (the model would not know them);
            a forced choice goes with the constraint that forces the call (``constraint``).
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
    speculate: bool | None = None
    constraint: OutputConstraint | None = None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None


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

    A reply made under an output constraint gets a grammar column first: a live reply's own (kept
    with its logits), a stored step's ``stored.constraint``.

    A stored step naming the model file that wrote it (``stored.model_path``) is recomputed whole when that
    file is loaded: the engine evaluates its prompt and tokens again (on its inspect thread) and the funnel
    is exact (``Funnel.recomputed``); otherwise it runs on the stored top-N (``Funnel.stored``).
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


# ---- speed against context length (issue 21 §3): app/engine/depth_sweep.py ----------------------


@dataclass(frozen=True)
class SweepDepth:
    """Measure prefill and decode tok/s with ``depths`` tokens already in the KV cache, as
    ``llama-bench -d`` does (tools/llama-bench/llama-bench.cpp), on the loaded model and its load settings.

    Runs on the engine's main lane, in the chat's context: a reply cannot start until it ends. One
    :class:`~app.core.protocol.progress.DepthMeasured` per depth, then
    :class:`~app.core.protocol.answers.DepthSwept` (also after Stop, with the depths measured so far),
    or :class:`Failed` (``no_model``; ``bad_settings`` for a depth that does not fit n_ctx).

    Attributes:
        depths: tokens in the KV cache before each measurement, ascending; each plus ``n_prompt``
            plus ``n_gen`` must fit n_ctx.
        n_prompt: prompt tokens timed per repetition (llama-bench ``-p``; 0: prefill not timed).
        n_gen: tokens decoded one at a time per repetition (llama-bench ``-n``; 0: decode not timed).
        repetitions: timed runs per depth (llama-bench ``-r``); the figures are their mean and
            standard deviation.
        seed: seeds the random token ids (llama-bench fills with ``std::rand() % n_vocab``).
    """

    request_id: int
    depths: tuple[int, ...]
    n_prompt: int = 512
    n_gen: int = 128
    repetitions: int = 5
    seed: int = 0


# ---- end of speed against context length ---------------------------------------------------------


# --- quantization (issue 21 §2): make a GGUF with llama.cpp's quantizer --------------------------------------


@dataclass(frozen=True)
class Quantize:
    """Make ``dest`` from ``source`` with ``llama_model_quantize`` (:mod:`app.engine.quant.quantize`).

    Answered with :class:`~app.core.protocol.answers.Quantized` or :class:`Failed` (kind ``bad_model``: the
    source is not a loadable GGUF; ``bad_settings``: the type is refused from this source, the destination
    exists, or its folder cannot be written; ``quantize``: llama.cpp's quantizer failed, or the disk filled),
    after :class:`~app.core.protocol.progress.QuantizeProgress` events. The result is written to
    ``<dest>.part`` and renamed to ``dest`` only when llama.cpp succeeded; the ``.part`` is removed on any
    failure. llama.cpp's quantizer cannot be interrupted: a cancel is the process killed (the window then
    removes the ``.part``). Run it in a job's own engine process, not the chat's.

    Attributes:
        source: the GGUF to quantize (the first part of a split model).
        dest: the file to make (``.gguf``); it must not exist.
        qtype: the type to make.
        n_threads: llama.cpp's quantizer threads; 0: the engine's default (:func:`app.engine.threads.auto_threads`).
    """

    request_id: int
    source: str
    dest: str
    qtype: QuantType
    n_threads: int = 0


# --- end of quantization ------------------------------------------------------------------------------------


# ---- embeddings (issue 23 §3): app/engine/embeddings.py ------------------------------------------


@dataclass(frozen=True)
class Embed:
    """Embed ``inputs`` with the loaded model in llama.cpp's embeddings mode, in a context of its own
    (the chat's KV cache is untouched), pooled by the model's pooling type (mean when the model has
    none) and L2-normalized (:mod:`app.engine.embeddings`).

    Runs on the engine's embed lane, off the main loop: a reply may stream meanwhile. Answered with
    :class:`~app.core.protocol.answers.Embedded`, or :class:`Failed` (``no_model``;
    ``context_overflow``: an input longer than ``max_tokens``, or than the engine's cap on the logits
    llama.cpp keeps for it; the message names the input and the limit;
    ``bad_settings``: an empty input or a token id outside the vocabulary; ``cancelled``: the model
    was unloaded meanwhile).

    Attributes:
        inputs: the texts (tokenized as llama-server does: BOS/EOS as the tokenizer adds them, special
            tokens parsed) or token-id lists (used as they are), in order.
        max_tokens: the longest input accepted, tokens (the window passes the loaded n_ctx).
    """

    request_id: int
    inputs: tuple[str | tuple[int, ...], ...]
    max_tokens: int


@dataclass(frozen=True)
class CancelEmbed:
    """Stop the :class:`Embed` with ``request_id`` (its client went away, or the window cancelled it): it
    ends with :class:`Failed` ``cancelled`` before its next batch or graph node, or at once when it has
    not started. Answered by nothing (on the engine's reader lane, while the embed lane works); send it
    only while that Embed has not been answered."""

    request_id: int


# ---- end of embeddings ---------------------------------------------------------------------------


# ---- sizing a quantization (issue 21 §2): llama.cpp's dry run of each type, app/engine/quant/dry_run.py ---


@dataclass(frozen=True)
class PlanQuantize:
    """Size each type Glassbox offers from ``source`` with llama.cpp's own dry run
    (``llama_model_quantize_params.dry_run``: nothing written, about 0.06 s a type on SmolLM2).

    Answered with :class:`~app.core.protocol.answers.QuantizePlanned` (a type llama.cpp refuses is one of its
    options, with the reason), or :class:`Failed` (kind ``bad_model``: the source is not a loadable GGUF). Run
    it in a job's own engine process, as :class:`Quantize`.

    Attributes:
        source: the GGUF to quantize (the first part of a split model).
    """

    request_id: int
    source: str


# ---- end of sizing a quantization -----------------------------------------------------------------------


# ---- several API requests decoded together (issue 23 §4; its events: app/core/protocol/parallel.py) ----
@dataclass(frozen=True)
class GenerateParallel:
    """Run ``generate`` as one of at most ``n_seq`` sequences decoded together, in a second llama.cpp context
    (:mod:`app.core.protocol.parallel`): answered as a Generate is (PromptPrepared, TokenBatch, then one
    Finished or Failed), the person's KV cache untouched.

    Attributes:
        request_id: the id every event of this request carries (``generate.request_id`` is ignored).
        generate: the request (an ``external`` one: the local API's).
        n_seq: sequences of the parallel context, 2 to 16 (``MAX_SEQUENCES``). The engine makes its
            context with this many (each with the loaded n_ctx) when none is in flight; a request
            asking for another number waits until the ones in flight have ended.
    """

    request_id: int
    generate: Generate
    n_seq: int


@dataclass(frozen=True)
class CancelSequence:
    """Stop the :class:`GenerateParallel` with ``request_id``: a decoding one ends with Finished, stop
    reason ``cancelled``; a waiting one with Failed ``cancelled``. No answer of its own; nothing when
    that request has ended already."""

    request_id: int


# ---- end of several API requests decoded together ---------------------------------------------------------

# ---- output constraints (issue 23 §1): app/engine/constraint/ -------------------------------------


@dataclass(frozen=True)
class CheckConstraint:
    """Check an output constraint without generating: a JSON schema through the converter, the
    resulting or given GBNF through llama.cpp's grammar parser (the window's Check button, the local
    API's 400 for a schema the converter cannot handle).

    Answered on the engine's reader lane (at once, while a reply streams) with
    :class:`~app.core.protocol.answers.ConstraintChecked`, or :class:`Failed` (``constraint``: the
    schema's unsupported part or the grammar's line named; ``no_model``).

    Attributes:
        constraint: the constraint to check.
    """

    request_id: int
    constraint: OutputConstraint


# ---- end of output constraints -------------------------------------------------------------------


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
    | SweepDepth
    | Quantize
    | CompareModels  # comparing two quantizations (issue 21): app/core/quant/comparison.py
    | Embed  # embeddings (issue 23 §3)
    | CancelEmbed
    | PlanQuantize  # sizing a quantization with llama.cpp's dry run (issue 21 §2)
    | GenerateParallel  # several API requests decoded together (issue 23 §4)
    | CancelSequence
    | CheckConstraint  # output constraints (issue 23 §1)
)

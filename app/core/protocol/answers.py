"""Answers: the one terminal event that ends each request (:data:`TERMINAL_EVENTS`), and why a request failed.

:class:`ModelLoaded` for :class:`~app.core.protocol.requests.LoadModel`, :class:`Finished` for
:class:`~app.core.protocol.requests.Generate`, :class:`ContextReset`, :class:`FunnelComputed`,
:class:`PromptRendered`, :class:`PromptCounted` and :class:`TokenInspected` for the others;
:class:`Failed` (with a :class:`FailureKind`) for any of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from app.core.chat.context import GenerationStats, LoadSettings
from app.core.gguf.gguf_info import GGUFInfo
from app.core.hardware.memory import KVCacheLayout
from app.core.inspection.token_inspection import TokenInspection
from app.core.quant.comparison import ComparisonFinished
from app.core.quant.types import QuantType
from app.core.remote import RemoteFacts
from app.core.rpc import DevicePlacement
from app.core.sampling.alternatives import ReplyAlternatives
from app.core.sampling.funnel import Funnel
from app.core.speculative.draft import DraftInfo
from app.core.speculative.settings import SpeculationSettings


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
        speculation: speculative decoding as applied (``enabled`` False when it could not be:
            off in the settings, or a remote engine).
        draft: the draft model loaded beside the model (its memory for the Model panel and the
            fit verdict); None without one.
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
    speculation: SpeculationSettings = field(default_factory=SpeculationSettings)
    draft: DraftInfo | None = None


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
    QUANTIZE = "quantize"  #: llama.cpp's quantizer failed or its result could not be written (disk full)
    INCOMPATIBLE = "incompatible"  #: two models' vocabularies differ (CompareModels; the check named in the message)
    CONSTRAINT = "constraint"  #: an output constraint that does not convert or parse (the part or line named)


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


# --- quantization (issue 21 §2) -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Quantized:
    """The answer to :class:`~app.core.protocol.requests.Quantize`: the result is at ``dest``, whole.

    Attributes:
        dest: the file made.
        qtype: its type.
        bytes: its size, bytes.
        source_bytes: the source's size (all parts), bytes.
        tensors: tensors written.
        requantized: the source was already quantized (llama.cpp ran with ``allow_requantize``), so the
            result measures requantization, not quantization from the original weights.
        elapsed_s: seconds from the request reaching the engine to the file renamed into place.
        fallback_tensors: tensors llama.cpp gave another type than the one asked because the type's
            block does not divide their rows (SmolLM2's 576-wide rows and the 256-weight K blocks: 180 of
            272 tensors of its Q2_K are Q4_0).
    """

    request_id: int
    dest: str
    qtype: QuantType
    bytes: int
    source_bytes: int
    tensors: int
    requantized: bool
    elapsed_s: float
    fallback_tensors: int = 0


# --- end of quantization ------------------------------------------------------------------------------------


TERMINAL_EVENTS: tuple[type, ...] = (
    ModelLoaded,
    Finished,
    Failed,
    ContextReset,
    FunnelComputed,
    PromptRendered,
    PromptCounted,
    TokenInspected,
    Quantized,
    ComparisonFinished,  # comparing two quantizations (issue 21): app/core/quant/comparison.py
)


# ---- speed against context length (issue 21 §3): app/engine/depth_sweep.py ----------------------

from app.core.depth_sweep.plan import DepthPoint  # noqa: E402  (the block is appended; see app.core.depth_sweep)


@dataclass(frozen=True)
class DepthSwept:
    """The answer to :class:`~app.core.protocol.requests.SweepDepth` (also after Stop).

    Attributes:
        points: the depths measured, in order (fewer than asked when ``cancelled``).
        cancelled: Stop ended the sweep early.
        elapsed_s: seconds from the request reaching the engine to its end.
        n_threads: decode threads the context used (``llama_n_threads``).
        n_threads_batch: prefill threads (``llama_n_threads_batch``).
        n_batch, n_ubatch: the context's logical and physical batch, tokens.
        kv_restored_tokens: tokens of the chat's KV cache put back after the sweep (its next turn
            reuses them); 0 with ``kv_reset``.
        kv_reset: the chat's KV cache was left empty (too large to copy, or llama.cpp refused the
            copy back): the next turn evaluates the conversation again.
        matmul_flop_s: ``((ggml type, FLOP/s), ...)``: llama.cpp's matrix multiply on the model's weight
            types, on the prefill threads (``app/engine/matmul_roof.py``; empty: not measured: no prefill timed,
            or layers offloaded to a GPU or RPC servers, where the CPU's rate bounds nothing).
    """

    request_id: int
    points: tuple[DepthPoint, ...]
    cancelled: bool
    elapsed_s: float
    n_threads: int
    n_threads_batch: int
    n_batch: int
    n_ubatch: int
    kv_restored_tokens: int = 0
    kv_reset: bool = False
    matmul_flop_s: tuple[tuple[str, float], ...] = ()


TERMINAL_EVENTS = (*TERMINAL_EVENTS, DepthSwept)

# ---- end of speed against context length ---------------------------------------------------------


# ---- embeddings (issue 23 §3): app/engine/embeddings.py ------------------------------------------


class Pooling(str, enum.Enum):
    """How llama.cpp pools a sequence's hidden states into one vector (``llama_pooling_type``)."""

    MEAN = "mean"  #: the mean over the sequence's tokens
    CLS = "cls"  #: the first token's (BERT's [CLS])
    LAST = "last"  #: the last token's
    RANK = "rank"  #: a reranker's score (not an embedding)


@dataclass(frozen=True)
class Embedded:
    """The answer to :class:`~app.core.protocol.requests.Embed`: one unit-length (L2) vector per input.

    Attributes:
        vectors: ``len(token_counts) * n_embd`` float32 values, little-endian, input after input.
        n_embd: values per vector.
        token_counts: tokens each input was, in order (what was evaluated: BOS/EOS included).
        pooling: the pooling llama.cpp ran.
        model_pooling: the model declares that pooling (``{arch}.pooling_type``); False: it
            declares none (a generative model) and :attr:`Pooling.MEAN` was chosen.
        elapsed_s: seconds the engine spent, the context's creation included when it was (re)made.
    """

    request_id: int
    vectors: bytes
    n_embd: int
    token_counts: tuple[int, ...]
    pooling: Pooling
    model_pooling: bool
    elapsed_s: float


TERMINAL_EVENTS = (*TERMINAL_EVENTS, Embedded)

# ---- end of embeddings ---------------------------------------------------------------------------

# ---- sizing a quantization (issue 21 §2): llama.cpp's dry run of each type, app/engine/quant/dry_run.py ---


@dataclass(frozen=True)
class FallbackTensor:
    """One tensor llama.cpp's quantizer gives another type than the mix chose, because that type's block does
    not divide its rows (its ``tensor_type_fallback`` warning: ``warning: blk.0.attn_k.weight - ncols 576 not
    divisible by 256 (required for type q2_K) -> falling back to q4_0``).

    Attributes:
        name: the tensor's name.
        row_weights: its row length (``ne[0]``), weights.
        block_weights: the chosen type's block, weights.
        chosen: the type the mix chose (``Q2_K``, ggml's name upper-cased).
        given: the type it gets instead (``Q4_0``; ``F16`` when no smaller block divides the rows either).
    """

    name: str
    row_weights: int
    block_weights: int
    chosen: str
    given: str


@dataclass(frozen=True)
class PlannedType:
    """What llama.cpp's dry run says one type would make.

    Attributes:
        qtype: the type.
        bytes: the result's size, bytes: the header (as the source's) and each tensor's bytes as llama.cpp
            gives them (``ggml_row_size`` of the type it chose × rows, the kept ones as they are) padded to
            the alignment (32): the made file's size to the byte for a source made by llama.cpp.
        bits_per_weight: the tensors' bytes × 8 over the model's weights (llama.cpp's "quant size" BPW).
        n_tensors: the model's tensors.
        fallbacks: the tensors given a fallback type (:class:`FallbackTensor`), in llama.cpp's order.
        refusal: why llama.cpp will not make it ("" when it will): its error lines, or that it needs an
            importance matrix; the figures are then 0.
    """

    qtype: QuantType
    bytes: int
    bits_per_weight: float
    n_tensors: int
    fallbacks: tuple[FallbackTensor, ...] = ()
    refusal: str = ""


@dataclass(frozen=True)
class QuantizePlanned:
    """The answer to :class:`~app.core.protocol.requests.PlanQuantize`.

    Attributes:
        source: the source asked about.
        options: one per type offered from the source (:func:`app.core.quant.plan.plan_quantization`), in
            :class:`QuantType` order.
        elapsed_s: seconds the dry runs took together.
    """

    request_id: int
    source: str
    options: tuple[PlannedType, ...]
    elapsed_s: float


TERMINAL_EVENTS = (*TERMINAL_EVENTS, QuantizePlanned)

# ---- end of sizing a quantization -----------------------------------------------------------------------

# ---- output constraints (issue 23 §1): app/engine/constraint/ -------------------------------------


@dataclass(frozen=True)
class ConstraintChecked:
    """The answer to :class:`~app.core.protocol.requests.CheckConstraint`: the constraint can be used.

    Attributes:
        gbnf: the GBNF grammar llama.cpp's grammar sampler is given ("" for kind NONE).
        n_rules: the grammar's rules (lines of the form ``name ::= ...``).
    """

    request_id: int
    gbnf: str
    n_rules: int


TERMINAL_EVENTS = (*TERMINAL_EVENTS, ConstraintChecked)

# ---- end of output constraints -------------------------------------------------------------------

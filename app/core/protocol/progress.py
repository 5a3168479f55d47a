"""Progress events: what the engine reports while it works, none of them the end of a request.

:class:`EngineReady` once when the process has started; :class:`PromptPrepared`,
:class:`PrefillProgress`, :class:`TokenBatch` (of :class:`TokenEvent`) and :class:`ContextShifted`
during a turn; :class:`LogLine` whenever llama.cpp warns. The request's end is an answer
(:mod:`app.core.protocol.answers`).
"""

from __future__ import annotations

from dataclasses import dataclass


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
class LogLine:
    """A warning or error llama.cpp logged (level: 'warning' or 'error')."""

    level: str
    text: str


# --- quantization (issue 21 §2) -----------------------------------------------------------------------------


@dataclass(frozen=True)
class QuantizeProgress:
    """A :class:`~app.core.protocol.requests.Quantize` under way: sent once before the first tensor (with the
    expected size) and after each tensor llama.cpp wrote (its log's ``[ i/ n] name ...`` line).

    Attributes:
        tensors_done: tensors written so far.
        tensors_total: the model's tensors.
        bytes_written: bytes in the ``.part`` file so far (metadata placeholder included).
        expected_bytes: the result's size as llama.cpp's dry run of the same quantization says
            (its "quant size" plus the metadata), bytes; 0 when the dry run did not say.
        elapsed_s: seconds since the request reached the engine.
    """

    request_id: int
    tensors_done: int
    tensors_total: int
    bytes_written: int
    expected_bytes: int
    elapsed_s: float


# --- end of quantization ------------------------------------------------------------------------------------


# ---- Comparing two quantizations (issue 21) -------------------------------------------------------------
# Its progress events live with the request's other values in app/core/quant/comparison.py
# (ComparisonStarted, ComparisonProgressed); the protocol package re-exports them.


# ---- speed against context length (issue 21 §3): app/engine/depth_sweep.py ----------------------

from app.core.depth_sweep.plan import DepthPoint  # noqa: E402  (the block is appended; see app.core.depth_sweep)


@dataclass(frozen=True)
class DepthMeasured:
    """One depth of a :class:`~app.core.protocol.requests.SweepDepth` is measured.

    Attributes:
        index: 0-based index of the depth in the request's ``depths``.
        total: how many depths the request has.
        point: the depth's figures.
        elapsed_s: seconds since the request reached the engine.
        matmul_flop_s: ``((ggml type, FLOP/s), ...)``: llama.cpp's matrix multiply here on the model's
            weight types, measured before the first depth (the prefill's compute roof; empty: not measured).
    """

    request_id: int
    index: int
    total: int
    point: DepthPoint
    elapsed_s: float
    matmul_flop_s: tuple[tuple[str, float], ...] = ()


# ---- end of speed against context length ---------------------------------------------------------

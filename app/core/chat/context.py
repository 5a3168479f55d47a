"""Chat values shared by the engine, the UI and storage: messages, stop reasons,
context policy and the per-turn measurements.

The enums are ``str`` enums: a member compares equal to its value (``Role.USER == "user"``),
serialises as its value (JSON, SQLite) and prints as its value (``str``, f-strings, chat
templates), so stored files and rendered prompts read exactly as plain strings did. Each has
``parse(value)``, which turns stored text into a member and an unknown value into the
documented default instead of raising.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from app.core.hardware.memory import KVCacheType
from app.core.rpc import RpcError, parse_servers
from app.core.speculative.settings import SpeculationSettings
from app.core.speculative.stats import SpeculationStats


class _ValueEnum(str, enum.Enum):
    """A str enum that prints as its value (``f"{Role.USER}"`` is ``user``, not ``Role.USER``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Role(_ValueEnum):
    """Who speaks a message: the chat template's ``role``."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"

    @classmethod
    def parse(cls, value: object) -> Role:
        """The member for a stored value; anything unknown reads as :attr:`USER` (as salvage does)."""
        try:
            return cls(value)
        except (ValueError, TypeError):
            return cls.USER


@dataclass(frozen=True)
class ChatMessage:
    """One message as the chat template sees it.

    Attributes:
        role: :class:`Role`; a role given as its value (``"user"``) is converted.
        content: the visible text.
        tokens: for a reply, the token ids the model sampled for it (a continued reply's parts
            joined), when known; the engine puts them in the prompt as far as they spell
            ``content`` (:func:`app.engine.kv_reuse.splice_messages`), so the model sees what it
            sampled, not its text tokenized again. Empty: ``content`` is tokenized.

    Raises:
        ValueError: ``role`` is not a :class:`Role` value.
    """

    role: Role
    content: str
    tokens: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        given: object = self.role  # callers outside core may still pass the value as text
        if not isinstance(given, Role):
            object.__setattr__(self, "role", Role(given))


class StopReason(_ValueEnum):
    """Why a reply ended (the ``stop_reason`` of every turn)."""

    EOS = "eos"  # the model produced an end-of-generation token (EOS/EOT)
    STOP_STRING = "stop_string"  # a stop string appeared
    MAX_TOKENS = "max_tokens"  # max_tokens reached
    CONTEXT_FULL = "context_full"  # n_ctx reached and the policy says stop
    CANCELLED = "cancelled"  # the person pressed Stop
    ERROR = "error"  # the engine failed or died mid-reply

    @property
    def label(self) -> str:
        """Words for people, e.g. ``max_tokens reached``."""
        return _STOP_LABELS[self]

    @classmethod
    def parse(cls, value: object) -> StopReason:
        """The member for a stored value; anything unknown reads as :attr:`EOS` (the normal end)."""
        try:
            return cls(value)
        except (ValueError, TypeError):
            return cls.EOS


_STOP_LABELS = {
    StopReason.EOS: "end of turn",
    StopReason.STOP_STRING: "stop string",
    StopReason.MAX_TOKENS: "max_tokens reached",
    StopReason.CONTEXT_FULL: "context full",
    StopReason.CANCELLED: "stopped",
    StopReason.ERROR: "engine error",
}


# The share of n_ctx the ROLLING policy keeps free for the reply when it drops the oldest turns.
ROLLING_RESERVE_FRACTION = 0.25


class ContextPolicy(_ValueEnum):
    """What to do when the conversation no longer fits in n_ctx (ROLLING keeps
    ``ROLLING_RESERVE_FRACTION`` of it free for the reply)."""

    STOP = "stop"  # stop at the limit and say so
    ROLLING = "rolling"  # drop the oldest turns (then the oldest part of the reply) and go on

    @property
    def label(self) -> str:
        """Words for people, e.g. ``Stop at the limit``."""
        return {
            ContextPolicy.STOP: "Stop at the limit",
            ContextPolicy.ROLLING: "Drop oldest turns and go on",
        }[self]

    @classmethod
    def parse(cls, value: object) -> ContextPolicy:
        """The member for a stored value; anything unknown reads as :attr:`STOP`."""
        try:
            return cls(value)
        except (ValueError, TypeError):
            return cls.STOP


class FlashAttention(_ValueEnum):
    """llama.cpp's flash attention setting (``flash_attn_type`` in ``llama_context_params``).

    ``AUTO`` lets llama.cpp decide at context creation (on where the device running each
    layer supports the fused kernel; src/llama-context.cpp ``resolve_fused_ops``). A quantized
    V cache needs it: with ``AUTO`` llama.cpp turns it on, with ``OFF`` it refuses to create
    the context ("quantized V cache requires flash_attn to be enabled",
    ``llama_init_from_model``). Attention weights can be read only with it off (the fused
    kernel never forms them).
    """

    AUTO = "auto"
    ON = "on"
    OFF = "off"

    @property
    def label(self) -> str:
        """Words for the load form: ``auto`` (llama.cpp decides at load), ``on``, ``off``."""
        return {
            FlashAttention.AUTO: "auto",
            FlashAttention.ON: "on",
            FlashAttention.OFF: "off",
        }[self]

    @property
    def llama_value(self) -> int:
        """The ``enum llama_flash_attn_type`` value (include/llama.h: AUTO -1, DISABLED 0, ENABLED 1)."""
        return {FlashAttention.AUTO: -1, FlashAttention.OFF: 0, FlashAttention.ON: 1}[self]

    @classmethod
    def parse(cls, value: object) -> FlashAttention:
        """The member for a stored value; a stored bool reads as ON / OFF, anything unknown as :attr:`OFF`."""
        if isinstance(value, bool):
            return cls.ON if value else cls.OFF
        try:
            return cls(value)
        except (ValueError, TypeError):
            return cls.OFF


@dataclass(frozen=True)
class GenerationStats:
    """Measurements of one turn, taken in the engine around the llama.cpp calls.

    Times in seconds, speeds in tokens/s, sizes in bytes, counts in tokens.

    Attributes:
        prompt_tokens: tokens of the whole rendered prompt (template included).
        cached_tokens: of those, reused from the KV cache (common prefix with the last turn).
        evaluated_tokens: prompt tokens evaluated this turn (prefill).
        prefill_s: time spent evaluating them.
        ttft_s: time from the request reaching the engine to the first token's text.
        generated_tokens: tokens sampled (including the end token, if any).
        decode_s: time from the first to the last sampled token.
        n_ctx: context size, tokens.
        context_used: tokens in the KV cache at the end.
        kv_used_bytes / kv_allocated_bytes: KV cache bytes holding data / allocated.
        stop_reason: why it ended; a value given as text is parsed
            (:meth:`StopReason.parse`: unknown text reads as ``EOS``).
        seed: the seed the sampler used.
        dropped_messages: oldest messages left out to fit n_ctx (rolling policy).
        context_shifts: times the context was rebuilt mid-reply (rolling policy).
        llama_prefill_ms, llama_decode_ms, llama_n_prefill, llama_n_decode:
            llama.cpp's own counters (llama_perf_context) for cross-checking (a remote
            llama-server's ``timings``: prompt_ms, predicted_ms, prompt_n, predicted_n).
        unreported: names of the fields above that the engine could not measure (a remote
            server that does not report them, :mod:`app.remote`): they hold 0 and the panels
            say "not reported by this server" instead of showing the 0.
        rpc_prefill_sent_bytes, rpc_prefill_received_bytes, rpc_decode_sent_bytes,
        rpc_decode_received_bytes: TCP payload bytes the engine sent to / received from its RPC
            servers during prefill and during decode (0 without RPC servers; Linux ``TCP_INFO``).
        speculation: the reply's speculative decoding (drafted, accepted, why rounds ended);
            None when it was not speculated (and for a reply stored before speculation existed).
    """

    prompt_tokens: int = 0
    cached_tokens: int = 0
    evaluated_tokens: int = 0
    prefill_s: float = 0.0
    ttft_s: float = 0.0
    generated_tokens: int = 0
    decode_s: float = 0.0
    n_ctx: int = 0
    context_used: int = 0
    kv_used_bytes: int = 0
    kv_allocated_bytes: int = 0
    stop_reason: StopReason = StopReason.EOS
    seed: int = 0
    dropped_messages: int = 0
    context_shifts: int = 0
    llama_prefill_ms: float = 0.0
    llama_decode_ms: float = 0.0
    llama_n_prefill: int = 0
    llama_n_decode: int = 0
    unreported: tuple[str, ...] = ()

    def reported(self, name: str) -> bool:
        """Whether field ``name`` was measured (False: the server did not report it)."""
        return name not in self.unreported

    rpc_prefill_sent_bytes: int = 0
    rpc_prefill_received_bytes: int = 0
    rpc_decode_sent_bytes: int = 0
    rpc_decode_received_bytes: int = 0
    speculation: SpeculationStats | None = None

    @property
    def rpc_prefill_bytes_per_token(self) -> float:
        """Network bytes (sent + received) per prompt token evaluated, 0.0 without RPC or prefill."""
        total = self.rpc_prefill_sent_bytes + self.rpc_prefill_received_bytes
        return total / self.evaluated_tokens if self.evaluated_tokens > 0 else 0.0

    @property
    def rpc_decode_bytes_per_token(self) -> float:
        """Network bytes (sent + received) per token evaluated in decode (``llama_n_decode``), 0.0 without."""
        total = self.rpc_decode_sent_bytes + self.rpc_decode_received_bytes
        return total / self.llama_n_decode if self.llama_n_decode > 0 else 0.0

    @property
    def prefill_tok_s(self) -> float:
        """Prefill speed: evaluated prompt tokens / prefill time."""
        return self.evaluated_tokens / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        """Decode speed = (generated - 1) / (time of last token - time of first token).

        The first token's time belongs to TTFT (it needs the prefill), so it is
        not counted (case E10).
        """
        if self.generated_tokens < 2 or self.decode_s <= 0:
            return 0.0
        return (self.generated_tokens - 1) / self.decode_s

    def __post_init__(self) -> None:
        given: object = self.stop_reason  # callers outside core may still pass the value as text
        if not isinstance(given, StopReason):
            object.__setattr__(self, "stop_reason", StopReason.parse(given))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values: every field (``stop_reason`` as its string) plus the two speeds, tok/s."""
        d = asdict(self)
        d["stop_reason"] = self.stop_reason.value
        d["unreported"] = list(self.unreported)
        d["speculation"] = self.speculation.to_dict() if self.speculation is not None else None
        d["prefill_tok_s"] = self.prefill_tok_s
        d["decode_tok_s"] = self.decode_tok_s
        return d


@dataclass(frozen=True)
class LoadSettings:
    """How to load a model (applied with a reload).

    Attributes:
        n_ctx: context length, tokens (0 = the trained length).
        n_gpu_layers: layers to offload to the GPU (-1 = all; ignored on a CPU-only build).
        n_threads: CPU threads for decode (0 = auto).
        n_batch: prompt tokens evaluated per llama_decode call in prefill.
        context_policy: what to do when n_ctx is full; a value given as text is parsed
            (:meth:`ContextPolicy.parse`: unknown text reads as ``STOP``).
        swa_full: full-size KV cache for sliding-window layers (enables prefix reuse).
        flash_attn: :class:`FlashAttention` (default OFF: what llama-cpp-python's ``Llama()``
            and every Glassbox before this setting ran with; settings saved before it read as OFF).
        type_k, type_v: K and V cache types (:class:`~app.core.hardware.memory.KVCacheType`); a
            quantized V cache needs flash attention (AUTO or ON).
        rpc_servers: ``host:port`` of machines running llama.cpp's rpc-server; layers are offloaded
            to them (n_gpu_layers counts them as GPU layers). Empty: this machine only.
        speculation: speculative decoding (:class:`~app.core.speculative.settings.SpeculationSettings`;
            a draft model is loaded beside the model); settings saved before it read as off.
    """

    n_ctx: int = 4096
    n_gpu_layers: int = -1
    n_threads: int = 0
    n_batch: int = 512
    context_policy: ContextPolicy = ContextPolicy.STOP
    swa_full: bool = True
    flash_attn: FlashAttention = FlashAttention.OFF
    type_k: KVCacheType = KVCacheType.F16
    type_v: KVCacheType = KVCacheType.F16
    rpc_servers: tuple[str, ...] = ()
    speculation: SpeculationSettings = field(default_factory=SpeculationSettings)

    def __post_init__(self) -> None:
        servers: object = self.rpc_servers  # a list from JSON or a caller, or one text
        object.__setattr__(self, "rpc_servers", (servers,) if isinstance(servers, str) else tuple(self.rpc_servers))
        given: object = self.context_policy  # callers outside core may still pass the values as text
        if not isinstance(given, ContextPolicy):
            object.__setattr__(self, "context_policy", ContextPolicy.parse(given))
        fa: object = self.flash_attn
        if not isinstance(fa, FlashAttention):
            object.__setattr__(self, "flash_attn", FlashAttention.parse(fa))
        for name in ("type_k", "type_v"):
            t: object = getattr(self, name)
            if not isinstance(t, KVCacheType):
                object.__setattr__(self, name, KVCacheType.parse(t))

    @property
    def v_cache_conflict(self) -> str:
        """Why llama.cpp would refuse these settings ("" when it would not): a quantized V cache
        with flash attention off (``llama_init_from_model`` returns no context)."""
        if self.type_v.quantized and self.flash_attn is FlashAttention.OFF:
            return (
                f"A {self.type_v} V cache needs flash attention: llama.cpp refuses to create the context with "
                "flash attention off. Set flash attention to auto or on, or the V cache to f16."
            )
        return ""

    def terms(self) -> tuple[str, ...]:
        """Each setting in the field's terms, as the Model panel and the Library say them, e.g.
        ``("n_ctx 8192", "n_gpu_layers all", "n_threads auto", "n_batch 512", "flash attention on",
        "K cache f16", "V cache f16", ...)``; the context policy and RPC servers come last."""
        out: tuple[str, ...] = (
            f"n_ctx {self.n_ctx}" if self.n_ctx else "n_ctx trained length",
            f"n_gpu_layers {'all' if self.n_gpu_layers < 0 else self.n_gpu_layers}",
            f"n_threads {self.n_threads or 'auto'}",
            f"n_batch {self.n_batch}",
            f"flash attention {self.flash_attn.label}",
            f"K cache {self.type_k}",
            f"V cache {self.type_v}",
            f"SWA cache {'full size' if self.swa_full else 'window only'}",
            f"context policy: {self.context_policy.label.lower()}",
        )
        out += (f"RPC servers {', '.join(self.rpc_servers)}",) if self.rpc_servers else ()
        return out + (self.speculation.terms() if self.speculation.enabled else ())

    def differences(self, other: LoadSettings) -> tuple[str, ...]:
        """The :meth:`terms` of these settings that ``other`` does not share (what was changed from it)."""
        theirs = set(other.terms())
        return tuple(t for t in self.terms() if t not in theirs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (the enums as their strings)."""
        d = asdict(self)
        for k in ("context_policy", "flash_attn", "type_k", "type_v"):
            d[k] = getattr(self, k).value
        d["speculation"] = self.speculation.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> LoadSettings:
        """Build from stored values: a value of the wrong type reads as the field's default,
        an unknown context policy as ``STOP``, an unknown flash attention value as ``OFF``, an
        unknown cache type as ``f16``, a missing field (settings saved by an older Glassbox)
        as its default; n_ctx, n_batch and n_threads are clamped (0..2^20, 16..8192, 0..512);
        ``rpc_servers`` keeps the entries that are ``host:port``."""
        if not data:
            return cls()
        base = cls()
        out: dict[str, Any] = {}
        parsers: dict[str, Any] = {
            "context_policy": ContextPolicy.parse,
            "flash_attn": FlashAttention.parse,
            "type_k": KVCacheType.parse,
            "type_v": KVCacheType.parse,
        }
        for k, default in asdict(base).items():
            v = data.get(k, default)
            if k in parsers:
                out[k] = parsers[k](v)
                continue
            if k == "rpc_servers":
                out[k] = _stored_servers(v)
                continue
            if k == "speculation":
                out[k] = SpeculationSettings.from_dict(data.get(k))
                continue
            try:
                out[k] = type(default)(v)
            except (TypeError, ValueError):
                out[k] = default
        out["n_ctx"] = max(0, min(out["n_ctx"], 1 << 20))
        out["n_batch"] = max(16, min(out["n_batch"], 8192))
        out["n_threads"] = max(0, min(out["n_threads"], 512))
        return cls(**out)


def _stored_servers(value: object) -> tuple[str, ...]:
    """``rpc_servers`` from stored values: a list (or one text) of ``host:port``; others are dropped."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list | tuple) else []
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        try:
            out.extend(s for s in parse_servers(item) if s not in out)
        except RpcError:
            continue
    return tuple(out)

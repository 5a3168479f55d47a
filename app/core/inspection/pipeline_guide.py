"""Help → How it works: the pipeline walked in order, with the loaded model's own figures.

:func:`pipeline_guide` returns the sections (text → tokens → embeddings → RoPE → blocks →
output head → logits → sampling → decode loop → KV cache → quantization → context window →
what a local app does not do → training), each a short explanation in the field's terms,
the loaded model's figures and the :class:`LiveView` s where Glassbox shows it live.

Every figure comes from the loaded model: its GGUF header (:class:`~app.core.gguf.gguf_facts.GGUFInfo`
through :func:`~app.core.gguf.architecture.describe_architecture`, the source of the Model
panel's drawing) and the :class:`~app.core.protocol.ModelLoaded` event (n_ctx, n_batch, KV
cache types and bytes of the loaded settings). Nothing about a model is typed in here;
without a model (or for a server's model, whose file is not here) a section's figures say so.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from app.core.gguf.architecture import Architecture, Positions, attention_label, describe_architecture
from app.core.gguf.gguf_facts import GGUFInfo, format_bytes, format_count
from app.core.protocol import ModelLoaded
from app.core.sampling.params import SamplerSettings

NO_MODEL = "Load a model to see its figures."
NO_FILE = "This model runs on a server: its file, and so its figures, are not on this machine."
# ``general.*`` keys about the file's layout, not the model's origin (listed under quantization).
_LAYOUT_KEYS = frozenset(
    {"general.architecture", "general.alignment", "general.file_type", "general.quantization_version"}
)


class LiveView(str, enum.Enum):
    """A place in the window that shows part of the pipeline live (a guide link's target)."""

    TOKENS = "tokens"
    STATS = "stats"
    TIMELINE = "timeline"
    FUNNEL = "funnel"
    SAMPLER = "sampler"
    MODEL = "model"
    INSPECT = "inspect"
    MODELS_PAGE = "models"
    SERVER = "server"


LIVE_LABELS: dict[LiveView, str] = {
    LiveView.TOKENS: "Tokens panel",
    LiveView.STATS: "Stats panel",
    LiveView.TIMELINE: "Timeline panel",
    LiveView.FUNNEL: "Funnel panel",
    LiveView.SAMPLER: "Sampler panel",
    LiveView.MODEL: "Model panel",
    LiveView.INSPECT: "Inspect a token",
    LiveView.MODELS_PAGE: "Models page",
    LiveView.SERVER: "Server panel",
}


@dataclass(frozen=True)
class GuideSection:
    """One step of the pipeline.

    Attributes:
        key: a stable anchor name (``"rope"``).
        title: the heading.
        text: what happens there, two to four sentences.
        figures: ``(label, value)`` rows of the loaded model; with no model one row saying so.
        live: where Glassbox shows it live, in the order the links are shown.
    """

    key: str
    title: str
    text: str
    figures: tuple[tuple[str, str], ...]
    live: tuple[LiveView, ...]


Rows = tuple[tuple[str, str], ...]

# ``tokenizer.ggml.model`` → the kind of tokenizer llama.cpp builds from it (src/llama-vocab.cpp, ``load``).
TOKENIZER_KINDS = {
    "llama": "SentencePiece (SPM)",
    "gpt2": "byte-level BPE",
    "gemma4": "byte-level BPE",
    "bert": "WordPiece (WPM)",
    "t5": "Unigram (UGM)",
    "rwkv": "RWKV greedy",
    "plamo2": "PLaMo-2",
}


def number(x: float) -> str:
    """``x`` with thousands separators, whole numbers without a fraction (1,000,000; 0.5)."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,g}"


def _threads(n: int) -> str:
    return f"{n} thread" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class _Model:
    loaded: ModelLoaded
    info: GGUFInfo
    arch: Architecture | None


def _heads(n_head: int, n_head_kv: int) -> str:
    """The heads line, named as the Model panel names them (:func:`app.core.gguf.architecture.attention_label`)."""
    shared = "share 1 K/V head" if n_head_kv == 1 else f"{n_head_kv} K/V heads"
    return f"{n_head} query heads, {shared}: {attention_label(n_head, n_head_kv)}"


def _norm_kind(arch: Architecture) -> str:
    """RMSNorm or LayerNorm, from the block's norm tensors (a LayerNorm has a bias), and where they sit."""
    names = {t.name for b in arch.blocks[:1] for t in b.tensors}
    kind = "LayerNorm (weight and bias)" if "attn_norm.bias" in names else "RMSNorm (a weight, no bias)"
    post = sorted(n.removesuffix(".weight") for n in names if n.startswith("post_") and n.endswith("norm.weight"))
    where = "before attention and before the FFN (pre-norm)"
    if post:
        where += f", and after them too ({', '.join(post)})"
    return f"{kind}, {where}"


def _ffn_share(arch: Architecture) -> float:
    ffn = sum(t.n_elements for b in arch.blocks for t in b.tensors if t.name.startswith("ffn_"))
    return ffn / arch.n_params if arch.n_params else 0.0


_NO_ROPE = {
    Positions.ALIBI: "ALiBi: no rotation; each attention score gets a penalty that grows with the distance "
    "between the two tokens (a slope per head)",
    Positions.LEARNED: "learned: a position_embd table [n_ctx_train, n_embd] is added to each token's embedding "
    "(no RoPE)",
    Positions.NONE: "none in attention: this architecture keeps order in a recurrent state (no RoPE)",
}


def _rope(m: _Model) -> Rows:
    arch = m.arch
    if arch is None:
        return (("figures", NO_FILE),)
    if arch.positions is not Positions.ROPE:  # llama.cpp gives this architecture no RoPE
        return (
            ("encoding", _NO_ROPE[arch.positions]),
            ("trained context", f"{arch.context_length:,} tokens" if arch.context_length else "not stated"),
        )
    att = arch.blocks[0].attention
    head_dim = att.head_dim_k
    dims = arch.rope_dims or head_dim
    bases = sorted({(b.attention.rope_base, b.attention.is_swa, b.attention.rope_base_from_file) for b in arch.blocks})
    if len({rb for rb, _, _ in bases}) == 1:
        base = number(bases[0][0])
    else:
        base = " · ".join(
            f"{number(rb)} ({'sliding-window' if swa else 'global'} layers{'' if own else ', llama.cpp default'})"
            for rb, swa, own in bases
        )
    return (
        ("rotated", f"{dims} of the {head_dim} dimensions of each Q and K head, in {dims // 2} pairs"),
        ("base", base),
        ("scaling", arch.rope_scaling),
        ("trained context", f"{arch.context_length:,} tokens" if arch.context_length else "not stated"),
    )


def _attention(m: _Model) -> Rows:
    arch = m.arch
    if arch is None:
        return (("figures", NO_FILE),)
    att = arch.blocks[0].attention
    rows = [
        ("heads", _heads(att.n_head, att.n_head_kv)),
        ("head_dim", f"{att.head_dim_k} (K) · {att.head_dim_v} (V)"),
    ]
    n_swa = arch.n_swa_layers
    if n_swa:
        window = next(b.attention.sliding_window for b in arch.blocks if b.attention.is_swa)
        rest = arch.n_layer - n_swa
        others = f"; the other {rest} see the whole context" if rest else ""
        rows.append(("sliding window", f"{n_swa} of {arch.n_layer} layers see the last {window:,} tokens{others}"))
    else:
        rows.append(("sliding window", f"none: all {arch.n_layer} layers see the whole context"))
    if arch.attn_logit_softcap:
        rows.append(("score softcap", number(arch.attn_logit_softcap)))
    return tuple(rows)


def _ffn(m: _Model) -> Rows:
    arch = m.arch
    if arch is None:
        return (("figures", NO_FILE),)
    f = arch.blocks[0].ffn
    rows: list[tuple[str, str]] = []
    if arch.is_moe:
        moe = next(b.ffn for b in arch.blocks if b.ffn.is_moe)
        rows.append(("experts", f"{moe.n_expert} per layer, {moe.n_expert_used} used per token"))
        if moe.n_ff_expert:
            rows.append(("n_ff per expert", f"{moe.n_ff_expert:,}"))
        if moe.n_expert_shared:
            rows.append(("shared experts", f"{moe.n_expert_shared}"))
    else:
        rows.append(("n_ff", f"{f.n_ff:,} (n_embd {arch.n_embd:,} × {f.n_ff / arch.n_embd:.2f})"))
    gated = f"gated: ffn_gate and ffn_up, multiplied, then ffn_down ({f.name})"
    rows.append(("shape", gated if f.gated else "ffn_up, activation, ffn_down (not gated)"))
    rows.append(("share of parameters", f"{100 * _ffn_share(arch):.0f}% of the model's are FFN weights"))
    return tuple(rows)


def _tokenizer(model: str) -> str:
    if not model:
        return "not stated"
    kind = TOKENIZER_KINDS.get(model)
    return f"{kind} · tokenizer.ggml.model = {model}" if kind else model


def _general(info: GGUFInfo) -> Rows:
    rows = []
    for k, v in info.metadata.items():
        if not k.startswith("general.") or k in _LAYOUT_KEYS:
            continue
        value = ", ".join(str(x) for x in v) if isinstance(v, list) else str(v)
        rows.append((k.removeprefix("general."), value))
    for k, n in info.array_lengths.items():
        if k.startswith("general.") and k not in info.metadata:
            rows.append((k.removeprefix("general."), f"{n:,} entries"))
    return tuple(rows) or (("general.*", "the file says nothing about its origin"),)


def _figures(m: _Model | None, fn: Callable[[_Model], Rows]) -> Rows:
    if m is None:
        return (("figures", NO_MODEL),)
    return fn(m)


def pipeline_guide(loaded: ModelLoaded | None, sampler: SamplerSettings) -> tuple[GuideSection, ...]:
    """The guide's sections, in pipeline order, with ``loaded``'s figures.

    Args:
        loaded: the loaded model's event (None: no model; figures say "load a model").
        sampler: the sampler settings in effect (the chain shown in the sampling section).

    Returns:
        The sections, first to last; each has at least one figure row and one live view.
    """
    m: _Model | None = None
    if loaded is not None:
        arch: Architecture | None
        try:
            arch = describe_architecture(loaded.info) if loaded.remote is None else None
        except ValueError:  # not a transformer llama.cpp describes with blocks
            arch = None
        m = _Model(loaded, loaded.info, arch)

    def arch_rows(fn: Callable[[Architecture], Rows]) -> Callable[[_Model], Rows]:
        return lambda mm: fn(mm.arch) if mm.arch is not None else (("figures", NO_FILE),)

    def tokens(mm: _Model) -> Rows:
        i, ld = mm.info, mm.loaded
        return (
            ("tokenizer", _tokenizer(str(i.metadata.get("tokenizer.ggml.model", "")))),
            ("vocabulary", f"{i.n_vocab:,} tokens" if i.n_vocab else "not stated"),
            ("BOS / EOS", f"{ld.bos_text or '—'} / {ld.eos_text or '—'}"),
            ("chat template", "from the GGUF" if ld.chat_template else "none: a plain User:/Assistant: transcript"),
        )

    def embeddings(mm: _Model) -> Rows:
        e = mm.arch.embedding if mm.arch else None
        if e is None:
            return (("figures", NO_FILE),)
        return (
            ("table", f"[n_vocab {e.n_vocab:,}, n_embd {e.n_embd:,}]: {format_count(e.n_params)} values"),
            ("stored as", f"{e.type_name} · {format_bytes(e.n_bytes)} · {format_bytes(e.row_bytes)} a row"),
        )

    def blocks(a: Architecture) -> Rows:
        return (
            ("blocks", f"{a.n_layer} (n_layer)"),
            ("residual stream", f"{a.n_embd:,} values per position (n_embd)"),
            ("norm", _norm_kind(a)),
            ("parameters", f"{format_count(a.block_params)} in the blocks of {format_count(a.n_params)} in all"),
        )

    def head(a: Architecture) -> Rows:
        h = a.head
        rows = [
            ("output norm", h.norm_type or "none in the file"),
            ("LM head", f"tied: reuses token_embd ({h.type_name})" if h.tied else f"its own matrix, {h.type_name}"),
            ("logits", f"{a.embedding.n_vocab:,} per position (one per vocabulary token)" if a.embedding else "—"),
        ]
        if h.final_logit_softcap:
            rows.append(("logit softcap", number(h.final_logit_softcap)))
        return tuple(rows)

    def decode(mm: _Model) -> Rows:
        ld = mm.loaded
        if ld.remote is not None:  # the server's batches and threads are not reported
            return (("figures", NO_FILE),)
        return (
            ("prefill", f"up to n_batch {ld.n_batch:,} tokens per llama_decode, {_threads(ld.n_threads_batch)}"),
            ("decode", f"1 token per step, {_threads(ld.n_threads)}"),
            ("weights read per token", f"about {format_bytes(mm.info.tensor_bytes)} (every tensor once)"),
        )

    def kv(mm: _Model) -> Rows:
        ld = mm.loaded
        if ld.remote is not None:
            return (("figures", NO_FILE),)
        rows = [
            ("types", f"K {ld.kv_layout.type_k} · V {ld.kv_layout.type_v}"),
            ("size at n_ctx", f"{format_bytes(ld.kv_allocated_bytes)} for {ld.n_ctx:,} tokens"),
        ]
        a = mm.arch
        if a is not None:
            per = sum(b.attention.n_head_kv * (b.attention.head_dim_k + b.attention.head_dim_v) for b in a.blocks)
            rows.append(("values per token", f"{per:,} (K and V of every KV head in {a.n_layer} layers)"))
        return tuple(rows)

    def quant(mm: _Model) -> Rows:
        i = mm.info
        if not i.tensors:
            return (("figures", NO_FILE),)
        types = ", ".join(f"{k} ×{v[0]} ({format_bytes(v[1])})" for k, v in i.tensor_types.items())
        return (
            ("file type", f"{i.quant_type} · {i.bits_per_weight:.2f} bits per weight on average"),
            ("tensor types", types),
            ("weights", format_bytes(i.tensor_bytes)),
        )

    def context(mm: _Model) -> Rows:
        i, ld = mm.info, mm.loaded
        trained = f"{i.context_length:,} tokens" if i.context_length else "not stated"
        return (("n_ctx (loaded)", f"{ld.n_ctx:,} tokens" if ld.n_ctx else "not reported"), ("trained", trained))

    def sampling(mm: _Model) -> Rows:
        return (("logits per step", f"{mm.info.n_vocab:,}"),)

    chain = " → ".join(s.value for s in sampler.order if sampler.stage_on(s))
    draw = "always the most likely (greedy, temperature 0)" if sampler.is_greedy else "a random draw (dist)"
    chain_rows = (("chain now", f"logit bias → {chain} → {draw}"),)

    s: list[GuideSection] = [
        GuideSection(
            "tokens",
            "1. Text → tokens",
            "A tokenizer cuts text into pieces from a fixed vocabulary and gives each an id. The chat template "
            "wraps every message in special tokens (BOS at the start, an end-of-turn token after each message). "
            "Other scripts cost more: '你好' can take several tokens where 'hello' takes one — type both and count.",
            _figures(m, tokens),
            (LiveView.TOKENS,),
        ),
        GuideSection(
            "embeddings",
            "2. Token ids → embeddings",
            "Each id picks one row of the embedding table [n_vocab, n_embd]: the token's first vector. From here "
            "the model works on vectors only; tokens used alike end up near each other.",
            _figures(m, embeddings),
            (LiveView.MODEL, LiveView.INSPECT),
        ),
        GuideSection(
            "rope",
            "3. Positions: RoPE (or ALiBi, learned positions)",
            "Attention by itself ignores order. RoPE rotates each query and key, pair of dimensions by pair, by an "
            "angle proportional to the token's position (each pair at its own speed, set by the base), so Q·K "
            "depends on how far apart two tokens are. Scaling (linear, YaRN, NTK-aware) stretches the angles past "
            "the trained context. Older models add a learned position table (GPT-2) or bias the attention scores "
            "by distance (ALiBi: BLOOM, MPT). The figures say which this model uses.",
            _figures(m, _rope),
            (LiveView.MODEL,),
        ),
        GuideSection(
            "blocks",
            "4. N blocks and the residual stream",
            "Each position's vector flows down the residual stream through N blocks. A block adds to it, never "
            "replaces it: x = x + attention(norm(x)), then x = x + FFN(norm(x)) — the norm comes first (pre-norm). "
            "Inspect's logit lens reads the stream after every block.",
            _figures(m, arch_rows(blocks)),
            (LiveView.MODEL, LiveView.INSPECT),
        ),
        GuideSection(
            "attention",
            "5. Attention: Q, K, V and heads",
            "Each token makes a query; every token up to it (the causal mask hides later ones) offers a key and a "
            "value. softmax(Q·K/√head_dim) weighs the values. Heads do this in parallel; groups of query heads may "
            "share one K/V head (GQA; one for all: MQA). A sliding-window layer looks back a fixed number of tokens.",
            _figures(m, _attention),
            (LiveView.INSPECT, LiveView.MODEL),
        ),
        GuideSection(
            "ffn",
            "6. Feed-forward, or experts",
            "Then each position, alone, goes through a feed-forward network: most of the weights live here. In a "
            "mixture-of-experts model a router picks a few expert FFNs per token; all of them stay in memory.",
            _figures(m, _ffn),
            (LiveView.MODEL, LiveView.INSPECT),
        ),
        GuideSection(
            "head",
            "7. Output norm → LM head → logits",
            "The last vector goes through a final norm and the LM head, an [n_embd, n_vocab] matrix: one logit, "
            "an unnormalised score, per vocabulary token. A tied head reuses the embedding table.",
            _figures(m, arch_rows(head)),
            (LiveView.INSPECT, LiveView.FUNNEL),
        ),
        GuideSection(
            "sampling",
            "8. Logits → the next token (sampling)",
            "Softmax turns logits into probabilities. The sampler chain cuts (top-k, top-p, min-p) and reshapes "
            "(penalties, temperature) them, then draws one token. The Funnel shows each stage for any step.",
            _figures(m, sampling) + chain_rows,
            (LiveView.SAMPLER, LiveView.FUNNEL),
        ),
        GuideSection(
            "decode",
            "9. Prefill, TTFT and the decode loop",
            "Prefill evaluates the whole prompt at once, in batches (compute-bound); the first token comes after "
            "it: the time to first token (TTFT). Decode then makes one token per step, each step reading every "
            "weight and the KV cache (memory-bound), until an end-of-generation token or the limit.",
            _figures(m, decode),
            (LiveView.TIMELINE, LiveView.STATS),
        ),
        GuideSection(
            "kv",
            "10. The KV cache",
            "The keys and values of every evaluated token are kept, so decode never recomputes them. Its bytes "
            "grow with n_ctx: 2 × layers × K/V heads × head_dim × n_ctx × bytes per value (fewer with GQA, "
            "quantized cache types or sliding windows). A chat's earlier turns stay cached: only new tokens are "
            "prefilled.",
            _figures(m, kv),
            (LiveView.STATS, LiveView.TOKENS),
        ),
        GuideSection(
            "quant",
            "11. Quantization",
            "Weights are stored in fewer bits than they were trained in: blocks of 32 or 256 values share a scale "
            "(Q8_0, Q4_K…). Fewer bits: less memory and faster decode, for some quality.",
            _figures(m, quant),
            (LiveView.MODEL, LiveView.MODELS_PAGE),
        ),
        GuideSection(
            "context",
            "12. The context window",
            "n_ctx is how many tokens fit: system prompt, the whole chat and the reply. Past the trained context "
            "quality falls. Inside it, models use facts from the middle of a long context less reliably than those "
            "at the start or the end ('lost in the middle'): put what matters first or last.",
            _figures(m, context),
            (LiveView.STATS, LiveView.MODEL),
        ),
        GuideSection(
            "serving",
            "13. What a local single-user app does not do",
            "Servers for many users batch requests continuously (new requests join a running batch), page the KV "
            "cache in blocks (PagedAttention), share cached prefixes across users and decode speculatively (a "
            "small draft model proposes tokens, the large one checks them at once). Glassbox's local API batches "
            "continuously as llama-server's --parallel does: up to N requests are sequences of a second context, "
            "one token each per llama_decode, a new one joining at the next step (the Server panel shows them). "
            "It does not page the KV cache (each sequence has its own n_ctx cells) nor share prefixes between "
            "requests; your own chat is one reply at a time on its own KV cache, reused between turns.",
            (("here", "your chat: one sequence, one KV cache; the local API: up to N sequences decoded together"),),
            (LiveView.SERVER, LiveView.TOKENS),
        ),
        GuideSection(
            "training",
            "14. Where the weights came from",
            "Pre-training, next-token prediction over trillions of tokens, set every weight. Post-training makes "
            "the completer an assistant: SFT on (prompt, ideal answer) pairs, then preferences, with RLHF (a reward "
            "model, then PPO) or DPO (directly on chosen / rejected pairs). A base model has had only the first. "
            "What this file says about itself:",
            _figures(m, lambda mm: _general(mm.info)),
            (LiveView.MODELS_PAGE, LiveView.MODEL),
        ),
    ]
    return tuple(s)


__all__ = ["LIVE_LABELS", "NO_FILE", "NO_MODEL", "GuideSection", "LiveView", "pipeline_guide"]

"""How the window writes a reply's figures: one place, one set of units.

- TTFT: milliseconds below one second (``340 ms``), seconds above (``1.25 s``).
- Speeds: tokens per second with one decimal (``41.7 tok/s``).
- Token counts: thousands separators (``12,345``).

Used by the reply footer and the Details tooltip under each reply, and by the Stats panel.
"""

from __future__ import annotations

from pathlib import Path

from app.core.chat.chat_settings import typed_stop_string
from app.core.chat.context import ContextPolicy, GenerationStats, StopReason
from app.core.constraint.model import ConstraintKind
from app.core.conversations import MessageMeta
from app.core.sampling.params import order_text
from app.ui.speculative.figures import detail_lines, footer_part

#: A reply's output format in its Details.
FORMAT_NAMES = {
    ConstraintKind.JSON: "JSON",
    ConstraintKind.JSON_SCHEMA: "a JSON schema",
    ConstraintKind.GBNF: "a GBNF grammar",
}

__all__ = ["reply_details", "reply_footer", "seconds", "stats_footer", "tok_s", "tokens", "ttft"]


def ttft(seconds_: float) -> str:
    """Time to first token: ``340 ms`` below one second, ``1.25 s`` from one second on."""
    if seconds_ < 1.0:
        return f"{seconds_ * 1000:,.0f} ms"
    return f"{seconds_:,.2f} s"


def tok_s(rate: float) -> str:
    """A speed in tokens per second: ``41.7 tok/s``."""
    return f"{rate:,.1f} tok/s"


def tokens(n: int) -> str:
    """A token count with thousands separators: ``12,345``."""
    return f"{n:,}"


def seconds(s: float) -> str:
    """A duration measured by the engine: ``0.42 s``."""
    return f"{s:,.2f} s"


def reply_footer(stats: GenerationStats) -> str:
    """The line under a reply: tokens, decode speed, TTFT, prefill, reuse, seed, why it ended."""
    parts = [f"{tokens(stats.generated_tokens)} tokens"]
    if stats.decode_tok_s:
        parts.append(tok_s(stats.decode_tok_s))
    if stats.generated_tokens:
        parts.append(f"TTFT {ttft(stats.ttft_s)}")
    if stats.evaluated_tokens:
        parts.append(f"prefill {tokens(stats.evaluated_tokens)} tok @ {tok_s(stats.prefill_tok_s)}")
    if stats.cached_tokens:
        parts.append(f"{tokens(stats.cached_tokens)} reused")
    if stats.speculation is not None:
        parts.append(footer_part(stats.speculation))
    parts.append(f"seed {stats.seed}")
    parts.append(StopReason(stats.stop_reason).label)
    return " · ".join(parts)


def stats_footer(meta: MessageMeta) -> str:
    """The line under a stored reply, saying what its figures cover: an edited reply's are the
    generated original's; a continued reply's whole length comes first, then its last part's
    figures. Empty when the reply has no stats."""
    st = meta.stats
    if st is None:
        return ""
    line = reply_footer(st)
    if meta.earlier_tokens:
        whole = meta.earlier_tokens + st.generated_tokens
        line = (
            f"continued: {tokens(whole)} tokens in all ({tokens(meta.earlier_tokens)} before Continue) · "
            f"last part: {line}"
        )
    if meta.edited:
        line = f"edited · figures of the generated original: {line}"
    return line


def reply_details(meta: MessageMeta) -> str:
    """The Details tooltip of a reply (lines): model, quant, load, sampler, seed, stop strings, output format,
    tokens, speeds, engine.

    Empty when the reply has no record of how it was made.
    """
    if not meta.model_path and meta.sampler is None:
        return ""
    lines = []
    if meta.model_path:
        lines.append(f"model: {Path(meta.model_path).name} ({meta.quant})")
    if meta.load is not None:
        policy = ContextPolicy(meta.load.context_policy).value
        lines.append(f"n_ctx {tokens(meta.load.n_ctx)} · context policy {policy}")
    s = meta.reproduction_sampler()
    if s is not None:
        lines.append(
            f"temperature {s.temperature} · top_k {s.top_k} · top_p {s.top_p} · min_p {s.min_p} · "
            f"typical_p {s.typical_p} · repeat_penalty {s.repeat_penalty} (last {s.repeat_last_n}) · "
            f"presence {s.presence_penalty} · frequency {s.frequency_penalty} · max_tokens {s.max_tokens}"
        )
        lines.append(f"sampler order: {', '.join(st.value for st in s.order)} (chain as it ran: {order_text(s)})")
        lines.append(f"seed {s.seed if s.seed is not None else 'random'}")
    if meta.stop_strings:
        lines.append("stop strings: " + ", ".join(f"“{typed_stop_string(x)}”" for x in meta.stop_strings))
    if meta.constraint.kind != ConstraintKind.NONE:
        lines.append(
            f"output format: {FORMAT_NAMES[meta.constraint.kind]} (llama.cpp's grammar sampler, first in the chain)"
        )
    st = meta.stats
    if st is not None:
        lines.append(
            f"prompt {tokens(st.prompt_tokens)} tokens ({tokens(st.cached_tokens)} reused) · "
            f"generated {tokens(st.generated_tokens)}"
        )
        lines.append(f"TTFT {ttft(st.ttft_s)} · prefill {tok_s(st.prefill_tok_s)} · decode {tok_s(st.decode_tok_s)}")
        if st.speculation is not None:
            lines.extend(detail_lines(st.speculation, st.decode_tok_s))
    if meta.chat_template is not None:
        lines.append("chat template: your override for this model (not the GGUF's)")
    if meta.engine:
        lines.append(meta.engine)
    return "\n".join(lines)

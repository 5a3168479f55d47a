"""A speculated reply's figures in words and numbers, for the reply's footer and Details, its token
marks and the Speculation view (plain Python, no Qt: tested without a window).

The counts are the engine's (:class:`~app.core.speculative.stats.SpeculationStats`); this module only
reads them:

- acceptance by draft position: position ``i`` (1-based) was accepted in ``accepted_at[i-1]`` of the
  ``drafted_at[i-1]`` rounds that drafted it (a position is reached only when every one before it was
  accepted, so the rates are conditional and the bars fall);
- why rounds stopped: ``round_ends`` (:class:`~app.core.speculative.stats.RoundEnd`);
- the time split: ``draft_s``, ``verify_s``, ``sample_s`` (engine seconds);
- the roofline: decode reads every weight once per llama_decode call (app/core/hardware/speed_bound.py),
  so the plain loop reads ``decode_weight_bytes`` per token and the speculated one the model's
  ``weight_bytes_per_token`` (weights x verify batches / tokens generated) plus the draft model's
  ``draft_weight_bytes_per_token`` (its weights x its llama_decode calls / tokens generated); at a
  measured memory bandwidth B (bytes/s) each bounds decode at B / bytes per token (KV cache reads left out).
"""

from __future__ import annotations

import statistics
import unicodedata
from dataclasses import dataclass

from app.core.gguf.gguf_info import format_bytes
from app.core.speculative.settings import Drafter, SpeculationSettings
from app.core.speculative.stats import RoundEnd, SpeculationStats
from app.ui.common.pieces import visible_piece

ROUND_END_WORDS: dict[RoundEnd, str] = {
    RoundEnd.MISMATCH: "mismatch",
    RoundEnd.P_MIN: "below p_min",
    RoundEnd.DRAFT_MAX: "all accepted",
    RoundEnd.NO_DRAFT: "no draft",
    RoundEnd.STOPPED: "reply ended",
    RoundEnd.SKIPPED: "did not pay",
}
ROUND_END_MEANING: dict[RoundEnd, str] = {
    RoundEnd.MISMATCH: "the model's own sampler chose another token at a drafted position",
    RoundEnd.P_MIN: "the draft model's confidence fell below p_min, so it stopped drafting",
    RoundEnd.DRAFT_MAX: "every drafted token accepted (draft_max of them, or the length that pays here)",
    RoundEnd.NO_DRAFT: "the drafter proposed nothing (prompt lookup found no n-gram match): a plain decode step",
    RoundEnd.STOPPED: "the reply ended inside the round (end of turn, a stop string, max_tokens, Stop)",
    RoundEnd.SKIPPED: (
        "a draft was at hand, but at the acceptance measured so far and what a longer verification costs on this "
        "machine, drafting would not pay: a plain decode step"
    ),
}


#: Unicode categories drawn as their code point in a drafted text: controls, format characters (zero-width
#: ones, bidi marks), line and paragraph separators, spaces other than " ".
_UNSEEN = {"Cc", "Cf", "Zl", "Zp", "Zs"}


def visible_draft(text: str) -> str:
    """A drafted text as the token view shows a token (· space, ⏎ newline, → tab, ∅ empty:
    :func:`~app.ui.common.pieces.visible_piece`), every other invisible character as its code point
    (``⟨U+200B⟩``), so a hover shows what was proposed, newlines included."""
    return "".join(
        f"⟨U+{ord(c):04X}⟩" if unicodedata.category(c) in _UNSEEN and c not in " \n\t" else c
        for c in visible_piece(text)
    )


def pct(x: float) -> str:
    """A share 0..1 as a whole percentage: ``77%``."""
    return f"{100.0 * x:.0f}%"


@dataclass(frozen=True)
class DraftMarks:
    """Which tokens of a reply's token view came from an accepted draft, and where a draft was rejected.

    Attributes:
        accepted: steps (0-based tokens of the reply, as the token view counts them) drafted and accepted.
        rejected: ``(step, drafted text)``: at that step the draft proposed this text and the model's own
            sampler chose the token shown instead (the round ended there).
        drafter: which drafter made the drafts.
        first: the first step of the request the counts are of (the steps before it: a continued reply's
            earlier part, a branch's kept tokens, written by an earlier request and not marked).
    """

    accepted: frozenset[int]
    rejected: tuple[tuple[int, str], ...]
    drafter: Drafter
    first: int = 0

    @classmethod
    def of(cls, spec: SpeculationStats, offset: int = 0) -> DraftMarks:
        """The marks of a reply whose last request was speculated with ``spec``; ``offset``: steps of the
        reply before that request (a continued reply's earlier part), added to the engine's indices."""
        return cls(
            frozenset(offset + i for i in spec.accepted_tokens),
            tuple((offset + i, text) for i, text in spec.rejected),
            spec.drafter,
            offset,
        )

    def rejected_at(self, step: int) -> str | None:
        """The drafted text the model replaced at ``step`` (None: no draft was rejected there)."""
        return next((text for i, text in self.rejected if i == step), None)

    def hover(self, step: int) -> str:
        """What the hover of token ``step`` adds (plain text; "" : nothing drafted there)."""
        rejected = self.rejected_at(step)
        if rejected is not None:
            return (
                f"Rejected draft here: the {self.drafter.label} proposed “{visible_draft(rejected)}”; the model's own sampler "
                "chose this token instead, so the round ended."
            )
        if step in self.accepted:
            return f"Drafted by the {self.drafter.label} and accepted: the model's sampler agreed."
        return ""

    def legend(self, n_steps: int) -> str:
        """The line above the marked tokens: what the marks mean, with the counts."""
        n = sum(1 for i in self.accepted if self.first <= i < n_steps)
        made = max(0, n_steps - self.first)  # the request's tokens: the count the footer and the view give
        of = (
            f"{n:,} of the {made:,} tokens of the last request; the {self.first:,} before it were written by an "
            "earlier request and are not marked"
            if self.first
            else f"{n:,} of {n_steps:,} tokens"
        )
        return (
            f"Underlined: drafted by the {self.drafter.label} and accepted ({of}). "
            f"▾: a rejected draft ({len(self.rejected):,}), hover it for what was proposed."
        )


def last_request_words(before: int) -> str:
    """What the Speculation view adds when the reply's first ``before`` tokens came from an earlier request
    (a continued reply's earlier part, a branch's kept tokens): its figures are the last request's only."""
    return (
        f" · <i>the last request's only: the reply's first {before:,} tokens came from an earlier one (Continue, "
        "a branch), whose drafts are not kept</i>"
    )


def footer_part(spec: SpeculationStats) -> str:
    """The reply footer's part: ``drafts 40/52 accepted (77%)``."""
    return f"drafts {spec.accepted:,}/{spec.drafted:,} accepted ({pct(spec.acceptance_rate)})"


def detail_lines(spec: SpeculationStats, decode_tok_s: float) -> list[str]:
    """The Details lines of a speculated reply."""
    return [
        f"speculative decoding: {spec.drafter.label}, draft_max {spec.draft_max}",
        f"drafted {spec.drafted:,} · accepted {spec.accepted:,} ({pct(spec.acceptance_rate)}) · "
        f"{spec.rounds:,} rounds · {spec.mean_accepted_per_round:.2f} accepted per round · "
        f"decode {decode_tok_s:,.1f} tok/s",
    ]


@dataclass(frozen=True)
class PositionBar:
    """One draft position's acceptance: ``accepted`` of the ``drafted`` rounds that drafted it."""

    position: int  # 1-based
    drafted: int
    accepted: int

    @property
    def rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


def position_bars(spec: SpeculationStats) -> list[PositionBar]:
    """Acceptance by draft position, position 1 first (positions no round drafted are left out)."""
    out = []
    for i, drafted in enumerate(spec.drafted_at):
        if drafted > 0:
            accepted = spec.accepted_at[i] if i < len(spec.accepted_at) else 0
            out.append(PositionBar(i + 1, drafted, accepted))
    return out


def round_end_rows(spec: SpeculationStats) -> list[tuple[RoundEnd, str, int, float]]:
    """Why rounds stopped: ``(end, words, rounds, share of all rounds)`` for every way, in a fixed order."""
    total = sum(n for _e, n in spec.round_ends)
    return [(end, ROUND_END_WORDS[end], spec.ended(end), spec.ended(end) / total if total else 0.0) for end in RoundEnd]


def cost_sentence(spec: SpeculationStats) -> str:
    """What a verification costs here and how long the drafts were, in one or two sentences ("" when
    the engine measured nothing)."""
    measured = [(m, x) for m, x in enumerate(spec.verify_steps, start=1) if m > 1 and x > 0]
    how = (
        f"Drafts of {spec.chosen_mean:.1f} tokens on average, the length that pays here (at most draft_max "
        f"{spec.draft_max})."
        if spec.adaptive
        else f"Drafts of {spec.chosen_mean:.1f} tokens on average (fixed: up to draft_max {spec.draft_max})."
    )
    if not measured:
        return how if spec.drafted else ""
    if len(measured) > 5:  # five sizes, the first and the last among them
        measured = [measured[round(i * (len(measured) - 1) / 4)] for i in range(5)]
    sizes = " / ".join(str(m) for m, _x in measured)
    steps = " / ".join(f"{x:.2f}" for _m, x in measured)
    return f"Verifying {sizes} tokens costs {steps} one-token steps on this machine. {how}"


COST_EXPLAINED = (
    "A round checks its drafted tokens and its own in one llama_decode. Where decode is bound by memory "
    "bandwidth (a GPU, a large model), that costs about one one-token step however long the draft; where it is "
    "bound by arithmetic (a small model on a CPU), each extra token costs a share of a step, and a draft pays "
    "only when enough of it is accepted. Glassbox times every round and drafts the length with the most tokens "
    "per second expected at the acceptance measured so far (Leviathan et al. 2023, section 3.4); Fixed drafts "
    "what the drafter has, up to draft_max, as llama.cpp does."
)


def time_split(spec: SpeculationStats) -> list[tuple[str, float]]:
    """The engine's time, ``(part, seconds)``: drafting, verifying (the model's llama_decode), sampling."""
    return [("draft", spec.draft_s), ("verify", spec.verify_s), ("sample", spec.sample_s)]


@dataclass(frozen=True)
class WeightReads:
    """The roofline's figures: weight bytes decode reads per token, plain and speculated.

    Attributes:
        plain: bytes per token of the plain loop (every weight once per token).
        speculated: the model's bytes per token with speculation (the engine's ``weight_bytes_per_token``).
        bandwidth_b_s: the machine's measured memory bandwidth, bytes/s (0: not measured).
        draft: the draft model's bytes per token (``draft_weight_bytes_per_token``; 0: prompt lookup).
    """

    plain: float
    speculated: float
    bandwidth_b_s: float = 0.0
    draft: float = 0.0

    @property
    def total(self) -> float:
        """Bytes per token with speculation, the model's and the draft model's."""
        return self.speculated + self.draft

    @property
    def saving(self) -> float:
        """plain / total (1.0 when either is unknown); below 1.0: speculation reads more than plain."""
        return self.plain / self.total if self.plain > 0 and self.speculated > 0 else 1.0

    EXPLAINED = (
        "Decode is bound by memory bandwidth: each llama_decode call reads every weight once. The plain loop "
        "calls it once per token; speculation calls it once per round and keeps every accepted token of the "
        "round, so the weights read per token fall as the acceptance rises. A draft model reads its own weights "
        "once per token it drafts (and per batch when it catches up), and those count too. At a bandwidth B, "
        "decode is bound at B / bytes per token (the KV cache's reads left out)."
    )

    def sentence(self) -> str:
        """The figures in one or two short sentences (:attr:`EXPLAINED` says why)."""
        if self.plain <= 0 or self.speculated <= 0:
            return "Not known for this reply."
        parts = (
            f" (model {format_bytes(int(self.speculated))} + draft model {format_bytes(int(self.draft))})"
            if self.draft > 0
            else ""
        )
        if self.saving >= 1.0:
            compared = f"÷{self.saving:.2f}"
        else:
            compared = f"×{1 / self.saving:.2f}: more than plain"
        text = f"{format_bytes(int(self.total))} speculated{parts}, {format_bytes(int(self.plain))} plain ({compared})."
        if self.bandwidth_b_s > 0:
            text += (
                f" At {self.bandwidth_b_s / 1e9:.1f} GB/s: at most {self.bandwidth_b_s / self.total:,.0f} tok/s, "
                f"{self.bandwidth_b_s / self.plain:,.0f} plain."
            )
        return text


@dataclass(frozen=True)
class Speedup:
    """One "Measure speed-up": the same prompt regenerated greedily without and with speculation, in pairs.

    Attributes:
        plain_tok_s / speculated_tok_s: decode speed of each, tok/s (the engine's figures, of the pair
            whose ratio is the median).
        plain_tokens / speculated_tokens: tokens each generated (the first pair).
        parted_at: where the two greedy texts first differ, characters (-1: the same text; the
            verification is exact, so they should be).
        spec: the speculated run's counts (None: the engine did not speculate it).
        ratios: each pair's speculated / plain decode speed (empty: one pair, the ratio of the speeds).
    """

    plain_tok_s: float
    speculated_tok_s: float
    plain_tokens: int
    speculated_tokens: int
    parted_at: int
    spec: SpeculationStats | None = None
    ratios: tuple[float, ...] = ()

    @property
    def ratio(self) -> float:
        """The median of the pairs' speculated / plain decode speeds (the lower middle one of an even count, a
        pair's own ratio; 0.0 when the plain speed is unknown)."""
        if self.ratios:
            return statistics.median_low(self.ratios)
        return self.speculated_tok_s / self.plain_tok_s if self.plain_tok_s > 0 else 0.0

    @property
    def verdict(self) -> str:
        """ "faster" or "slower"; "within noise" when the pairs' ratios lie on both sides of 1.0."""
        if len(self.ratios) > 1 and min(self.ratios) < 1.0 < max(self.ratios):
            return "within noise"
        return "faster" if self.ratio >= 1.0 else "slower"

    def sentence(self) -> str:
        """The result in one line."""
        spread = ""
        if len(self.ratios) > 1:
            spread = f", median of {len(self.ratios)} pairs, range ×{min(self.ratios):.2f}–×{max(self.ratios):.2f}"
        text = (
            f"Speed-up ×{self.ratio:.2f} ({self.verdict}{spread}): {self.speculated_tok_s:,.1f} tok/s speculated "
            f"({self.speculated_tokens:,} tokens), {self.plain_tok_s:,.1f} plain ({self.plain_tokens:,}), greedy"
        )
        if self.spec is not None:
            text += (
                f" · {pct(self.spec.acceptance_rate)} of drafts accepted"
                if self.spec.drafted
                else " · nothing drafted (drafting did not pay)"
            )
        if self.parted_at >= 0:
            text += f" · the two texts part at character {self.parted_at:,}"
        return text

    PARTED = (
        "The verification is exact, so the two greedy texts should be the same. Where they part, llama.cpp's CPU "
        "kernels computed a position in a batch slightly differently from the same position alone (about 0.6 "
        "logit on SmolLM2 Q4_1), which flips a near-tie between two tokens; from there the texts go their ways."
    )


def parted_at(a: str, b: str) -> int:
    """Where texts ``a`` and ``b`` first differ, characters (-1: they are the same)."""
    if a == b:
        return -1
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


WRITING_SPECULATED = (
    "This reply is being written with speculative decoding. Its figures (drafted, accepted, acceptance by "
    "draft position, why rounds stopped, the time split) show here when it ends."
)


def not_speculated_advice(settings: SpeculationSettings | None) -> str:
    """What the Speculation view says for a reply that was not speculated (``settings``: the loaded
    model's speculation settings, None: no model loaded)."""
    if settings is None:
        return "No model loaded. Load one, then turn speculative decoding on in the Model panel's load settings."
    if not settings.enabled:
        return (
            "This reply was not speculated. Turn on “Speculative decoding” in the Model panel's load settings "
            "(prompt lookup needs no second model: it shines when the reply repeats its prompt, as when "
            "editing code), press Apply, then send or regenerate."
        )
    return (
        "This reply was not speculated (it was written before speculation was turned on, or with it off). "
        "Regenerate it, or send a new message, to see its drafts."
    )

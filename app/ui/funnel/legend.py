"""What each label of the Funnel table says, on hover: a stage's column header, a cell, the footer's
rows (``left``, ``H bits``, ``rest %``) and their values (a "49k" count in full); the panel's
"as drawn" / "what-if" line, its token picker; and the table's short figures (:func:`pct`, :func:`count`).

Plain text for :class:`~app.ui.funnel.panel.FunnelView`'s tooltips; the stages' descriptions follow
llama.cpp's samplers (``src/llama-sampling.cpp``) and the settings' names in
:class:`~app.core.sampling.params.SamplerSettings`.
"""

from __future__ import annotations

import enum
import math

from app.core.sampling.funnel import Funnel, FunnelStage, FunnelStageKind
from app.core.sampling.params import SamplerSettings
from app.ui.common.token_label import visible

AS_DRAWN = "as drawn (the reply's own settings)"
UNKNOWN = "?"  # a figure the kept candidates cannot tell (a stored reply's top-N)
WHAT_IF = "what-if: the current settings on this step's logits"
LEGEND = (
    "Rows: tokens; ▶ = the token the reply drew. Columns: the chain's stages in the order shown above "
    "(as drawn: the order llama.cpp ran them for this reply; what-if: the order they would run in now). "
    "A cell is the token's probability after that stage, renormalised over the survivors; × = cut. "
    "The green bar in the draw column: the token a new draw with these settings picks (a fresh random number "
    "from the reply's seed, not the one the reply used at this step), so it can differ from ▶ even as drawn; "
    "the draw's percentages are what counts. "
    "left = tokens surviving, H = entropy in bits, rest = probability outside the rows shown."
)

#: Each stage's column name in the table (and in every tooltip that names a stage).
SHORT: dict[FunnelStageKind, str] = {
    FunnelStageKind.MODEL: "model",
    FunnelStageKind.GRAMMAR: "gram",
    FunnelStageKind.LOGIT_BIAS: "bias",
    FunnelStageKind.PENALTIES: "pen",
    FunnelStageKind.DRY: "DRY",
    FunnelStageKind.TOP_N_SIGMA: "nσ",
    FunnelStageKind.TOP_K: "top_k",
    FunnelStageKind.TYPICAL_P: "typ",
    FunnelStageKind.TOP_P: "top_p",
    FunnelStageKind.MIN_P: "min_p",
    FunnelStageKind.XTC: "XTC",
    FunnelStageKind.TEMPERATURE: "temp",
    FunnelStageKind.MIROSTAT: "miro",
    FunnelStageKind.MIROSTAT_V2: "miro2",
    FunnelStageKind.DIST: "draw",
    FunnelStageKind.GREEDY: "greedy",
}


def pct(p: float) -> str:
    """A probability as a short percentage for a narrow cell: 100, 37, 3.2, <.1."""
    v = 100.0 * p
    if v >= 99.95:
        return "100"
    if v >= 9.95:
        return f"{v:.0f}"
    if v >= 0.05:
        return f"{v:.1f}"
    return "<.1"


def count(n: int) -> str:
    """A survivor count in at most four characters: 40, 1234, 49k, 262k."""
    return str(n) if n < 10_000 else f"{n // 1000}k"


class FooterRow(str, enum.Enum):
    """A row under the candidates: its label is the enum's value."""

    LEFT = "left"
    ENTROPY = "H bits"
    REST = "rest %"


def kept_from(f: Funnel) -> str:
    """Where ``f``'s candidates come from, for a sentence: "the 10 candidates stored with the reply"."""
    return f"the {f.n_logits} candidates " + ("stored with the reply" if f.stored else "kept for this token")


def approximation(f: Funnel) -> str:
    """The mode line of a funnel some of whose columns cannot be known (not :attr:`Funnel.all_known`)."""
    return f"approximation: {kept_from(f)} only; {UNKNOWN} where they cannot tell"


def approximation_help(f: Funnel) -> str:
    """What the approximation line means, on hover."""
    return (
        f"This token kept only {kept_from(f)} (their logits and the log-sum-exp over the vocabulary), not "
        "all its logits. The model column is exact for them. A stage that renormalises or decides from the "
        f"whole distribution cannot be run on them: its column shows {UNKNOWN} until a cut (top_k within "
        "them, min_p, greedy) provably left only them; from there on the figures are the chain's."
    )


def footer_value(row: FooterRow, st: FunnelStage) -> str:
    """A footer cell's short text: survivors (49k), entropy (bits, 1 decimal), mass outside the rows (%);
    :data:`UNKNOWN` where the stage's figures are not known."""
    if (
        not st.known
        or (row is FooterRow.ENTROPY and math.isnan(st.entropy_bits))
        or (row is FooterRow.LEFT and st.survivors < 0)
    ):
        return UNKNOWN
    if row is FooterRow.LEFT:
        return count(st.survivors)
    if row is FooterRow.ENTROPY:
        return f"{st.entropy_bits:.1f}"
    return pct(st.outside) if st.outside > 0 else "0"


FOOTER_HELP: dict[FooterRow, str] = {
    FooterRow.LEFT: (
        "left: how many tokens of the whole vocabulary survive each stage (49k = 49,000 and more; hover a "
        "count for the exact number). A stage that cuts nothing leaves the count as it was."
    ),
    FooterRow.ENTROPY: (
        "H bits: the entropy of the survivors' distribution after each stage, in bits: 0 = one sure token, "
        "1 = like two equally likely tokens, 3 = like eight. High entropy is where sampling settings matter."
    ),
    FooterRow.REST: (
        "rest %: the probability of the survivors that are not among the rows shown (the tail below the "
        "table), after each stage; 0 = the rows shown are every survivor's mass."
    ),
}

STAGE_HELP: dict[FunnelStageKind, str] = {
    FunnelStageKind.MODEL: (
        "model: the raw model's probabilities (the softmax of its logits at temperature 1), before any sampler stage."
    ),
    FunnelStageKind.GRAMMAR: (
        "gram: the chat's output format (JSON, a JSON schema or a GBNF grammar), run by llama.cpp's grammar "
        "sampler first in the chain: every token that cannot continue the reply as the grammar allows is cut "
        "(its state is the reply's tokens before this step). Once the grammar is complete only end-of-"
        "generation tokens are left, so the reply stops."
    ),
    FunnelStageKind.LOGIT_BIAS: (
        "bias: logit bias, before every other stage: each listed token's bias is added to its logit "
        "(ban = minus infinity: the token is cut)."
    ),
    FunnelStageKind.PENALTIES: (
        "pen: the repetition penalties: repeat_penalty divides the logit (multiplies a negative one) of every "
        "token seen in the last repeat_last_n tokens; presence_penalty and frequency_penalty subtract from it "
        "(once, and per occurrence)."
    ),
    FunnelStageKind.DRY: (
        "DRY (don't repeat yourself): lowers a token that would extend a sequence already in the text, the more "
        "the longer the repeat (dry_multiplier x dry_base ^ (length - dry_allowed_length))."
    ),
    FunnelStageKind.TOP_N_SIGMA: (
        "nσ: top-n-sigma: keeps the tokens whose logit is within n standard deviations of the best logit."
    ),
    FunnelStageKind.TOP_K: "top_k: keeps only the k most likely tokens (0 = off).",
    FunnelStageKind.TYPICAL_P: (
        "typ: locally typical sampling: keeps the tokens whose surprise is closest to the entropy, until their "
        "probabilities add up to typical_p (1 = off)."
    ),
    FunnelStageKind.TOP_P: (
        "top_p (nucleus): keeps the smallest set of the most likely tokens whose probabilities add up to top_p "
        "(1 = off)."
    ),
    FunnelStageKind.MIN_P: "min_p: drops every token less likely than min_p x the top token's probability (0 = off).",
    FunnelStageKind.XTC: (
        "XTC (exclude top choices): with chance xtc_probability, removes every token above xtc_threshold except "
        "the least likely of them."
    ),
    FunnelStageKind.TEMPERATURE: (
        "temp: temperature divides the logits by T: above 1 it flattens the survivors' distribution, below 1 it "
        "sharpens it. It cuts nothing."
    ),
    FunnelStageKind.MIROSTAT: (
        "miro: mirostat 1 draws the token, keeping each token's surprise near tau (replaces the truncation stages)."
    ),
    FunnelStageKind.MIROSTAT_V2: (
        "miro2: mirostat 2 draws the token, cutting the tokens more surprising than its running mu (steered toward "
        "tau; replaces the truncation stages)."
    ),
    FunnelStageKind.DIST: (
        "draw: the random draw among the survivors with the reply's seed; the green bar is the token a new draw "
        "with these settings picks (▶ is what the reply drew)."
    ),
    FunnelStageKind.GREEDY: "greedy: temperature 0: always the most likely survivor, no random draw.",
}

AS_DRAWN_HELP = (
    "as drawn: this funnel ran with the settings and stage order the reply was drawn with, so it shows what "
    "llama.cpp did at this token. (The draw column's green bar is a fresh draw: it can differ from ▶.)"
)
WHAT_IF_HELP = (
    "what-if: this funnel runs the Sampler panel's current settings on this token's logits: what they would do "
    'here, not what the reply did. "Use the reply\'s settings" shows it as drawn.'
)
TOKEN_HELP = (
    "The token of the reply shown, counted from 1 over the whole reply (as the Tokens panel and the Timeline "
    "count); type a number or use the arrows to see another token's funnel."
)
UNCERTAIN_HELP = (
    "Jump to the reply's most uncertain token: the step where the model's distribution had the highest entropy "
    '(the Tokens panel\'s "by entropy" colour), where the sampler settings change the most.'
)


def _num(v: float) -> str:
    return f"{v:g}"


def stage_setting(kind: FunnelStageKind, s: SamplerSettings) -> str | None:
    """The setting a stage ran with, as the Sampler panel names it ("top_k = 40"); None when it has none."""
    values: dict[FunnelStageKind, str] = {
        FunnelStageKind.PENALTIES: (
            f"repeat_penalty = {_num(s.repeat_penalty)} over the last {s.repeat_last_n} tokens, "
            f"presence_penalty = {_num(s.presence_penalty)}, frequency_penalty = {_num(s.frequency_penalty)}"
        ),
        FunnelStageKind.DRY: f"dry_multiplier = {_num(s.dry_multiplier)}, dry_base = {_num(s.dry_base)}",
        FunnelStageKind.TOP_N_SIGMA: f"n = {_num(s.top_n_sigma)}",
        FunnelStageKind.TOP_K: f"top_k = {s.top_k}",
        FunnelStageKind.TYPICAL_P: f"typical_p = {_num(s.typical_p)}",
        FunnelStageKind.TOP_P: f"top_p = {_num(s.top_p)}",
        FunnelStageKind.MIN_P: f"min_p = {_num(s.min_p)}",
        FunnelStageKind.XTC: f"xtc_probability = {_num(s.xtc_probability)}, xtc_threshold = {_num(s.xtc_threshold)}",
        FunnelStageKind.TEMPERATURE: f"temperature = {_num(s.temperature)}"
        + (f" ± {_num(s.dynatemp_range)} (dynamic)" if s.dynatemp_range > 0 else ""),
        FunnelStageKind.MIROSTAT: f"tau = {_num(s.mirostat_tau)}, eta = {_num(s.mirostat_eta)}",
        FunnelStageKind.MIROSTAT_V2: f"tau = {_num(s.mirostat_tau)}, eta = {_num(s.mirostat_eta)}",
    }
    return values.get(kind)


def header_tip(f: Funnel, c: int) -> str:
    """Stage column ``c``'s header: what the stage does, the setting it ran with, how many tokens it left."""
    st = f.stages[c]
    setting = stage_setting(st.kind, f.settings)
    lines = [STAGE_HELP[st.kind]]
    if setting is not None:
        lines.append(f"Here: {setting}.")
    if st.known and st.survivors >= 0:
        lines.append(f"{st.survivors:,} tokens left after it.")
    elif st.known:
        lines.append("The vocabulary of the model that wrote the reply (not known here).")
    else:
        lines.append(f"Cannot be known from {kept_from(f)}: it depends on the tokens outside them ({UNKNOWN}).")
    return "\n".join(lines)


def cell_tip(f: Funnel, r: int, c: int) -> str:
    """The cell of row ``r`` (a token) in stage column ``c``: its probability after that stage, or that it was cut."""
    st = f.stages[c]
    tok, text = f.rows[r]
    name = visible(text)
    p = st.probs[r]
    unkept = tok in f.unkept
    drawn = " (the token the reply drew)" if tok == f.drawn else ""
    if unkept and (st.kind is FunnelStageKind.MODEL or not st.known):
        return (
            f"{name} (token id {tok}){drawn}: not among {kept_from(f)}, so nothing is known of it here "
            f"({UNKNOWN}); under the raw model it was less likely than each of them."
        )
    if not st.known:
        return (
            f"{name} (token id {tok}): {SHORT[st.kind]} cannot be known from {kept_from(f)} ({UNKNOWN}): "
            "it depends on the tokens outside them."
        )
    if p <= 0:
        return f"{name} (token id {tok}): cut by {SHORT[st.kind]} (×)."
    where = "under the raw model" if st.kind is FunnelStageKind.MODEL else f"after {SHORT[st.kind]}"
    over = f"the {st.survivors:,} survivors" if st.survivors >= 0 else "the whole vocabulary"
    out = f"{name} (token id {tok}): {100 * p:.2f} % {where}, renormalised over {over}."
    if st.kind.is_draw and tok == f.picked:
        out += " A new draw with these settings picks it (the green bar)."
    return out


def footer_tip(row: FooterRow, st: FunnelStage) -> str:
    """A footer value under ``st``'s column: the exact figure behind the short one."""
    if footer_value(row, st) == UNKNOWN:
        return f"Not known after {SHORT[st.kind]}: the candidates kept for this token cannot tell."
    if row is FooterRow.LEFT:
        return f"{st.survivors:,} tokens left after {SHORT[st.kind]}."
    if row is FooterRow.ENTROPY:
        return f"Entropy after {SHORT[st.kind]}: {st.entropy_bits:.3f} bits (like {2**st.entropy_bits:.1f} equally likely tokens)."
    return f"After {SHORT[st.kind]}, {100 * st.outside:.2f} % of the probability lies outside the rows shown."

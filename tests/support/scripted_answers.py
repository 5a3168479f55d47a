"""The scripted engine's answers that need no state of a reply: prompts rendered and counted, made-up funnels.

Pure functions of a request and the loaded model (:mod:`tests.support.scripted_host` calls them):

- :func:`render`: the prompt rendered with jinja2's sandbox as llama-cpp-python sets it up
  (``chat_template``, else the GGUF's, else a plain transcript); "tokens" are special-token texts and
  words. A template that does not compile or render fails with kind ``template`` naming its line.
- :func:`count`: the fake's tokens of the rendered prompt and of the last message; over n_ctx, fitted
  as the engine fits (ROLLING: the oldest non-system messages dropped until it fits what the reserve
  leaves; else refused).
- :func:`funnel`: the step's 6 fake candidates (logits 10, 9, ...), top_k and temperature applied when
  on, greedy at temperature 0; :func:`stored_funnel`: a stored step's candidates, the model column
  only, and the draw (greedy: the best).
- :func:`sweep_point`, :func:`sweep_refusal`: a depth sweep's made-up figures, and its refusal past n_ctx.
- :func:`check_constraint`: an output format checked as the engine words it: a schema by the same plain
  check, a grammar line by line (each non-empty line outside a comment needs ``::=``; a rule ``root``);
- :func:`speculation`: a speculated reply's made-up counts (rounds accepting 2, 0, then draft_max drafts);
  :func:`draft_info`: the draft model a load reports.
"""

from __future__ import annotations

import collections
import math
import re
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.core import protocol as P
from app.core.chat.chat_template import SAMPLE_CONVERSATION
from app.core.chat.context import ROLLING_RESERVE_FRACTION, ChatMessage, ContextPolicy, LoadSettings, Role
from app.core.constraint.model import ConstraintKind
from app.core.constraint.schema_check import schema_problem
from app.core.depth_sweep.plan import DepthPoint, check_plan
from app.core.sampling.alternatives import StoredStep
from app.core.sampling.funnel import Funnel, FunnelStage, FunnelStageKind
from app.core.sampling.params import SamplerSettings
from app.core.speculative.draft import DraftInfo
from app.core.speculative.settings import Drafter, SpeculationSettings
from app.core.speculative.stats import RoundEnd, SpeculationStats

_SPECIAL = re.compile(r"<[^<>\s]+>")


def prompt_pieces(text: str) -> list[str]:
    """The fake's tokens: special-token texts and words with their leading space."""
    return [p for p in re.split(r"(<[^<>\s]+>|\s*\S+)", text) if p]


def _render_text(
    rid: int, msgs: tuple[ChatMessage, ...], chat_template: str | None, model: P.ModelLoaded
) -> tuple[str, P.TemplateSource] | P.Failed:
    """The prompt text and its format's source, or Failed (kind ``template``)."""
    source_text = chat_template if chat_template is not None else model.chat_template
    if source_text is None:
        text = "".join(f"{m.role.value.title()}: {m.content}\n" for m in msgs) + "Assistant:"
        source = P.TemplateSource.PLAIN
    else:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        try:
            text = env.from_string(source_text).render(
                messages=[{"role": m.role.value, "content": m.content} for m in msgs],
                bos_token=model.bos_text,
                eos_token=model.eos_text,
                add_generation_prompt=True,
            )
        except jinja2.TemplateSyntaxError as exc:
            return P.Failed(
                rid, P.FailureKind.TEMPLATE, f"The chat template does not compile: line {exc.lineno}: {exc.message}"
            )
        except Exception as exc:
            return P.Failed(rid, P.FailureKind.TEMPLATE, f"The chat template does not render: {exc}")
        source = P.TemplateSource.OVERRIDE if chat_template is not None else P.TemplateSource.GGUF
    if not text.strip():
        return P.Failed(rid, P.FailureKind.TEMPLATE, "The chat template renders no text.")
    return text, source


def render(req: P.RenderPrompt, model: P.ModelLoaded) -> P.PromptRendered | P.Failed:
    """The answer to RenderPrompt (see the module docstring); no messages: the sample conversation."""
    sample = not req.messages
    msgs = SAMPLE_CONVERSATION if sample else req.messages
    out = _render_text(req.request_id, msgs, req.chat_template, model)
    if isinstance(out, P.Failed):
        return out
    text, source = out
    source_text = req.chat_template if req.chat_template is not None else model.chat_template
    pieces = tuple(P.PromptPiece(1000 + i, p, bool(_SPECIAL.fullmatch(p))) for i, p in enumerate(prompt_pieces(text)))
    return P.PromptRendered(req.request_id, text, pieces, len(pieces), source, source_text, model.chat_template, sample)


def count(req: P.CountPrompt, model: P.ModelLoaded) -> P.PromptCounted | P.Failed:
    """The answer to CountPrompt (see the module docstring)."""
    out = _render_text(req.request_id, req.messages, req.chat_template, model)
    if isinstance(out, P.Failed):
        return out
    n_ctx = model.n_ctx
    n = len(prompt_pieces(out[0]))
    dropped, fitted = 0, n
    if n >= n_ctx:
        dropped, fitted = -1, 0
        if req.policy is ContextPolicy.ROLLING:
            system = [m for m in req.messages[:1] if m.role is Role.SYSTEM]
            rest = list(req.messages[len(system) :])
            k = 0
            while len(rest) > 1:
                rest, k = rest[1:], k + 1
                kept = _render_text(req.request_id, (*system, *rest), req.chat_template, model)
                size = len(prompt_pieces(kept[0])) if not isinstance(kept, P.Failed) else n_ctx
                if size <= int(n_ctx * (1 - ROLLING_RESERVE_FRACTION)):
                    dropped, fitted = k, size
                    break
    last = prompt_pieces(req.messages[-1].content) if req.messages else []
    return P.PromptCounted(req.request_id, n, len(last), n_ctx, dropped, fitted)


def funnel(
    req: P.ComputeFunnel, kept: tuple[int, SamplerSettings, list[tuple[int, str]]] | None
) -> P.FunnelComputed | P.Failed:
    """A made-up funnel for a step of the reply whose (token, piece) steps were ``kept`` (see the module docstring)."""
    rid, reply_id, step = req.request_id, req.reply_id, req.step
    if kept is None or (reply_id >= 0 and reply_id != kept[0]) or not kept[2] or step >= len(kept[2]):
        return P.Failed(rid, P.FailureKind.NO_LOGITS, "The funnel needs a reply generated with the funnel on.")
    s = req.sampler or kept[1]
    step = step if step >= 0 else len(kept[2]) - 1
    token, piece = kept[2][step]
    row_ids = tuple((token + k, piece if k == 0 else f"alt{k}") for k in range(6))
    logits = [10.0 - k for k in range(6)]

    def column(kind: FunnelStageKind, alive: list[float | None], picked: int = -1) -> FunnelStage:
        finite = [x for x in alive if x is not None]
        z = sum(math.exp(x - finite[0]) for x in finite)
        probs = tuple(0.0 if x is None else math.exp(x - finite[0]) / z for x in alive)
        h = -sum(q * math.log2(q) for q in probs if q > 0)
        return FunnelStage(kind, probs, len(finite), h, 0.0, picked)

    alive: list[float | None] = list(logits)
    stages = [column(FunnelStageKind.MODEL, alive)]
    if s.is_greedy:
        stages.append(FunnelStage(FunnelStageKind.GREEDY, (1.0,) + (0.0,) * 5, 1, 0.0, 0.0, token))
    else:
        if s.top_k > 0:
            alive = [x if i < s.top_k else None for i, x in enumerate(alive)]
            stages.append(column(FunnelStageKind.TOP_K, alive))
        alive = [None if x is None else x / s.temperature for x in alive]
        stages.append(column(FunnelStageKind.TEMPERATURE, alive))
        stages.append(column(FunnelStageKind.DIST, alive, token))
    return P.FunnelComputed(rid, Funnel(kept[0], step, row_ids, tuple(stages), token, s, 0, 6, False, 0.0))


def stored_funnel(st: StoredStep, sampler: SamplerSettings | None) -> Funnel:
    """The funnel of a stored step: its candidates (the model column) and the greedy draw."""
    s = sampler or st.settings
    probs = tuple(math.exp(x - st.logsumexp) for x in st.logits)
    rows = tuple((t, st.texts.get(t, "")) for t in st.ids)
    model = FunnelStage(FunnelStageKind.MODEL, probs, len(st.ids), 1.0, max(0.0, 1 - sum(probs)))
    draw = FunnelStage(FunnelStageKind.GREEDY, (1.0,) + (0.0,) * (len(st.ids) - 1), 1, 0.0, 0.0, st.ids[0])
    return Funnel(st.reply_id, st.step, rows, (model, draw), st.drawn, s, st.seed, len(st.ids), False, 0.0, stored=True)


#: A depth sweep's made-up matmul rates (``DepthSwept.matmul_flop_s``): the prefill's compute roof.
SWEEP_ROOF = (("Q4_1", 40e9), ("Q8_0", 60e9))


def sweep_point(depth: int) -> DepthPoint:
    """A depth sweep's made-up figures: prefill 200 and decode 50 tok/s at depth 0, falling as 1024 / (1024 + depth)."""
    f = 1024 / (1024 + depth)
    return DepthPoint(depth, 200 * f, 2.0, 50 * f, 0.5, fill_s=depth / 1000)


def sweep_refusal(req: P.SweepDepth, model: P.ModelLoaded) -> P.Failed | None:
    """The engine's refusal of a plan that does not fit n_ctx (:func:`app.core.depth_sweep.plan.check_plan`)."""
    why = check_plan(req.depths, req.n_prompt, req.n_gen, req.repetitions, model.n_ctx)
    return P.Failed(req.request_id, P.FailureKind.BAD_SETTINGS, f"The depth sweep cannot run: {why}") if why else None


def speculation(
    n: int, s: SpeculationSettings, pieces: list[str], weights_bytes: int, token_s: float
) -> SpeculationStats:
    """A speculated reply's made-up counts: ``n`` tokens (``pieces``) in rounds that accept 2, 0, then
    ``draft_max`` drafts in turn (each round adds its accepted drafts and the model's own token). A round
    ends MISMATCH (the drafted text ``"~<the model's piece>"`` rejected at the model's token), DRAFT_MAX
    (all accepted), or STOPPED (the reply ended inside it). Times: a verify per round of ``token_s``."""
    accepted_at = [0] * s.draft_max
    drafted_at = [0] * s.draft_max
    ends: collections.Counter[RoundEnd] = collections.Counter()
    accepted_tokens: list[int] = []
    rejected: list[tuple[int, str]] = []
    i = rounds = 0
    while i < n:
        a = min((2, 0, s.draft_max)[rounds % 3], n - i)
        if i + a >= n:
            end = RoundEnd.STOPPED
        elif a == s.draft_max:
            end = RoundEnd.DRAFT_MAX
        else:
            end = RoundEnd.MISMATCH
            rejected.append((i + a, "~" + pieces[i + a]))
        drafted = a if end is not RoundEnd.MISMATCH else a + 1
        for j in range(drafted):
            drafted_at[j] += 1
        for j in range(a):
            accepted_at[j] += 1
        accepted_tokens.extend(range(i, i + a))
        ends[end] += 1
        rounds += 1
        i += a + (0 if end is RoundEnd.STOPPED and i + a >= n else 1)
    return SpeculationStats(
        drafter=s.drafter,
        draft_max=s.draft_max,
        rounds=rounds,
        drafted=sum(drafted_at),
        accepted=len(accepted_tokens),
        accepted_at=tuple(accepted_at),
        drafted_at=tuple(drafted_at),
        round_ends=tuple((e, ends[e]) for e in RoundEnd if ends[e]),
        draft_s=0.0001 * rounds,
        verify_s=token_s * rounds,
        sample_s=0.00005 * n,
        accepted_tokens=tuple(accepted_tokens),
        rejected=tuple(rejected),
        weight_bytes_per_token=weights_bytes * rounds / n if n else 0.0,
    )


def draft_info(settings: LoadSettings, kv_bytes: int) -> DraftInfo | None:
    """The draft model a load with ``settings`` reports (its file's size as its weights, the model's KV cache)."""
    s = settings.speculation
    if not s.enabled or s.drafter is not Drafter.DRAFT_MODEL or not s.draft_model:
        return None
    size = Path(s.draft_model).stat().st_size if Path(s.draft_model).is_file() else 0
    return DraftInfo(s.draft_model, 135_000_000, size, kv_bytes)


def check_constraint(req: P.CheckConstraint) -> P.ConstraintChecked | P.Failed:
    """The answer to CheckConstraint (see the module docstring)."""
    c = req.constraint
    if c.kind == ConstraintKind.NONE:
        return P.ConstraintChecked(req.request_id, "", 0)
    if c.kind == ConstraintKind.JSON:
        return P.ConstraintChecked(req.request_id, 'root ::= object\nobject ::= "{" "}"', 2)
    if c.kind == ConstraintKind.JSON_SCHEMA:
        problem = schema_problem(c.text)
        if problem:
            return P.Failed(req.request_id, P.FailureKind.CONSTRAINT, problem[0].upper() + problem[1:])
        return P.ConstraintChecked(req.request_id, 'root ::= "{" "}"', 1)
    rules = 0
    for i, line in enumerate(c.text.split("\n"), 1):
        text = line.split("#", 1)[0].strip()
        if not text or text.startswith("|"):
            continue
        if "::=" not in text:
            msg = f"The grammar does not parse: line {i}, column 1: expecting ::= (at “{text[:30]}”)."
            return P.Failed(req.request_id, P.FailureKind.CONSTRAINT, msg)
        rules += 1
    if not re.search(r"^\s*root\s*::=", c.text, re.M):
        return P.Failed(req.request_id, P.FailureKind.CONSTRAINT, "The grammar has no rule 'root'.")
    return P.ConstraintChecked(req.request_id, c.text, rules)

"""Answer ComputeFunnel: one step's kept candidates, live or stored, through one :func:`run_funnel` call.

A step's candidates were kept in one of two places:

- **live**: the reply just generated with the funnel on (:class:`~app.engine.funnel_store.ReplyLogits`,
  the loaded model's ``store``): the whole vocabulary while the step is in the ring, else its top-M;
- **stored**: a reply saved with its alternatives (:class:`~app.core.sampling.alternatives.StoredStep`,
  sent with the request): its top-N with their texts (another model may have written them), never exact.

Both become a :class:`KeptStep`; :func:`step_funnel` runs llama.cpp's samplers on it
(:func:`app.engine.funnel.run_funnel`). A reply made under an output constraint gets the grammar
column first: llama.cpp's grammar sampler made from its GBNF and fed the reply's tokens before the
step (not the prompt's), applied to the step's kept candidates.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import llama_cpp
import numpy as np
import numpy.typing as npt

from app.core import protocol as P
from app.core.sampling.alternatives import StoredStep
from app.core.sampling.params import SamplerSettings
from app.engine.constraint.grammar import constraint_gbnf
from app.engine.constraint.sampler import feed, grammar_sampler
from app.engine.errors import EngineError
from app.engine.funnel import run_funnel
from app.engine.funnel_store import ReplyLogits
from app.engine.vocab import Vocab

MAX_ROWS = 50  # the most tokens a funnel shows


@dataclass(frozen=True)
class KeptStep:
    """One step's candidates, wherever they were kept.

    Attributes:
        reply_id: the reply's id for the funnel's title (the Generate request id, or the stored message id).
        step: 0-based token index in the reply.
        ids, logits: the candidates (the whole vocabulary when ``exact``, else the kept top ones).
        logsumexp: log-sum-exp over the whole vocabulary's logits at this step.
        exact: whether ``ids`` is the whole vocabulary.
        drawn: the token the reply drew.
        history: the tokens before the step (prompt, then the reply so far), for penalties and DRY.
        seed: the seed the reply used.
        texts: the candidates' texts when kept with them (a stored reply); None: the vocabulary's.
        gbnf: the reply's output constraint as GBNF (the grammar column); None: none.
        reply_start: where the reply's tokens start in ``history`` (the grammar is fed ``history[reply_start:]``).
        entropy_bits: the raw model's entropy over the whole vocabulary, bits (NaN: not known).
        stored: the candidates are a stored reply's top-N.
        recomputed: a stored reply's step with all its logits computed again (``exact``).
    """

    reply_id: int
    step: int
    ids: npt.NDArray[np.int32]
    logits: npt.NDArray[np.float32]
    logsumexp: float
    exact: bool
    drawn: int
    history: tuple[int, ...]
    seed: int
    texts: dict[int, str] | None = None
    gbnf: str | None = None
    reply_start: int = 0
    entropy_bits: float = math.nan
    stored: bool = False
    recomputed: bool = False


def checked_sampler(asked: SamplerSettings | None, kept: SamplerSettings) -> SamplerSettings:
    """The settings to run: ``asked`` (the funnel panel's), or the reply's own (``kept``) when None.

    Raises:
        EngineError: ``bad_settings`` (a value out of range).
    """
    settings = asked if asked is not None else kept
    try:
        settings.validated()
    except ValueError as exc:
        raise EngineError(P.FailureKind.BAD_SETTINGS, f"The sampler settings cannot be used: {exc}.") from None
    return settings


def live_reply(store: ReplyLogits | None, reply_id: int) -> ReplyLogits:
    """The reply whose logits are kept, when it is the one asked for (``reply_id`` -1: whichever it is).

    Raises:
        EngineError: ``no_logits`` (no reply kept its logits, or another reply's id).
    """
    if store is None or (reply_id >= 0 and reply_id != store.reply_id):
        raise EngineError(
            P.FailureKind.NO_LOGITS,
            "The funnel needs a reply generated with the funnel on; this one's logits were not kept.",
        )
    return store


def live_step(store: ReplyLogits, step: int) -> KeptStep:
    """Step ``step`` (-1: the newest) of the live reply.

    Raises:
        EngineError: ``no_logits`` (the step is not stored).
    """
    step = step if step >= 0 else store.n_steps - 1
    data = store.step(step)
    if data is None:
        raise EngineError(P.FailureKind.NO_LOGITS, f"Token {step + 1} of the reply has no stored logits.")
    return KeptStep(
        reply_id=store.reply_id,
        step=step,
        ids=data.ids,
        logits=data.logits,
        logsumexp=data.logsumexp,
        exact=data.exact,
        drawn=data.drawn,
        history=data.history,
        seed=store.seed,
        gbnf=store.gbnf,
        reply_start=store.reply_start,
        entropy_bits=data.entropy_bits,
    )


def stored_step(stored: StoredStep) -> KeptStep:
    """A stored reply's step (its top-N: the funnel is not exact beyond them); its ``constraint`` (the one
    its reply was made under) gives the grammar column (its history's last ``step`` tokens are the reply's).

    Raises:
        EngineError: ``no_logits`` (no candidates stored); ``constraint`` (it does not convert).
    """
    if not stored.ids:
        raise EngineError(P.FailureKind.NO_LOGITS, f"Token {stored.step + 1} of the reply has no stored candidates.")
    return KeptStep(
        reply_id=stored.reply_id,
        step=stored.step,
        ids=np.asarray(stored.ids, dtype=np.int32),
        logits=np.asarray(stored.logits, dtype=np.float32),
        logsumexp=stored.logsumexp,
        exact=False,
        drawn=stored.drawn,
        history=stored.history,
        seed=stored.seed,
        texts=stored.texts,
        gbnf=constraint_gbnf(stored.constraint),
        reply_start=max(0, len(stored.history) - stored.step),
        entropy_bits=stored.entropy_bits,
        stored=True,
    )


def same_model_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name the same file (False when either cannot be read)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def recomputed_step(stored: StoredStep, logits: npt.NDArray[np.float32]) -> KeptStep:
    """A stored reply's step with all its logits, computed again by the model that wrote it (``logits``:
    [n_vocab], after ``stored.history``): exact, as the live reply's newest steps."""
    return exact_step(stored_step(stored), logits)


def exact_step(kept: KeptStep, logits: npt.NDArray[np.float32]) -> KeptStep:
    """``kept`` (a step that kept its top-M) with all its logits (``logits``: [n_vocab], after
    ``kept.history``, evaluated again by the same model): exact, said as recomputed (no longer the stored
    top-N); its whole-vocabulary entropy stays the one kept with it."""
    m = float(logits.max())
    lse = m + math.log(float(np.exp(logits.astype(np.float64) - m).sum()))
    ids = np.arange(logits.shape[0], dtype=np.int32)
    return replace(kept, ids=ids, logits=logits, logsumexp=lse, exact=True, recomputed=True, stored=False)


def step_funnel(
    req: P.ComputeFunnel, kept: KeptStep, settings: SamplerSettings, vocab: Vocab, n_ctx: int
) -> P.FunnelComputed:
    """The funnel of ``kept`` under ``settings`` (validated: :func:`checked_sampler`), ``req.rows`` rows (1 to 50).

    Args:
        vocab: a vocabulary the calling thread may use (the loaded model's ``funnel_vocab``).
        n_ctx: the loaded context, tokens (penalties over the whole context: ``repeat_last_n`` -1).

    Raises:
        EngineError: ``constraint``: the grammar does not parse, or refuses one of the reply's tokens
            before the step (a stored reply made under another constraint).
    """
    grammar = None
    if kept.gbnf is not None:
        grammar = grammar_sampler(vocab.ptr, kept.gbnf, None)
        try:
            feed(grammar, kept.history[kept.reply_start :], vocab)
        except EngineError:
            llama_cpp.llama_sampler_free(grammar)
            raise
    funnel = run_funnel(
        ids=kept.ids,
        logits=kept.logits,
        logsumexp=kept.logsumexp,
        settings=settings,
        seed=kept.seed,
        history=kept.history,
        vocab=vocab,
        n_ctx=n_ctx,
        drawn=kept.drawn,
        reply_id=kept.reply_id,
        step=kept.step,
        exact=kept.exact,
        n_rows=max(1, min(req.rows, MAX_ROWS)),
        texts=kept.texts,
        grammar=grammar,
        entropy_bits=kept.entropy_bits,
        stored=kept.stored,
        recomputed=kept.recomputed,
    )
    return P.FunnelComputed(req.request_id, funnel)

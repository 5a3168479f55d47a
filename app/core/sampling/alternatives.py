"""Every generated token's alternatives: the top-N candidates of each step of a reply, kept with it.

The engine takes them from the reply's per-step logits store (the top 64 and the log-sum-exp
over the vocabulary that :mod:`app.engine.funnel_store` keeps for the funnel) when the reply
ends, and sends them with :class:`~app.core.protocol.Finished`; the conversation store keeps
them next to the message (one compressed binary cell, :meth:`ReplyAlternatives.to_bytes`),
export and import carry them (base64 of the same bytes).

Per step: the token drawn, the log-sum-exp over the whole vocabulary (so each kept
candidate's probability is its true one under the raw model), the entropy of the raw
model's distribution (bits), and the top-N candidates' ids and logits, best first. With the
sampler settings and seed of the reply (in its :class:`~app.core.conversations.MessageMeta`)
and the tokens before the reply (``history``: the prompt's last tokens, for penalties and
DRY), that is what the sampler funnel needs to run again on any step, after a restart too:
exact on those N candidates (the mass outside them is missing, and the funnel says so).

Bytes: ``12 + 8 x N`` per generated token before compression (N = 10: 92 bytes), plus each
distinct token's text once, plus 4 bytes per history token; zlib takes off a little
(:func:`stored_bytes_per_token` measures it on a real reply).
"""

from __future__ import annotations

import enum
import math
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass, field, replace

from app.core.constraint.model import OutputConstraint
from app.core.sampling.params import SamplerSettings

DEFAULT_PER_TOKEN = 10  # alternatives kept per generated token (a setting)
MAX_PER_TOKEN = 50  # its upper bound (the engine keeps the top 64 per step)
MAX_HISTORY = 4096  # prompt tokens kept for the funnel's penalties and DRY (their look-back)
_MAGIC = b"GBA1"
_HEAD = struct.Struct("<4sIHII")  # magic, steps, per-step N, history tokens, texts


class TokenColour(str, enum.Enum):
    """What a token's colour shows: the probability the raw model gave it, or how unsure the model was."""

    PROBABILITY = "probability"
    ENTROPY = "entropy"


@dataclass(frozen=True)
class Candidate:
    """One alternative of a step: token id, its text, its probability under the raw model."""

    token_id: int
    text: str
    p: float


@dataclass(frozen=True)
class StepView:
    """One step as the hover shows it.

    Attributes:
        step: 0-based index of the token in the reply.
        token_id, text: the token drawn.
        p: its probability under the raw model (None when it is not among the kept candidates).
        entropy_bits: entropy of the raw model's distribution at this step, bits.
        candidates: the top-N, best first.
        outside: probability mass of the tokens that are not among them.
    """

    step: int
    token_id: int
    text: str
    p: float | None
    entropy_bits: float
    candidates: tuple[Candidate, ...]
    outside: float


@dataclass(frozen=True)
class StoredStep:
    """What the funnel needs to run on one stored step (sent with :class:`~app.core.protocol.ComputeFunnel`).

    Attributes:
        reply_id: an id for the funnel's title (the stored message id).
        step: 0-based token index in the reply.
        ids, logits: the kept candidates, best first.
        logsumexp: log-sum-exp over the whole vocabulary's logits at this step.
        drawn: the token the reply drew.
        history: the tokens before the step (the prompt's kept tail, then the reply so far).
        texts: text of every id above and of ``drawn``.
        settings: the reply's sampler settings; seed: the seed it used.
        constraint: the output format the reply was made under (the funnel's grammar column, the
            grammar fed the reply's tokens before the step: the last ``step`` of ``history``); None: none.
        entropy_bits: the raw model's entropy over the whole vocabulary at this step, bits (NaN: not known).
        model_path: the model file that wrote the reply, when its logits may be recomputed (the reply ran
            without a context shift): with that file loaded, the engine evaluates ``history`` again for
            all the step's logits (``ComputeFunnel``); "": never, the top-N only.
    """

    reply_id: int
    step: int
    ids: tuple[int, ...]
    logits: tuple[float, ...]
    logsumexp: float
    drawn: int
    history: tuple[int, ...]
    texts: dict[int, str]
    settings: SamplerSettings
    seed: int
    constraint: OutputConstraint | None = None
    entropy_bits: float = math.nan
    model_path: str = ""


@dataclass(frozen=True)
class ReplyAlternatives:
    """The top-N alternatives of every generated token of one reply (see the module docstring).

    Attributes:
        per_token: N, candidates kept per step.
        tokens: the token drawn at each step.
        logsumexp: per step, log-sum-exp over the vocabulary's logits.
        entropy_bits: per step, entropy of the raw model's distribution, bits.
        ids, logits: ``len(tokens) x per_token`` candidates, row-major, best first in each row
            (a row shorter than N, from a vocabulary smaller than N, is padded with id -1).
        history: the tokens before the first step (the prompt's last ones, at most
            :data:`MAX_HISTORY`).
        texts: display text of every token id above.
        packed: :meth:`to_bytes` made in advance (the engine packs a reply's alternatives after
            decoding, so the window's thread only stores the bytes); None: packed when asked.
    """

    per_token: int
    tokens: tuple[int, ...]
    logsumexp: tuple[float, ...]
    entropy_bits: tuple[float, ...]
    ids: tuple[int, ...]
    logits: tuple[float, ...]
    history: tuple[int, ...] = ()
    texts: dict[int, str] = field(default_factory=dict)
    packed: bytes | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if not (len(self.logsumexp) == len(self.entropy_bits) == n):
            raise ValueError("one log-sum-exp and one entropy per token")
        if len(self.ids) != n * self.per_token or len(self.logits) != len(self.ids):
            raise ValueError(
                f"{n} tokens x {self.per_token} candidates: {len(self.ids)} ids, {len(self.logits)} logits"
            )

    @property
    def n_steps(self) -> int:
        """Generated tokens (steps) kept."""
        return len(self.tokens)

    def p(self, step: int) -> float | None:
        """The drawn token's probability under the raw model at ``step`` (None when not among the kept)."""
        tok = self.tokens[step]
        lo = step * self.per_token
        for i in range(lo, lo + self.per_token):
            if self.ids[i] == tok:
                return math.exp(self.logits[i] - self.logsumexp[step])
        return None

    def most_uncertain_step(self) -> int:
        """The step whose raw distribution had the highest entropy (:attr:`entropy_bits`; the first of
        equal ones): where the sampler settings matter most.

        Raises:
            ValueError: no steps.
        """
        if not self.n_steps:
            raise ValueError("no steps")
        return max(range(self.n_steps), key=lambda i: (self.entropy_bits[i], -i))

    def view(self, step: int) -> StepView:
        """Step ``step`` for the hover: the drawn token, the top-N with probabilities, the mass outside.

        Raises:
            IndexError: no such step.
        """
        if not 0 <= step < self.n_steps:
            raise IndexError(f"step {step} of {self.n_steps}")
        lse = self.logsumexp[step]
        lo = step * self.per_token
        cands = tuple(
            Candidate(t, self.texts.get(t, f"#{t}"), math.exp(lg - lse))
            for t, lg in zip(self.ids[lo : lo + self.per_token], self.logits[lo : lo + self.per_token], strict=True)
            if t >= 0
        )
        tok = self.tokens[step]
        return StepView(
            step=step,
            token_id=tok,
            text=self.texts.get(tok, f"#{tok}"),
            p=self.p(step),
            entropy_bits=self.entropy_bits[step],
            candidates=cands,
            outside=max(0.0, 1.0 - sum(c.p for c in cands)),
        )

    def stored_step(
        self,
        step: int,
        reply_id: int,
        settings: SamplerSettings,
        seed: int,
        constraint: OutputConstraint | None = None,
        model_path: str = "",
    ) -> StoredStep:
        """What :class:`~app.core.protocol.ComputeFunnel` carries to run the funnel on ``step`` (``constraint``:
        the output format the reply was made under, None: none; ``model_path``: :attr:`StoredStep.model_path`,
        kept only when :attr:`history` holds the whole prompt: fewer than :data:`MAX_HISTORY` tokens).

        Raises:
            IndexError: no such step.
        """
        if not 0 <= step < self.n_steps:
            raise IndexError(f"step {step} of {self.n_steps}")
        lo, hi = step * self.per_token, (step + 1) * self.per_token
        keep = [i for i in range(lo, hi) if self.ids[i] >= 0]
        ids = tuple(self.ids[i] for i in keep)
        tok = self.tokens[step]
        texts = {t: self.texts.get(t, f"#{t}") for t in (*ids, tok)}
        return StoredStep(
            reply_id=reply_id,
            step=step,
            ids=ids,
            logits=tuple(self.logits[i] for i in keep),
            logsumexp=self.logsumexp[step],
            drawn=tok,
            history=self.history + self.tokens[:step],
            texts=texts,
            settings=settings,
            seed=seed,
            constraint=constraint,
            entropy_bits=self.entropy_bits[step],
            model_path=model_path if len(self.history) < MAX_HISTORY else "",
        )

    def head(self, n: int) -> ReplyAlternatives:
        """The first ``n`` steps (a branch keeps the steps before the token it changed)."""
        k = self.per_token
        return ReplyAlternatives(
            k,
            self.tokens[:n],
            self.logsumexp[:n],
            self.entropy_bits[:n],
            self.ids[: n * k],
            self.logits[: n * k],
            self.history,
            self.texts,
        )

    def with_token(self, step: int, token: int, text: str) -> ReplyAlternatives:
        """The same steps with ``token`` drawn at ``step`` instead (a branch from an alternative)."""
        tokens = list(self.tokens)
        tokens[step] = token
        return ReplyAlternatives(
            self.per_token,
            tuple(tokens),
            self.logsumexp,
            self.entropy_bits,
            self.ids,
            self.logits,
            self.history,
            {**self.texts, token: text},
        )

    def joined(self, later: ReplyAlternatives) -> ReplyAlternatives:
        """These steps, then ``later``'s (a continued or branched reply); N is the smaller of the two."""
        k = min(self.per_token, later.per_token)

        def rows(a: ReplyAlternatives, arr: tuple[float, ...] | tuple[int, ...]) -> list[float | int]:
            out: list[float | int] = []
            for s in range(a.n_steps):
                out.extend(arr[s * a.per_token : s * a.per_token + k])
            return out

        return ReplyAlternatives(
            k,
            self.tokens + later.tokens,
            self.logsumexp + later.logsumexp,
            self.entropy_bits + later.entropy_bits,
            tuple(int(x) for x in rows(self, self.ids) + rows(later, later.ids)),
            tuple(float(x) for x in rows(self, self.logits) + rows(later, later.logits)),
            self.history,
            {**self.texts, **later.texts},
        )

    # ----------------------------------------------------------------------------- bytes
    def with_packed(self) -> ReplyAlternatives:
        """The same alternatives with :attr:`packed` set."""
        return replace(self, packed=self.to_bytes())

    def to_bytes(self) -> bytes:
        """The compact stored form: a little-endian binary layout, zlib-compressed (see :meth:`from_bytes`)."""
        if self.packed is not None:
            return self.packed
        texts = sorted(self.texts.items())
        parts = [
            _HEAD.pack(_MAGIC, self.n_steps, self.per_token, len(self.history), len(texts)),
            _le(array("i", self.tokens)),
            _le(array("f", self.logsumexp)),
            _le(array("f", self.entropy_bits)),
            _le(array("i", self.ids)),
            _le(array("f", self.logits)),
            _le(array("i", self.history)),
        ]
        for tok, text in texts:
            raw = text.encode("utf-8")[:65535]
            parts.append(struct.pack("<iH", tok, len(raw)) + raw)
        return zlib.compress(b"".join(parts), 1)  # level 1: level 6 saves under 1 % on logits, at 3-4x the time

    @staticmethod
    def tokens_from_bytes(data: bytes) -> tuple[int, ...]:
        """Only the drawn tokens of :meth:`to_bytes`' form (decompresses just the head and them).

        Raises:
            ValueError: not that form (bad compression, magic, sizes).
        """
        try:
            d = zlib.decompressobj()
            raw = d.decompress(data, _HEAD.size)
            if len(raw) == _HEAD.size:
                magic, n, _k, _h, _t = _HEAD.unpack_from(raw)
                raw += d.decompress(d.unconsumed_tail, 4 * n) if magic == _MAGIC and n else b""
        except zlib.error as exc:
            raise ValueError(f"stored alternatives are damaged: {exc}") from None
        if len(raw) < _HEAD.size:
            raise ValueError("stored alternatives are cut short")
        magic, n, *_ = _HEAD.unpack_from(raw)
        if magic != _MAGIC:
            raise ValueError(f"stored alternatives have an unknown format {magic!r}")
        if len(raw) < _HEAD.size + 4 * n:
            raise ValueError("stored alternatives are cut short")
        a = array("i")
        a.frombytes(raw[_HEAD.size : _HEAD.size + 4 * n])
        if sys.byteorder != "little":
            a.byteswap()
        return tuple(a)

    @classmethod
    def from_bytes(cls, data: bytes) -> ReplyAlternatives:
        """Read :meth:`to_bytes`' form.

        Raises:
            ValueError: not that form (bad compression, magic, sizes).
        """
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise ValueError(f"stored alternatives are damaged: {exc}") from None
        if len(raw) < _HEAD.size:
            raise ValueError("stored alternatives are cut short")
        magic, n, k, n_hist, n_texts = _HEAD.unpack_from(raw)
        if magic != _MAGIC:
            raise ValueError(f"stored alternatives have an unknown format {magic!r}")
        pos = _HEAD.size
        out: list[array[int] | array[float]] = []
        for code, count in (("i", n), ("f", n), ("f", n), ("i", n * k), ("f", n * k), ("i", n_hist)):
            size = 4 * count
            if pos + size > len(raw):
                raise ValueError("stored alternatives are cut short")
            a = array(code)
            a.frombytes(raw[pos : pos + size])
            if sys.byteorder != "little":
                a.byteswap()
            out.append(a)
            pos += size
        texts: dict[int, str] = {}
        for _ in range(n_texts):
            if pos + 6 > len(raw):
                raise ValueError("stored alternatives are cut short")
            tok, ln = struct.unpack_from("<iH", raw, pos)
            pos += 6
            texts[tok] = raw[pos : pos + ln].decode("utf-8", errors="replace")
            pos += ln
        tokens, lse, ent, ids, logits, hist = out
        return cls(
            k,
            tuple(int(x) for x in tokens),
            tuple(float(x) for x in lse),
            tuple(float(x) for x in ent),
            tuple(int(x) for x in ids),
            tuple(float(x) for x in logits),
            tuple(int(x) for x in hist),
            texts,
            bytes(data),
        )


def _le(a: array[int] | array[float]) -> bytes:
    """The array's bytes, little-endian."""
    if sys.byteorder != "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def stored_bytes_per_token(alts: ReplyAlternatives) -> float:
    """Stored bytes per generated token of ``alts`` (compressed, texts and history included)."""
    return len(alts.to_bytes()) / max(1, alts.n_steps)


def entropy_colour_level(bits: float) -> float:
    """How unsure the model was, 0 (certain) .. 1 (4 bits or more: ~16 equally likely tokens)."""
    return min(1.0, max(0.0, bits / 4.0))

"""Speculative decoding's settings: which drafter, how long a draft, when the draft model stops.

A load setting (``LoadSettings.speculation``), so the per-model load settings remember it and a
draft model is loaded beside the model at load time. The names follow llama.cpp's
``common_params_speculative`` (``--draft-max``, ``--draft-p-min``).
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

DRAFT_MAX_LIMIT = 64  # longest draft accepted from stored settings (llama.cpp's server caps n_max likewise)
NGRAM_LIMIT = 16  # longest n-gram prompt lookup matches


class Drafter(str, enum.Enum):
    """What proposes the drafted tokens."""

    PROMPT_LOOKUP = "prompt_lookup"  #: the continuation of the longest recent n-gram match in prompt and reply
    DRAFT_MODEL = "draft_model"  #: a second, small GGUF with the same vocabulary, drafting greedily

    def __str__(self) -> str:
        return str(self.value)

    @property
    def label(self) -> str:
        """How the window says it ("prompt lookup", "draft model")."""
        return self.value.replace("_", " ")

    @classmethod
    def parse(cls, value: object) -> Drafter:
        """The member for a stored value; anything unknown reads as :attr:`PROMPT_LOOKUP`."""
        try:
            return cls(value)
        except (ValueError, TypeError):
            return cls.PROMPT_LOOKUP


@dataclass(frozen=True)
class SpeculationSettings:
    """Speculative decoding at load (``LoadSettings.speculation``); settings saved before it read as off.

    Attributes:
        enabled: speculate on every reply (a request may turn it off: ``Generate.speculate``).
        drafter: :class:`Drafter`; a value given as text is parsed.
        draft_max: tokens drafted per round at most (llama.cpp's ``--draft-max``), 1..64.
        p_min: the draft model stops drafting when its top token's probability falls below this
            (llama.cpp's ``--draft-p-min``), 0..1.
        ngram: prompt lookup's n-gram size, tokens (1..16).
        draft_model: path of the draft GGUF (``DRAFT_MODEL``).
        adaptive: each round drafts the length that pays on this machine, at most draft_max
            (:mod:`app.core.speculative.budget`); False: what the drafter has, up to draft_max, as
            llama.cpp does.
    """

    enabled: bool = False
    drafter: Drafter = Drafter.PROMPT_LOOKUP
    draft_max: int = 8
    p_min: float = 0.75
    ngram: int = 3
    draft_model: str = ""
    adaptive: bool = True

    def __post_init__(self) -> None:
        given: object = self.drafter
        if not isinstance(given, Drafter):
            object.__setattr__(self, "drafter", Drafter.parse(given))

    def terms(self) -> tuple[str, ...]:
        """The settings in the field's terms, e.g. ``("speculation: prompt lookup", "draft_max 8", "n-gram 3")``;
        ``("speculation off",)`` when off; "fixed draft length" when not ``adaptive``."""
        if not self.enabled:
            return ("speculation off",)
        out: tuple[str, ...] = (f"speculation: {self.drafter.label}", f"draft_max {self.draft_max}")
        if not self.adaptive:
            out = (*out, "fixed draft length")
        if self.drafter is Drafter.PROMPT_LOOKUP:
            return (*out, f"n-gram {self.ngram}")
        return (*out, f"p_min {self.p_min:g}", f"draft model {self.draft_model or '(none)'}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (``drafter`` as its string)."""
        d = asdict(self)
        d["drafter"] = self.drafter.value
        return d

    @classmethod
    def from_dict(cls, data: object) -> SpeculationSettings:
        """Build from stored values: a value of the wrong type reads as its default, a missing one
        (or no dict at all: settings saved before speculation) too; draft_max, ngram and p_min are
        clamped (1..64, 1..16, 0..1)."""
        if not isinstance(data, dict):
            return cls()
        base = cls()
        out: dict[str, Any] = {}
        for k, default in asdict(base).items():
            v = data.get(k, default)
            if k == "drafter":
                out[k] = Drafter.parse(v)
            elif isinstance(default, bool):
                out[k] = v if isinstance(v, bool) else default
            elif isinstance(default, str):
                out[k] = v if isinstance(v, str) else default
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
                out[k] = type(default)(v)
            else:
                out[k] = default
        out["draft_max"] = max(1, min(out["draft_max"], DRAFT_MAX_LIMIT))
        out["ngram"] = max(1, min(out["ngram"], NGRAM_LIMIT))
        out["p_min"] = max(0.0, min(out["p_min"], 1.0))
        return cls(**out)

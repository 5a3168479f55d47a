"""Which two library files the Compare window offers first: two files of the same model.

A comparison token by token needs two quantizations of one model (the same vocabulary; the engine checks
it, :mod:`app.engine.compat`). Before anything is loaded the library's facts tell the likely pairs: the
same architecture and either the same model name (``general.name``) or the same file stem once the
quantization is taken off its end (``SmolLM2-135M-Instruct.Q4_1`` and ``SmolLM2-135M-Instruct-Q8_0``
are ``SmolLM2-135M-Instruct``). When model A's file has no such sibling, model B is left for the person
to choose rather than filled with an unrelated file that would be refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from app.core.models.library import ModelEntry

#: A quantization or float type at the end of a file stem, after ``-``, ``.`` or ``_``: ``.Q4_1``,
#: ``-q4_k_m``, ``-IQ2_XXS``, ``.F16``, ``-bf16`` (several in a row: a requantized file's ``.Q4_1.Q8_0``).
_QUANT_SUFFIX = re.compile(r"(?:[-._](?:i?q\d+(?:_[a-z0-9]+)*|bf16|f16|f32))+$", re.IGNORECASE)
_SPLIT_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


def stem_family(path: str | Path) -> str:
    """A GGUF's file stem without its split part number and quantization, lower case:
    ``gemma-3-270m-q4_k_m.gguf`` → ``gemma-3-270m``."""
    stem = _SPLIT_SUFFIX.sub("", Path(path).stem)
    return _QUANT_SUFFIX.sub("", stem).lower()


def same_model(x: ModelEntry, y: ModelEntry) -> bool:
    """Whether two library entries look like files of one model (see the module docstring)."""
    if x.architecture != y.architecture:
        return False
    return (bool(x.name) and x.name == y.name) or stem_family(x.path) == stem_family(y.path)


def sibling(path: str, entries: Sequence[ModelEntry]) -> ModelEntry | None:
    """The first loadable entry other than ``path`` that is a file of the same model, or None (also when
    ``path`` is not in ``entries``)."""
    own = next((e for e in entries if str(e.path) == str(path)), None)
    if own is None:
        return None
    return next((e for e in entries if e.ok and str(e.path) != str(path) and same_model(own, e)), None)


def default_pair(loaded: str | None, entries: Sequence[ModelEntry]) -> tuple[str | None, str | None]:
    """Model A and model B to offer first: A is the loaded model, else the first loadable entry that has a
    sibling, else the first loadable entry; B is A's sibling, or None (the person chooses)."""
    ok = [e for e in entries if e.ok]
    if loaded:
        a: str | None = str(loaded)
    else:
        paired = next((e for e in ok if sibling(str(e.path), ok) is not None), None)
        first = paired or (ok[0] if ok else None)
        a = str(first.path) if first is not None else None
    if a is None:
        return None, None
    b = sibling(a, ok)
    return a, (str(b.path) if b is not None else None)

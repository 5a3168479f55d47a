"""An output constraint: the shape a reply must take, enforced by llama.cpp's grammar sampler.

The window sets one per chat, the local API one per request (``response_format``, and the
tool call ``tool_choice`` forces); the engine turns it into GBNF (a JSON schema through
llama-cpp-python's JSON-schema-to-GBNF converter, ``JSON`` through llama.cpp's JSON grammar)
and puts ``llama_sampler_init_grammar`` first in the sampler chain. Plain values: no
llama.cpp here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ConstraintKind(Enum):
    """What ``OutputConstraint.text`` holds."""

    NONE = "none"  # no constraint (text is "")
    JSON = "json"  # any JSON object (OpenAI's ``{"type": "json_object"}``; text is "")
    JSON_SCHEMA = "json_schema"  # text: a JSON schema, as JSON text
    GBNF = "gbnf"  # text: a GBNF grammar (llama.cpp's grammars/README.md), its start rule ``root``


@dataclass(frozen=True)
class OutputConstraint:
    """The shape a reply must take.

    Attributes:
        kind: what ``text`` holds.
        text: the JSON schema (JSON text) for ``JSON_SCHEMA``, the grammar for ``GBNF``, "" otherwise.
    """

    kind: ConstraintKind = ConstraintKind.NONE
    text: str = ""

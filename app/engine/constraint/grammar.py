"""An output constraint as GBNF text for llama.cpp's grammar sampler.

- ``JSON``: llama-cpp-python's ``JSON_GBNF`` (llama.cpp's ``grammars/json.gbnf``: an object at the root);
- ``JSON_SCHEMA``: llama-cpp-python's converter (``llama_cpp.llama_grammar.json_schema_to_gbnf``), after
  :func:`app.core.constraint.schema_check.schema_problem` refused what it would silently ignore; what the
  converter itself raises (``AssertionError`` for an unrecognized schema or a pattern without ``^...$``,
  ``ValueError`` for a bad ``$ref`` or quantifier, ``KeyError`` for a ``$ref`` to nothing) is named;
- ``GBNF``: the text as given.
"""

from __future__ import annotations

from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from app.core import protocol as P
from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.constraint.schema_check import schema_problem
from app.engine.errors import EngineError


def constraint_gbnf(constraint: OutputConstraint | None) -> str | None:
    """The GBNF grammar (start rule ``root``) that enforces ``constraint``; None for none.

    Raises:
        EngineError: ``constraint``: the schema is not JSON, uses what the converter does not enforce
            (the keyword and its path named) or makes the converter fail; the grammar is empty.
    """
    if constraint is None or constraint.kind == ConstraintKind.NONE:
        return None
    if constraint.kind == ConstraintKind.JSON:
        return JSON_GBNF
    if constraint.kind == ConstraintKind.GBNF:
        if not constraint.text.strip():
            raise EngineError(P.FailureKind.CONSTRAINT, "The GBNF grammar is empty: write a rule 'root ::= ...'.")
        return constraint.text
    problem = schema_problem(constraint.text)
    if problem is not None:
        raise EngineError(P.FailureKind.CONSTRAINT, problem[0].upper() + problem[1:])
    try:
        return str(json_schema_to_gbnf(constraint.text))
    except (AssertionError, ValueError, KeyError, TypeError, RecursionError) as exc:
        what = str(exc) or type(exc).__name__
        raise EngineError(
            P.FailureKind.CONSTRAINT, f"llama-cpp-python's JSON-schema converter cannot handle this schema: {what}"
        ) from None

"""An output constraint as stored JSON (a chat's ``constraint_json`` cell, a reply's ``MessageMeta``):
``{"kind": "json_schema", "text": "..."}``; anything unreadable, or an unknown kind, reads as none."""

from __future__ import annotations

from typing import Any

from app.core.constraint.model import ConstraintKind, OutputConstraint


def constraint_to_dict(c: OutputConstraint) -> dict[str, str]:
    """``c`` as JSON-ready values."""
    return {"kind": c.kind.value, "text": c.text}


def constraint_from_dict(data: Any) -> OutputConstraint:
    """The constraint ``data`` stores (not a dict, an unknown kind: none; a text that is not text: "")."""
    if not isinstance(data, dict):
        return OutputConstraint()
    try:
        kind = ConstraintKind(data.get("kind"))
    except ValueError:
        return OutputConstraint()
    text = data.get("text")
    return OutputConstraint(kind, text if isinstance(text, str) and kind != ConstraintKind.NONE else "")

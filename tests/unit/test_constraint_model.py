"""app/core/constraint/model.py: a constraint is a frozen value (kept per chat, compared by value)."""

from __future__ import annotations

import dataclasses

import pytest

from app.core.constraint.model import ConstraintKind, OutputConstraint


def test_a_constraint_is_a_value_that_cannot_be_changed_in_place():
    schema = '{"type": "object"}'
    a = OutputConstraint(ConstraintKind.JSON_SCHEMA, schema)
    assert a == OutputConstraint(ConstraintKind.JSON_SCHEMA, schema)
    assert a != OutputConstraint(ConstraintKind.GBNF, schema)
    assert OutputConstraint().kind is ConstraintKind.NONE and OutputConstraint().text == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.text = "x"  # type: ignore[misc]

"""``ToolOffer``: what one chat reply offers the model (the MCP tools switched on): the tools, the
choice, and for a forced call the constraint that makes the reply one (``Generate.tools``,
``tool_choice``, ``constraint``)."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.constraint.model import OutputConstraint
from app.core.tools.checks import usable_tools
from app.core.tools.forced import forced_call_constraint
from app.core.tools.spec import ToolChoice, ToolChoiceKind, ToolSpec


@dataclass(frozen=True)
class ToolOffer:
    """The tools of one reply.

    Attributes:
        tools: offered to the model (rendered through the chat template, or described in the system
            message for a forced call).
        choice: AUTO (the template offers them, the model decides) or REQUIRED (a forced call).
        constraint: for REQUIRED, the JSON schema that makes the reply a call of one of them.
    """

    tools: tuple[ToolSpec, ...]
    choice: ToolChoice
    constraint: OutputConstraint | None = None

    @classmethod
    def auto(cls, tools: tuple[ToolSpec, ...]) -> ToolOffer:
        """The tools through the chat template; the model decides whether to call one."""
        return cls(tools, ToolChoice(ToolChoiceKind.AUTO))

    @classmethod
    def forced(cls, tools: tuple[ToolSpec, ...]) -> ToolOffer:
        """A reply that must be a call of one of ``tools`` (llama.cpp's grammar sampler enforces it), for a
        model whose template has no place for tools.

        Raises:
            ValueError: ``tools`` is empty.
        """
        choice = ToolChoice(ToolChoiceKind.REQUIRED)
        return cls(tools, choice, forced_call_constraint(tools, choice))

    @classmethod
    def forced_usable(cls, tools: tuple[ToolSpec, ...]) -> tuple[ToolOffer | None, tuple[str, ...]]:
        """:meth:`forced` over the tools whose arguments' schema llama.cpp's grammar can express, so that
        one tool it cannot (a ``minimum``, a ``not``) does not stop every call.

        Returns:
            (the offer, or None when no tool is left; one sentence per tool left out, naming it and why).
        """
        usable, problems = usable_tools(tools)
        return (cls.forced(usable) if usable else None), problems

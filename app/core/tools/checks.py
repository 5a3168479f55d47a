"""Whether a tool's ``parameters`` can be enforced in a forced call: :func:`tool_problem` says why not, in a
sentence that names the tool, and :func:`usable_tools` splits a list into the tools a forced call can
offer and those sentences, so one tool with a schema llama.cpp's grammar cannot express does not take
the others' calls down with it (they share one grammar, :func:`~app.core.tools.forced.calls_schema`).

The local API refuses such a tool with a 400 (:mod:`app.server.schema`); the window's MCP tools drop it
from the offer and show the sentence. Plain Python: the check is
:func:`~app.core.constraint.schema_check.schema_issue`, the list the engine checks before it runs
llama-cpp-python's converter.
"""

from __future__ import annotations

from app.core.constraint.schema_check import schema_issue
from app.core.tools.spec import ToolSpec, object_schema_problem


def tool_problem(tool: ToolSpec) -> str | None:
    """Why ``tool``'s arguments cannot be sampled under llama.cpp's grammar, or None when they can.

    Returns:
        e.g. "tool 'lookup': its arguments' JSON schema uses 'patternProperties' at $.properties.q, which
        llama.cpp's grammar cannot express (the converter would ignore it)"; the path is from the
        ``parameters`` schema's root (``$``). Parameters that are not an object schema (an MCP tool's input
        schema; :func:`~app.core.tools.spec.parse_tools` never lets one through from the API): "tool 'x':
        its arguments' schema must be a JSON schema of type object (...), not one of type ...".
    """
    problem = object_schema_problem(tool.parameters)
    if problem:
        return f"tool {tool.name!r}: its arguments' schema {problem}"
    issue = schema_issue(tool.parameters)
    if issue is None:
        return None
    why = f" ({issue.why})" if issue.why else ""
    return (
        f"tool {tool.name!r}: its arguments' JSON schema uses {issue.what} at {issue.path}, "
        f"which llama.cpp's grammar cannot express{why}"
    )


def usable_tools(tools: tuple[ToolSpec, ...]) -> tuple[tuple[ToolSpec, ...], tuple[str, ...]]:
    """``tools`` split into those a forced call can offer and, for the others, :func:`tool_problem`'s sentences.

    Returns:
        (the usable tools in their order, one sentence per tool left out).
    """
    usable: list[ToolSpec] = []
    problems: list[str] = []
    for tool in tools:
        problem = tool_problem(tool)
        if problem is None:
            usable.append(tool)
        else:
            problems.append(problem)
    return tuple(usable), tuple(problems)

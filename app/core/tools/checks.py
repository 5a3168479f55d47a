"""Whether a tool's ``parameters`` can be enforced in a forced call: :func:`tool_problem` says why not, in a
sentence that names the tool, and :func:`usable_tools` splits a list into the tools a forced call can
offer and those sentences, so one tool with a schema llama.cpp's grammar cannot express does not take
the others' calls down with it (they share one grammar, :func:`~app.core.tools.forced.calls_schema`).

The local API refuses such a tool with a 400 (:mod:`app.server.schema`); the window's MCP tools can drop it
from the offer and show the sentence; the engine, given a forced call's whole schema, says the same
sentence (:func:`call_schema_problem`, the path taken back into the tool's own parameters). Plain Python: the check is
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
    return _sentence(tool.name, issue.what, issue.path, issue.why)


def _sentence(name: str, what: str, path: str, why: str) -> str:
    tail = f" ({why})" if why else ""
    return f"tool {name!r}: its arguments' JSON schema uses {what} at {path}, which llama.cpp's grammar cannot express{tail}"


def call_schema_problem(schema: object) -> str | None:
    """:func:`tool_problem`'s sentence for a forced call's whole schema (:func:`~app.core.tools.forced.calls_schema`,
    what the engine receives), naming the tool and the path in its own parameters; None when the schema
    has no issue or is not a call schema (the caller then says it its own way).

    Args:
        schema: the parsed JSON schema.
    """
    if not isinstance(schema, dict):
        return None
    issue = schema_issue(schema)
    if issue is None:
        return None
    single = call_name(schema)
    if single is not None:
        arguments = "$.properties.arguments"
        if issue.path == arguments or issue.path.startswith((arguments + ".", arguments + "[")):
            return _sentence(single, issue.what, "$" + issue.path[len(arguments) :], issue.why)
        return _sentence(single, issue.what, issue.path, issue.why)
    defs = schema.get("$defs")
    if not isinstance(defs, dict) or not issue.path.startswith("$.$defs."):
        return None
    rest = issue.path[len("$.$defs.") :]
    for name, call in defs.items():
        if call_name(call) != name:
            continue
        arguments = f"{name}.properties.arguments"
        if rest == arguments or rest.startswith((arguments + ".", arguments + "[")):
            return _sentence(name, issue.what, "$" + rest[len(arguments) :], issue.why)
        if rest.startswith(name + "."):  # one of its hoisted $defs, "<tool>.X"
            return _sentence(name, issue.what, "$.$defs." + rest[len(name) + 1 :], issue.why)
    return None


def call_name(schema: object) -> str | None:
    """The tool's name when ``schema`` is one call's schema (``properties.name.const``), else None."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or set(props) != {"name", "arguments"} or not isinstance(props["name"], dict):
        return None
    name = props["name"].get("const")
    return name if isinstance(name, str) else None


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

"""From OpenAI request bodies to engine requests: what is read, checked and how it maps.

Read from ``/v1/chat/completions``: ``messages`` (roles system/user/assistant/developer, content
a string or a list of ``{"type": "text"}`` parts), ``stream``, ``stream_options.include_usage``,
``max_tokens`` / ``max_completion_tokens``, ``temperature``, ``top_p``, ``min_p``, ``top_k``,
``seed``, ``stop`` (a string or up to 4 strings), ``presence_penalty``, ``frequency_penalty``,
``repeat_penalty``, ``logprobs`` (bool) and ``top_logprobs`` (0-20). ``/v1/completions`` takes
``prompt`` (one string) instead of ``messages`` and ``logprobs`` as a number (0-20). Both take
``response_format`` (text, ``json_object``, ``json_schema``: :mod:`app.server.response_format`). Other
fields (``n`` above 1, ``functions``) are refused with 400 rather than ignored.

Tools (chat only): ``tools`` and ``tool_choice`` (:mod:`app.core.tools`). A forced choice
("required", or a named function) asks the engine for a reply under
:func:`~app.core.tools.forced.forced_call_constraint` (with ``response_format`` too: a 400, both
shape the reply); "auto" offers the tools through the chat template; "none" leaves them out. The
history may hold assistant messages with ``tool_calls`` and ``role: "tool"`` messages
(``tool_call_id``): they are written as text any template renders (:mod:`app.core.tools.history`),
consecutive tool results in one user message.

Sampling starts from llama-server's defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
no repeat penalty, no max_tokens: until the end token or the context is full), not from the
person's Sampler panel, so a client gets the same reply whatever the person has set.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from app.core import protocol as P
from app.core.chat.context import ChatMessage, ContextPolicy, Role
from app.core.sampling.param_specs import PARAMS
from app.core.sampling.params import SamplerSettings
from app.core.tools.checks import tool_problem
from app.core.tools.forced import forced_call_constraint
from app.core.tools.history import tool_calls_text, tool_result_text
from app.core.tools.spec import (
    ToolCall,
    ToolChoice,
    ToolChoiceKind,
    ToolError,
    ToolSpec,
    parse_tool_choice,
    parse_tools,
)
from app.server.errors import bad_request
from app.server.response_format import parse_response_format

MAX_STOP = 4
MAX_TOP_LOGPROBS = 20
API_DEFAULT_SAMPLER = SamplerSettings(repeat_penalty=1.0, max_tokens=-1)
NO_TOOLS = ToolChoice(ToolChoiceKind.NONE)

_SPECS = {p.name: p for p in PARAMS}

_ROLES = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT}


class Endpoint(str, enum.Enum):
    """The generating endpoints."""

    CHAT = "chat.completions"
    COMPLETIONS = "completions"


@dataclass(frozen=True)
class ParsedRequest:
    """One checked generation request.

    Attributes:
        endpoint: which endpoint it came to.
        generate: the engine request (``request_id`` 0: the engine client numbers it).
        stream: answer with server-sent events.
        include_usage: a last stream chunk with ``usage`` (``stream_options.include_usage``).
        logprobs: report each token's log-probability.
        top_logprobs: alternatives per token (0-20).
        model: the ``model`` the client named (echoed when the loaded model has no other name).
        tools: the functions offered (chat only; empty: none).
        tool_choice: whether the reply must, may or must not be a call.
    """

    endpoint: Endpoint
    generate: P.Generate
    stream: bool
    include_usage: bool
    logprobs: bool
    top_logprobs: int
    model: str
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = NO_TOOLS

    @property
    def tool_names(self) -> frozenset[str] | None:
        """The names a reply may call (parsed back into ``tool_calls``), or None when no tools are offered."""
        if not self.tools or self.tool_choice.kind is ToolChoiceKind.NONE:
            return None
        return frozenset(t.name for t in self.tools)

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        """The conversation (chat), or the prompt as one user message (completions), for the log."""
        if self.generate.raw_prompt is not None:
            return (ChatMessage(Role.USER, self.generate.raw_prompt),)
        return self.generate.messages


def _number(body: dict[str, Any], name: str, lo: float, hi: float, *, integer: bool = False) -> float | int | None:
    """``body[name]`` checked against ``lo``..``hi`` (None when absent).

    For a sampler field the range is narrowed to the engine's own (:data:`PARAMS`, which
    :meth:`SamplerSettings.validated` checks): one range, in an error that names ``name``.

    Raises:
        ApiError: 400, ``param`` = ``name``: not a number (an integer), or out of range.
    """
    spec = _SPECS.get(name if name != "max_completion_tokens" else "max_tokens")
    if spec is not None:
        lo, hi = max(lo, spec.minimum), min(hi, spec.maximum)
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or (integer and not isinstance(v, int)):
        raise bad_request(f"'{name}' must be {'an integer' if integer else 'a number'}, not {v!r}.", name)
    if not lo <= v <= hi:
        raise bad_request(f"'{name}' = {v} is out of range; it must be between {lo:g} and {hi:g}.", name)
    return v


def _flag(body: dict[str, Any], name: str) -> bool:
    v = body.get(name, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise bad_request(f"'{name}' must be true or false, not {v!r}.", name)
    return v


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    v = body.get("stop")
    if v is None:
        return ()
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise bad_request("'stop' must be a string or a list of strings.", "stop")
    if len(items) > MAX_STOP:
        raise bad_request(f"'stop' takes at most {MAX_STOP} strings; {len(items)} were given.", "stop")
    return tuple(s for s in items if s)


def _sampler(body: dict[str, Any]) -> SamplerSettings:
    s = API_DEFAULT_SAMPLER
    values: dict[str, Any] = {}
    for name, lo, hi in (
        ("temperature", 0.0, 2.0),
        ("top_p", 0.0, 1.0),
        ("min_p", 0.0, 1.0),
        ("presence_penalty", -2.0, 2.0),
        ("frequency_penalty", -2.0, 2.0),
        ("repeat_penalty", 0.0, 2.0),
    ):
        v = _number(body, name, lo, hi)
        if v is not None:
            values[name] = float(v)
    top_k = _number(body, "top_k", 0, float("inf"), integer=True)
    if top_k is not None:
        values["top_k"] = int(top_k)
    seed = _number(body, "seed", 0, 2**32 - 2, integer=True)
    if seed is not None:
        values["seed"] = int(seed)
    for name in ("max_completion_tokens", "max_tokens"):
        v = _number(body, name, 1, float("inf"), integer=True)
        if v is not None:
            values["max_tokens"] = int(v)
            break
    out = SamplerSettings(**{**s.to_dict(), **values})
    try:
        return out.validated()
    except ValueError as exc:
        raise bad_request(f"The sampler settings cannot be used: {exc}.") from None


def _content(msg: dict[str, Any], i: int) -> str:
    c = msg.get("content")
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        parts = []
        for part in c:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad_request(f"messages[{i}].content: only text parts are supported.", f"messages[{i}].content")
            parts.append(part["text"])
        return "".join(parts)
    raise bad_request(f"messages[{i}].content must be a string or a list of text parts.", f"messages[{i}].content")


def _tool_calls(raw: object, i: int) -> list[ToolCall]:
    """An assistant message's ``tool_calls`` (OpenAI's shape; arguments as JSON text)."""
    at = f"messages[{i}].tool_calls"
    if not isinstance(raw, list):
        raise bad_request(f"{at} must be a list of calls.", at)
    calls = []
    for j, c in enumerate(raw):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(c.get("id", ""), str):
            raise bad_request(
                f'{at}[{j}] must be {{"id": ..., "type": "function", "function": {{"name": ..., "arguments": ...}}}}.',
                f"{at}[{j}]",
            )
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            raise bad_request(
                f"{at}[{j}].function.arguments must be JSON text (a string).", f"{at}[{j}].function.arguments"
            )
        calls.append(ToolCall(c.get("id", ""), fn["name"], args))
    return calls


def _messages(body: dict[str, Any]) -> tuple[ChatMessage, ...]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_request("'messages' must be a non-empty list of {role, content} objects.", "messages")
    out: list[ChatMessage] = []
    called: dict[str, str] = {}  # call id -> the function called (named in its result)
    after_tool = False  # the last message written is a tool's result
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise bad_request(f"messages[{i}] must be an object with 'role' and 'content'.", f"messages[{i}]")
        if m.get("role") == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise bad_request(
                    f"messages[{i}] (role \"tool\") needs 'tool_call_id': the id of the call it answers.",
                    f"messages[{i}].tool_call_id",
                )
            text = tool_result_text(called.get(call_id, str(m.get("name") or "")), call_id, _content(m, i))
            if after_tool:  # several results in a row: one user turn, so roles keep taking turns
                text = f"{out.pop().content}\n{text}"
            out.append(ChatMessage(Role.USER, text))
            after_tool = True
            continue
        role = _ROLES.get(m.get("role"))  # type: ignore[arg-type]
        if role is None:
            raise bad_request(
                f"messages[{i}].role {m.get('role')!r} is not supported (system, developer, user, assistant, tool).",
                f"messages[{i}].role",
            )
        content = _content(m, i)
        if role is Role.ASSISTANT and m.get("tool_calls"):
            calls = _tool_calls(m["tool_calls"], i)
            called.update((c.id, c.name) for c in calls)
            content = tool_calls_text(content, calls)
        out.append(ChatMessage(role, content))
        after_tool = False
    return tuple(out)


def _tools(body: dict[str, Any], endpoint: Endpoint) -> tuple[tuple[ToolSpec, ...], ToolChoice]:
    """``tools`` and ``tool_choice`` read and checked (chat only)."""
    if endpoint is not Endpoint.CHAT:
        for name in ("tools", "tool_choice"):
            if body.get(name) is not None:
                raise bad_request(f"'{name}' is for /v1/chat/completions; /v1/completions takes a prompt only.", name)
        return (), NO_TOOLS
    try:
        tools = parse_tools(body.get("tools"))
        choice = parse_tool_choice(body.get("tool_choice"), tools)
    except ToolError as exc:
        raise bad_request(str(exc), exc.param) from None
    if choice.forced:  # the call is sampled under a grammar: each schema must be one it can hold
        for i, tool in enumerate(tools):
            if choice.kind is ToolChoiceKind.FUNCTION and tool.name != choice.name:
                continue
            problem = tool_problem(tool)
            if problem:
                raise bad_request(
                    f"tools[{i}]: {problem}. A forced tool call is sampled under that grammar: drop that part "
                    'from the tool\'s parameters, or use tool_choice "auto" with a model whose chat template '
                    "offers tools.",
                    f"tools[{i}].function.parameters",
                )
    return tools, choice


def _refuse_unsupported(body: dict[str, Any]) -> None:
    n = body.get("n", 1)
    if n not in (1, None):
        raise bad_request("'n' above 1 is not supported: send one request per reply.", "n")
    if body.get("functions") not in (None, []):
        raise bad_request("'functions' (the old form of tools) is not supported: send 'tools' instead.", "functions")


def parse_request(body: object, endpoint: Endpoint) -> ParsedRequest:
    """Check an OpenAI request body and turn it into an engine request.

    Raises:
        ApiError: 400 for anything the endpoint does not take (the message names the field).
    """
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    _refuse_unsupported(body)
    model = body.get("model", "")
    if not isinstance(model, str):
        raise bad_request("'model' must be a string.", "model")
    stream = _flag(body, "stream")
    opts = body.get("stream_options") or {}
    include_usage = bool(isinstance(opts, dict) and opts.get("include_usage") is True)
    sampler = _sampler(body)
    stop = _stop(body)
    constraint = parse_response_format(body)
    tools, tool_choice = _tools(body, endpoint)
    if tool_choice.forced:
        if constraint is not None:
            raise bad_request(
                "'response_format' and a forced 'tool_choice' both set the shape of the reply; send one of them.",
                "response_format",
            )
        constraint = forced_call_constraint(tools, tool_choice)
    if endpoint is Endpoint.CHAT:
        messages = _messages(body)
        logprobs = _flag(body, "logprobs")
        top = _number(body, "top_logprobs", 0, MAX_TOP_LOGPROBS, integer=True)
        top_logprobs = int(top or 0)
        if top_logprobs and not logprobs:
            raise bad_request("'top_logprobs' needs 'logprobs': true.", "top_logprobs")
        raw_prompt = None
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise bad_request("'prompt' must be one non-empty string.", "prompt")
        messages = ()
        raw_prompt = prompt
        lp = _number(body, "logprobs", 0, MAX_TOP_LOGPROBS, integer=True)
        logprobs = lp is not None
        top_logprobs = int(lp or 0)
    gen = P.Generate(
        request_id=0,
        messages=messages,
        sampler=sampler,
        stop_strings=stop,
        top_candidates=max(top_logprobs, 1) if logprobs else 0,
        context_policy=ContextPolicy.STOP.value,
        raw_prompt=raw_prompt,
        candidates_every_token=top_logprobs > 0,
        external=True,
        tools=tools if tool_choice.kind is not ToolChoiceKind.NONE else (),
        tool_choice=tool_choice,
        constraint=constraint,
    )
    return ParsedRequest(endpoint, gen, stream, include_usage, logprobs, top_logprobs, model, tools, tool_choice)

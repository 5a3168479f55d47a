"""A reply read as tool calls: what of a streamed reply may be sent before it is known not to be a
call (:class:`CallWatch`), and the calls in OpenAI's shapes (a message's ``tool_calls``, the
stream's ``delta.tool_calls``).

A forced call (``tool_choice`` "required" or a named function) is held back whole and sent as one
``tool_calls`` delta at the end. With "auto" the reply streams as text once its start cannot begin
a call (a bare JSON call starts with ``{`` or ``[``, Llama 3.1's with ``<|python_tag|>``, Mistral's
with ``[TOOL_CALLS]``, a fenced one with ```` ``` ````); a ``<tool_call>`` tag later in the text
(Hermes / Qwen write some words first) holds back everything from the tag on.
"""

from __future__ import annotations

from typing import Any

from app.core.tools.calls import ParsedReply, parse_tool_calls

_OPENERS = ("{", "[", "<|python_tag|>", "[TOOL_CALLS]", "```", "<tool_call>")
_TAG = "<tool_call>"


class CallWatch:
    """Decides how much of a streamed reply may be sent as text.

    Args:
        names: the tools offered (calls of other names are text).
        forced: the reply is a forced call (nothing is sent as text until it ends).
    """

    def __init__(self, names: frozenset[str], forced: bool) -> None:
        self.names = names
        self._forced = forced
        self._start_decided = False  # the reply's start is known not to open a bare call

    def sendable(self, text: str) -> int:
        """How many characters of ``text`` (the reply so far) may be sent as text now."""
        if self._forced:
            return 0
        if not self._start_decided:
            head = text.lstrip()
            if not head or any(head.startswith(o) or o.startswith(head) for o in _OPENERS):
                return 0
            self._start_decided = True
        tag = text.find(_TAG)
        if tag >= 0:
            return tag
        for k in range(min(len(_TAG) - 1, len(text)), 0, -1):  # a tag maybe begun at the end
            if _TAG.startswith(text[-k:]):
                return len(text) - k
        return len(text)

    def parse(self, text: str) -> ParsedReply:
        """The whole reply's calls (none when it is text)."""
        return parse_tool_calls(text, self.names)


def message_calls(parsed: ParsedReply) -> list[dict[str, Any]]:
    """A message's ``tool_calls``: ``[{"id", "type": "function", "function": {"name", "arguments"}}]``."""
    return [c.openai() for c in parsed.calls]


def delta_calls(parsed: ParsedReply) -> list[dict[str, Any]]:
    """A stream delta's ``tool_calls``: each call whole, with its ``index``."""
    return [{"index": i, **c.openai()} for i, c in enumerate(parsed.calls)]

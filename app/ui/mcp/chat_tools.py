"""``ChatTools``: MCP tools in the chat. A new reply is offered the tools switched on; a call in the reply
is shown to the person (:class:`~app.ui.mcp.confirm.ToolCallDialog`), run on its server when allowed,
and its result (or the server's failure, in words) goes back into the chat as a ``tool_response``
message, after which the reply goes on.

How the tools reach the model (``Generate.tools``): through the chat template when its Jinja reads
``tools`` (the model decides; up to :data:`MAX_ROUNDS` results in a row); otherwise a reply to the
person's message is a forced call (``tool_choice`` required: llama.cpp's grammar sampler makes it a
call of one of the tools) and the reply after a result is free text. Glassbox's messages have three
roles, so a result is a user message (:func:`~app.core.tools.history.tool_result_text`), as llama.cpp's
template polyfills write it. A server that is dead or hangs is a result that says so, and a notice:
the chat goes on. A chat with an output format (JSON, a schema, a grammar) is offered no tools.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from app.core.chat.context import ChatMessage, GenerationStats, Role, StopReason
from app.core.constraint.model import ConstraintKind
from app.core.mcp.offer import ToolOffer
from app.core.tools.calls import parse_tool_calls
from app.core.tools.history import tool_result_text
from app.core.tools.spec import EMPTY_PARAMETERS, NAME_RE, ToolCall, ToolSpec
from app.core.tools.template import template_supports_tools
from app.mcp.values import McpServerError, McpTool, ToolResult
from app.ui.chat.controller import ChatController
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient
from app.ui.mcp.confirm import ToolCallDialog
from app.ui.mcp.servers import McpServers
from app.ui.window.notices import Notices, NoticeTopic

log = logging.getLogger(__name__)

MAX_ROUNDS = 4  # tool results in a row after which a reply is offered no tools (it must answer in words)
DENIED = "The person did not allow this call: the tool was not run."
RESULT_MARK = '{"tool_response"'  # how a tool's result message starts (tool_result_text)


def offered_names(tools: tuple[McpTool, ...]) -> dict[str, McpTool]:
    """The name each tool is offered under: its own when valid (1-64 of ``a-z A-Z 0-9 _ -``) and unique,
    else ``<server>_<tool>`` with other characters made ``_`` (cut to 64)."""
    counts: dict[str, int] = {}
    for tool in tools:
        counts[tool.name] = counts.get(tool.name, 0) + 1
    named: dict[str, McpTool] = {}
    for tool in tools:
        name = tool.name
        if counts[name] > 1 or not NAME_RE.match(name):
            name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{tool.server}_{tool.name}")[:64]
        named.setdefault(name, tool)
    return named


def results_in_a_row(messages: tuple[ChatMessage, ...]) -> int:
    """How many tool results end ``messages`` (the turns since the person last wrote)."""
    n = 0
    for m in reversed(messages):
        if m.role is Role.USER and m.content.startswith(RESULT_MARK):
            n += 1
        elif m.role is Role.USER:
            break
    return n


@dataclass
class _Round:
    """The calls of one reply, run one after the other.

    Attributes:
        conversation_id: the chat the reply belongs to.
        calls: the calls not yet answered (the first one is being confirmed or run).
        results: the answered calls' results, as sent back.
        running: the number of the call running now (0: none); an answer carrying another number is
            not this round's (a call given up with Stop, answering late) and is dropped.
    """

    conversation_id: int
    calls: list[tuple[ToolCall, McpTool]]
    results: list[str] = field(default_factory=list)
    running: int = 0
    future: Future[ToolResult] | None = None  # the running call's answer (cancelled by Stop)


class ChatTools(QObject):
    """Offers the MCP tools to the chat's replies and runs the calls they make.

    Args:
        servers: the MCP connections.
        chat: the chat (its replies, its store, ``send``).
        engine: the engine client (the loaded model's chat template).
        notices: the window's notices (a call running; a server that failed).
        parent: the window (the confirmation dialog's parent).

    Signals:
        round_ended(str): the results of one reply's calls, as sent back into the chat.

    Attributes:
        dialog: the confirmation shown now, or None.
    """

    round_ended = Signal(str)
    _call_done = Signal(object, int, object)  # (Future, call number, conversation id), from a client's thread (queued)

    def __init__(
        self, servers: McpServers, chat: ChatController, engine: EngineClient, notices: Notices, parent: QWidget
    ) -> None:
        super().__init__(parent)
        self._notices = notices
        self._servers = servers
        self._chat = chat
        self._engine = engine
        self._parent = parent
        self._offered: dict[int, dict[str, McpTool]] = {}  # message id -> the tools its reply was offered
        self._round: _Round | None = None
        self._stopped_said = False  # the "Stopped" notice is ChatTools' last TOOL notice (it goes with the turn)
        self._calls_made = 0  # each call run gets the next number (its identity: see _Round.running)
        self.dialog: ToolCallDialog | None = None
        chat.streaming.tool_offer = self.offer
        chat.reply_finished.connect(self._reply_finished)
        chat.conversation_changed.connect(self._drop_stopped_notice)
        self._call_done.connect(self._on_call_done)

    @property
    def busy(self) -> bool:
        """A reply's calls are being confirmed or run."""
        return self._round is not None

    def offer(self, messages: tuple[ChatMessage, ...], message_id: int) -> ToolOffer | None:
        """The tools the reply ``message_id`` to ``messages`` is offered (None: none; see the module)."""
        self._offered.clear()
        self._drop_stopped_notice()  # the next turn starts
        if not self._servers.config.use_in_chats or self._engine.model is None or self._engine.model.remote:
            return None
        if self._chat.chat_settings.current.constraint.kind is not ConstraintKind.NONE:
            return None  # the chat's output format shapes every reply: a call could not be written
        named = offered_names(self._servers.enabled_tools())
        rounds = results_in_a_row(messages)
        if not named or rounds >= MAX_ROUNDS:
            return None
        specs = tuple(ToolSpec(n, t.description, t.input_schema or dict(EMPTY_PARAMETERS)) for n, t in named.items())
        if template_supports_tools(self._chat.chat_template or self._engine.model.chat_template):
            offer = ToolOffer.auto(specs)
        elif rounds:
            return None  # the forced call was made and answered: now the reply in words
        else:
            forced, left_out = ToolOffer.forced_usable(specs)
            if left_out:
                self._show(Severity.WARNING, "Not offered to the model: " + "; ".join(left_out) + ".")
            if forced is None:
                return None
            offer = forced
            named = {n: t for n, t in named.items() if n in {spec.name for spec in forced.tools}}
        self._offered[message_id] = named
        return offer

    def _reply_finished(self, stats: GenerationStats) -> None:
        offered, self._offered = self._offered, {}
        if not offered or StopReason(stats.stop_reason) is StopReason.CANCELLED or self._round is not None:
            return
        ((message_id, named),) = offered.items()
        message = self._chat.store.get_message(message_id)
        parsed = parse_tool_calls(message.content, names=named.keys())
        if not parsed.calls:
            return
        self._round = _Round(message.conversation_id, [(c, named[c.name]) for c in parsed.calls])
        self._next_call()

    def _next_call(self) -> None:
        """Confirm the round's next call, or send its results back into the chat when none is left."""
        r = self._round
        assert r is not None
        if not r.calls:
            self._round = None
            self._send_results(r)
            return
        call, tool = r.calls[0]
        self.dialog = ToolCallDialog(call, tool, self._parent)
        self.dialog.decided.connect(self._decided)
        self.dialog.open()

    def _decided(self, allowed: bool) -> None:
        r = self._round
        dialog, self.dialog = self.dialog, None
        if dialog is not None:
            dialog.deleteLater()
        if r is None:
            return
        call, tool = r.calls[0]
        if not allowed:
            self._record(DENIED)
            return
        client = self._servers.client(tool.server)
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            self._record(f"Error: the arguments are not a JSON object: {call.arguments}")
            return
        if client is None:
            self._record(f"Error: MCP server {tool.server!r} was removed.")
            return
        limit = self._servers.config.call_timeout_s
        self._show(
            Severity.INFO,
            f"Running {tool.name} on MCP server {tool.server!r}… (at most {limit:g} s)",
            [("Stop", self.stop_call)],
        )
        self._calls_made += 1
        number, conversation = self._calls_made, r.conversation_id
        r.running = number
        future = client.call_tool(tool.name, arguments, limit)
        r.future = future
        future.add_done_callback(lambda f: self._call_done.emit(f, number, conversation))

    def stop_call(self) -> None:
        """Give up the round whose call is running (the banner's Stop): its results are not sent to the
        model, the client stops waiting for the call (its future cancelled), and an answer that still
        comes is dropped (the server is not told: MCP has no reliable cancel)."""
        r = self._round
        if r is None or self.dialog is not None:
            return
        self._round = None
        if r.future is not None:
            r.future.cancel()  # the client stops waiting for it (the server's later death is then while idle)
        self._show(Severity.INFO, "Stopped: the tool's result will not go to the model.")
        self._stopped_said = True

    def _show(self, severity: Severity, text: str, actions: list[tuple[str, Callable[[], None]]] | None = None) -> None:
        """A notice about the tools (``NoticeTopic.TOOL``)."""
        self._stopped_said = False
        self._notices.show(NoticeTopic.TOOL, severity, text, actions or [])

    def _drop_stopped_notice(self, *_: object) -> None:
        """Hide the "Stopped" notice when it is still up (the chat changed, or the next turn started)."""
        if self._stopped_said:
            self._stopped_said = False
            self._notices.clear(NoticeTopic.TOOL)

    def _on_call_done(self, future: Future[ToolResult], number: int, conversation_id: int) -> None:
        r = self._round
        if r is None or r.running != number or r.conversation_id != conversation_id:
            log.info("MCP call #%d answered after it was given up: its result is dropped", number)
            return  # stopped meanwhile (its round given up, perhaps another one running now)
        r.running, r.future = 0, None
        _call, tool = r.calls[0]
        self._notices.clear(NoticeTopic.TOOL)
        error = future.exception()
        if isinstance(error, McpServerError):
            self._show(Severity.WARNING, error.message)
            self._record(f"Error: {error.message}")
        elif error is not None:  # the client ends its futures with McpServerError only; kept safe anyway
            log.error("MCP call to %s failed: %r", tool.name, error)
            self._record(f"Error: {error}")
        else:
            result = future.result()
            self._record(f"Error: {result.text}" if result.is_error else result.text)

    def _record(self, content: str) -> None:
        r = self._round
        if r is None:
            return
        call, tool = r.calls.pop(0)
        r.results.append(tool_result_text(tool.name, call.id, content))
        self._next_call()

    def _send_results(self, r: _Round) -> None:
        """The round's results into its chat as one message, and the reply to them asked for."""
        text = "\n".join(r.results)
        self.round_ended.emit(text)
        if self._chat.conversation_id != r.conversation_id:
            self._chat.open_conversation(r.conversation_id)
        if not self._chat.send(text, from_composer=False):
            self._chat.notice.emit(
                Severity.WARNING,
                "The tool's result could not be sent to the model (the engine is busy or no model is loaded); "
                "it is not in the chat.",
                NoticeTopic.GENERAL,
            )

"""MCP tools in the chat (scripted engine, the real test MCP server over stdio): the reply to the person's
message is offered the tools switched on (a forced call for a template without tools), the call is shown
with its exact arguments, runs when allowed, and its result, a refusal, a crash or a hang goes back into
the chat as a tool_response message before the reply goes on in words."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel

from app.core import protocol as P
from app.core.chat.context import Role
from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.mcp.config import McpServerConfig, McpSettings
from app.core.settings import Settings, SettingsStore
from app.core.tools.spec import ToolChoiceKind
from app.mcp.values import ServerState
from app.paths import default_paths
from app.ui.chat.message import result_html
from app.ui.mcp.chat_tools import DENIED, ChatTools
from app.ui.mcp.entry import McpLauncher
from app.ui.window.main_window import MainWindow
from app.ui.window.notices import NoticeTopic
from tests.support.fake_engine import reply
from tests.support.mcp_server import script_path
from tests.support.window import banner_button, close_window, load, make_window, reply_over, send

CONNECT_MS = 20_000
CALL_MS = 20_000


def _window(qtbot, model: Path) -> MainWindow:  # type: ignore[no-untyped-def]
    mcp = McpSettings(call_timeout_s=1.0, use_in_chats=True).with_server(
        McpServerConfig.stdio("calc", f"{sys.executable} {script_path()}")
    )
    SettingsStore(default_paths().ensure().settings_file).save(Settings(mcp=mcp))
    win = make_window(qtbot)
    load(qtbot, win, model)
    launcher = win.findChild(McpLauncher)
    assert launcher is not None and launcher.use_action is not None and launcher.use_action.isChecked()
    client = launcher.servers.client("calc")
    assert client is not None
    qtbot.waitUntil(lambda: client.state is ServerState.CONNECTED, timeout=CONNECT_MS)
    return win


@pytest.mark.parametrize(
    ("call", "allow", "result"),
    [
        ({"name": "add", "arguments": {"a": 2, "b": 3}}, True, "5"),
        ({"name": "echo", "arguments": {"text": "rm -rf ~"}}, False, DENIED),
        ({"name": "crash", "arguments": {}}, True, "Error: MCP server 'calc' stopped during the call to crash"),
        (
            {"name": "hang", "arguments": {}},
            True,
            "Error: MCP server 'calc' did not answer the call to hang within 1 s",
        ),
    ],
    ids=["allowed", "denied", "server-crashes", "server-hangs"],
)
def test_a_tool_call_is_confirmed_run_and_its_result_fed_back(qtbot, tiny_model: Path, call, allow, result) -> None:  # type: ignore[no-untyped-def]
    win = _window(qtbot, tiny_model)
    try:
        tools = win.findChild(ChatTools)
        assert tools is not None
        win.engine.script(reply(json.dumps(call)), reply("Done", "."))
        send(qtbot, win, "Use a tool please")
        first = win.engine.sent(P.Generate)[-1]
        # The tiny model's template has no place for tools: a forced call, constrained to the schema.
        assert first.tool_choice is not None and first.tool_choice.kind is ToolChoiceKind.REQUIRED
        assert {t.name for t in first.tools} == {"add", "echo", "crash", "hang"}
        assert first.constraint is not None and first.constraint.kind is ConstraintKind.JSON_SCHEMA

        qtbot.waitUntil(lambda: tools.dialog is not None and tools.dialog.isVisible())
        dialog = tools.dialog
        assert dialog is not None
        assert json.loads(dialog.arguments.toPlainText()) == call["arguments"]  # the exact arguments
        (dialog.allow_button if allow else dialog.deny_button).click()
        if allow and call["name"] == "hang":  # the person sees the call running, with its limit
            assert win.notices.showing(NoticeTopic.TOOL)
            assert win.banner.text.text() == "Running hang on MCP server 'calc'… (at most 1 s)"

        qtbot.waitUntil(lambda: len(win.engine.sent(P.Generate)) == 2, timeout=CALL_MS)
        qtbot.waitUntil(lambda: reply_over(win) and win.chat_view.messages[-1].text == "Done.", timeout=CALL_MS)
        second = win.engine.sent(P.Generate)[-1]
        fed = second.messages[-1]
        assert fed.role is Role.USER
        response = json.loads(fed.content)["tool_response"]
        assert response["name"] == call["name"] and response["content"].startswith(result)
        assert second.tools == () and second.tool_choice is None  # the reply after the result: in words
        failed = result.startswith("Error")
        assert win.notices.showing(NoticeTopic.TOOL) is failed  # a server's failure is also said in the banner
        if failed:
            assert win.banner.text.text() == response["content"].removeprefix("Error: ")
        # The chat holds it all: the question, the call, the result, the answer.
        texts = [m.text for m in win.chat_view.messages]
        assert texts[-1] == "Done." and texts[-2] == fed.content and json.loads(texts[-3]) == call
        assert win.chat_view.messages[-2].title.text() == f"Tool result · {call['name']}"  # not "You"
        conv = win.chat.conversation_id
        assert conv is not None
        win.chat.open_conversation(conv)  # shown again from the store: the same header
        qtbot.waitUntil(lambda: win.chat_view.messages[-2].title.text() == f"Tool result · {call['name']}")
    finally:
        close_window(win)


def test_tools_are_offered_only_when_switched_on_and_never_with_an_output_format(qtbot, tiny_model: Path) -> None:  # type: ignore[no-untyped-def]
    win = _window(qtbot, tiny_model)
    try:
        launcher = win.findChild(McpLauncher)
        assert launcher is not None and launcher.use_action is not None
        launcher.use_action.setChecked(False)
        assert not win.settings_ctl.settings.mcp.use_in_chats
        send(qtbot, win, "hello")
        assert win.engine.sent(P.Generate)[-1].tools == ()
        # Back on, but the chat has an output format (JSON): its format shapes the reply, no tools.
        launcher.use_action.setChecked(True)
        win.chat.chat_settings.edit_constraint(OutputConstraint(ConstraintKind.JSON))
        send(qtbot, win, "again")
        sent = win.engine.sent(P.Generate)[-1]
        assert sent.tools == () and sent.constraint == OutputConstraint(ConstraintKind.JSON)
        win.chat.chat_settings.edit_constraint(OutputConstraint())
        send(qtbot, win, "and now")
        assert len(win.engine.sent(P.Generate)[-1].tools) == 4
    finally:
        close_window(win)


TOOLS_TEMPLATE = (
    "{% if tools %}<|tools|>{% for t in tools %}{{ t.function.name }} {% endfor %}{% endif %}"
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"
)


def test_a_template_that_reads_tools_gets_them_and_the_model_decides_up_to_four_rounds(qtbot, tiny_model: Path) -> None:  # type: ignore[no-untyped-def]
    win = _window(qtbot, tiny_model)
    try:
        tools = win.findChild(ChatTools)
        assert tools is not None
        win.settings_ctl.apply(lambda s: s.with_chat_template(str(tiny_model), TOOLS_TEMPLATE))
        call = json.dumps({"name": "add", "arguments": {"a": 1, "b": 1}})
        win.engine.script(*[reply(call)] * 5)
        send(qtbot, win, "Keep adding")
        for n in range(1, 5):  # each call allowed; the model keeps calling while it is offered the tools
            qtbot.waitUntil(lambda: tools.dialog is not None and tools.dialog.isVisible(), timeout=CALL_MS)
            assert tools.dialog is not None
            tools.dialog.allow_button.click()
            qtbot.waitUntil(lambda n=n: len(win.engine.sent(P.Generate)) == n + 1, timeout=CALL_MS)
        sent = win.engine.sent(P.Generate)
        # Through the template (auto, no constraint) until 4 results in a row; the 5th reply gets no tools.
        assert all(g.tool_choice is not None and g.tool_choice.kind is ToolChoiceKind.AUTO for g in sent[:4])
        assert all(g.constraint is None for g in sent) and sent[4].tools == ()
        qtbot.waitUntil(lambda: reply_over(win) and not tools.busy, timeout=CALL_MS)
        assert tools.dialog is None  # a call made without tools offered is not run
        assert [
            json.loads(m.content)["tool_response"]["content"]
            for m in sent[4].messages
            if m.content.startswith('{"tool_response"')
        ] == ["2"] * 4
    finally:
        close_window(win)


def test_stop_in_the_banner_gives_up_a_running_call(qtbot, tiny_model: Path) -> None:  # type: ignore[no-untyped-def]
    win = _window(qtbot, tiny_model)
    try:
        tools = win.findChild(ChatTools)
        launcher = win.findChild(McpLauncher)
        assert tools is not None and launcher is not None
        launcher.servers.set_call_timeout(60)
        win.engine.script(reply(json.dumps({"name": "hang", "arguments": {}})))
        send(qtbot, win, "Wait for it")
        qtbot.waitUntil(lambda: tools.dialog is not None and tools.dialog.isVisible())
        assert tools.dialog is not None
        tools.dialog.allow_button.click()
        assert win.banner.text.text() == "Running hang on MCP server 'calc'… (at most 60 s)"
        banner_button(win, "Stop").click()
        assert not tools.busy and win.banner.text.text().startswith("Stopped: the tool's result will not go")
        assert len(win.engine.sent(P.Generate)) == 1 and win.chat_view.messages[-1].text.startswith('{"name": "hang"')
        client = launcher.servers.client("calc")
        assert client is not None
        qtbot.waitUntil(lambda: not client._pending)  # the client no longer waits for it (review 24 #5)
    finally:
        close_window(win)  # the call still in flight ends with the server, and is dropped


def test_a_stopped_calls_late_answer_is_dropped_not_given_to_the_next_call(qtbot, tiny_model: Path) -> None:  # type: ignore[no-untyped-def]
    """Review 24 #1: call #1 (answers after 1 s) given up with Stop, then in a new chat call #2 (answers after
    2.5 s) allowed: call #1's answer comes while call #2 runs, and must not become call #2's result."""
    win = _window(qtbot, tiny_model)
    try:
        tools = win.findChild(ChatTools)
        launcher = win.findChild(McpLauncher)
        assert tools is not None and launcher is not None
        launcher.servers.set_call_timeout(30)
        first = json.dumps({"name": "hang", "arguments": {"seconds": 1}})
        second = json.dumps({"name": "hang", "arguments": {"seconds": 2.5}})
        win.engine.script(reply(first), reply(second), reply("Done", "."))
        send(qtbot, win, "Call it first")
        qtbot.waitUntil(lambda: tools.dialog is not None and tools.dialog.isVisible())
        assert tools.dialog is not None
        tools.dialog.allow_button.click()
        first_chat = win.chat.conversation_id
        banner_button(win, "Stop").click()
        win.chat.new_chat()
        send(qtbot, win, "Call it second")
        qtbot.waitUntil(lambda: tools.dialog is not None and tools.dialog.isVisible())
        assert tools.dialog is not None
        tools.dialog.allow_button.click()
        qtbot.waitUntil(lambda: len(win.engine.sent(P.Generate)) == 3, timeout=CALL_MS)
        fed = win.engine.sent(P.Generate)[-1].messages[-1]
        # Its own answer (the server counts from #1 or #2: Stop may cancel call #1 before it reaches the server).
        assert json.loads(fed.content)["tool_response"]["content"].startswith("woke after 2.5 s (call #")
        assert win.chat.conversation_id != first_chat  # the result went to the second chat, where it was called
        qtbot.waitUntil(lambda: reply_over(win) and not tools.busy, timeout=CALL_MS)
    finally:
        close_window(win)


@pytest.mark.parametrize("then", ["next-turn", "new-chat"])
def test_the_stopped_notice_goes_with_the_next_turn_or_another_chat(qtbot, tiny_model: Path, then: str) -> None:  # type: ignore[no-untyped-def]
    """Review 24 #4: "Stopped: the tool's result will not go to the model." is about that call only."""
    win = _window(qtbot, tiny_model)
    try:
        tools = win.findChild(ChatTools)
        launcher = win.findChild(McpLauncher)
        assert tools is not None and launcher is not None
        launcher.servers.set_call_timeout(60)
        win.engine.script(reply(json.dumps({"name": "hang", "arguments": {}})), reply("Fine", "."))
        send(qtbot, win, "Wait for it")
        qtbot.waitUntil(lambda: tools.dialog is not None and tools.dialog.isVisible())
        assert tools.dialog is not None
        tools.dialog.allow_button.click()
        banner_button(win, "Stop").click()
        assert win.notices.showing(NoticeTopic.TOOL) and win.banner.text.text().startswith("Stopped:")
        if then == "new-chat":
            win.chat.new_chat()
        else:
            send(qtbot, win, "Never mind")
            qtbot.waitUntil(lambda: reply_over(win) and win.chat_view.messages[-1].text == "Fine.", timeout=CALL_MS)
        assert not win.notices.showing(NoticeTopic.TOOL)
    finally:
        close_window(win)


@pytest.mark.parametrize(
    ("echoed", "shown"),
    [
        ('line one\nline "two"', 'line one\nline "two"'),  # text as text, not one escaped line
        ('{"rows":[1,2]}', '{\n  "rows": [\n    1,\n    2\n  ]\n}'),  # JSON indented
    ],
    ids=["text", "json"],
)
def test_the_call_shows_as_written_and_its_result_readably(qtbot, tiny_model: Path, echoed: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    """Review 24 #6: the dialog shows the arguments character for character (and indented in a second tab);
    the chat shows the result's content readably, while the model gets the tool_response message as it is."""
    win = _window(qtbot, tiny_model)
    try:
        tools = win.findChild(ChatTools)
        assert tools is not None
        arguments = '{"text":' + json.dumps(echoed) + "}"  # no space after the colon, as a model may write it
        win.engine.script(reply('{"name": "echo", "arguments": ' + arguments + "}"), reply("Done", "."))
        send(qtbot, win, "Echo it")
        qtbot.waitUntil(lambda: tools.dialog is not None and tools.dialog.isVisible())
        dialog = tools.dialog
        assert dialog is not None
        assert dialog.arguments.toPlainText() == arguments  # exactly as written
        assert dialog.indented is not None and json.loads(dialog.indented.toPlainText()) == {"text": echoed}
        dialog.allow_button.click()
        qtbot.waitUntil(lambda: reply_over(win) and win.chat_view.messages[-1].text == "Done.", timeout=CALL_MS)
        fed = win.engine.sent(P.Generate)[-1].messages[-1]
        assert json.loads(fed.content)["tool_response"]["content"] == echoed  # the model's copy as it was
        result = win.chat_view.messages[-2]
        assert result.text == fed.content  # stored and copied as it was...
        assert isinstance(result.body, QLabel) and result.body.text() == result_html(shown)  # ...shown readably
        assert "\n" in result.body.text() and "\\n" not in result.body.text()
    finally:
        close_window(win)

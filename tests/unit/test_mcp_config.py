"""MCP server settings (app/core/mcp/config.py): a command line or a URL checked into a server, the
tools' switches, and the round trip through settings.json with bad entries dropped, not guessed."""

from __future__ import annotations

import json

import pytest

from app.core.mcp.config import (
    DEFAULT_CALL_TIMEOUT_S,
    McpConfigError,
    McpServerConfig,
    McpSettings,
    McpTransport,
)
from app.core.settings import Settings, SettingsStore


def test_a_command_line_is_split_as_a_shell_would_without_running_one() -> None:
    config = McpServerConfig.stdio(" files ", "npx -y @modelcontextprotocol/server-filesystem '/home/me/My notes'")
    assert (config.name, config.transport, config.command) == ("files", McpTransport.STDIO, "npx")
    assert config.args == ("-y", "@modelcontextprotocol/server-filesystem", "/home/me/My notes")
    assert config.command_line == "npx -y @modelcontextprotocol/server-filesystem '/home/me/My notes'"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: McpServerConfig.stdio("x", "npx 'unclosed"), "cannot be read"),
        (lambda: McpServerConfig.stdio("x", "   "), "has no command"),
        (lambda: McpServerConfig.stdio("a/b", "npx"), "without '/'"),
        (lambda: McpServerConfig.stdio("", "npx"), "1-64 characters"),
        (lambda: McpServerConfig.http("web", "localhost:8000/mcp"), "is not an http:// or https:// URL"),
        (lambda: McpServerConfig.http("web", "ftp://host/mcp"), "is not an http:// or https:// URL"),
    ],
)
def test_a_server_that_cannot_be_used_is_refused_in_words(make, says: str) -> None:
    with pytest.raises(McpConfigError, match=says):
        make()


def test_names_are_unique_and_a_removed_server_takes_its_switches_with_it() -> None:
    files = McpServerConfig.stdio("files", "npx server")
    web = McpServerConfig.http("web", "http://127.0.0.1:8000/mcp")
    settings = McpSettings().with_server(files).with_server(web)
    with pytest.raises(McpConfigError, match="already a server called 'files'"):
        settings.with_server(McpServerConfig.stdio("files", "other"))
    settings = settings.with_tool_enabled("files", "write_file", False).with_tool_enabled("web", "fetch", False)
    assert not settings.tool_enabled("files", "write_file") and settings.tool_enabled("files", "read_file")
    assert settings.with_tool_enabled("files", "write_file", True).tool_enabled("files", "write_file")
    settings = settings.without_server("files")
    assert [s.name for s in settings.servers] == ["web"] and settings.disabled_tools == (("web", "fetch"),)


def test_the_settings_survive_a_restart(tmp_path) -> None:
    mcp = (
        McpSettings(call_timeout_s=15.0, use_in_chats=True)
        .with_server(McpServerConfig.stdio("files", "npx -y server ~/notes", env=(("TOKEN", "s3cret"),)))
        .with_server(McpServerConfig.http("web", "https://example.org/mcp"))
        .with_tool_enabled("files", "write_file", False)
    )
    store = SettingsStore(tmp_path / "settings.json")
    store.save(Settings(mcp=mcp))
    assert store.load().mcp == mcp


def test_a_damaged_entry_is_dropped_and_bad_fields_get_defaults(tmp_path) -> None:
    path = tmp_path / "settings.json"
    stored = {
        "mcp": {
            "servers": [
                {"name": "ok", "transport": "stdio", "command": "npx", "args": ["a", 3], "env": {"K": "v", "N": 1}},
                {"name": "ok", "transport": "stdio", "command": "duplicate"},
                {"name": "web", "transport": "http", "url": "not a url"},
                {"name": "what", "transport": "carrier-pigeon"},
                "not an object",
            ],
            "disabled_tools": [["ok", "t"], ["only one"], "x"],
            "call_timeout_s": "soon",
        }
    }
    path.write_text(json.dumps(stored), encoding="utf-8")
    mcp = SettingsStore(path).load().mcp
    assert [(s.name, s.command, s.args, s.env) for s in mcp.servers] == [("ok", "npx", ("a",), (("K", "v"),))]
    assert mcp.disabled_tools == (("ok", "t"),) and mcp.call_timeout_s == DEFAULT_CALL_TIMEOUT_S
    assert Settings.from_dict({}).mcp == McpSettings()


def test_a_forced_offer_leaves_out_a_tool_the_grammar_cannot_express_and_names_it():
    import json

    from app.core.constraint.model import ConstraintKind
    from app.core.mcp.offer import ToolOffer
    from app.core.tools.spec import ToolSpec

    add = ToolSpec("add", "Add two numbers", {"type": "object", "properties": {"a": {"type": "integer"}}})
    roll = ToolSpec(
        "roll", "Roll a die", {"type": "object", "properties": {"sides": {"type": "integer", "minimum": 2}}}
    )
    offer, left_out = ToolOffer.forced_usable((add, roll))
    assert offer is not None and [t.name for t in offer.tools] == ["add"]
    assert offer.constraint is not None and offer.constraint.kind is ConstraintKind.JSON_SCHEMA
    assert "roll" not in json.dumps(json.loads(offer.constraint.text))
    assert len(left_out) == 1 and "'roll'" in left_out[0] and "minimum" in left_out[0]
    none, why = ToolOffer.forced_usable((roll,))
    assert none is None and len(why) == 1

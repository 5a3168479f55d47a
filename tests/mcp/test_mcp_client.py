"""``McpClient`` against a real MCP server (tests/support/mcp_server.py, the SDK's own server) over stdio:
the tool list, calls, a server that crashes mid-call, one that hangs past the time limit, and servers
that will not start. Each failure is an ``McpServerError`` naming the server, never another exception."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from app.core.mcp.config import McpServerConfig, McpSettings
from app.mcp.client import McpClient
from app.mcp.pool import McpPool
from app.mcp.values import McpFailure, McpServerError, ServerState
from tests.support.mcp_server import PIDFILE_ENV, SERVER_NAME, script_path
from tests.support.servers import free_port

WAIT_S = 30.0  # for a future; the events themselves take well under a second here


def _config(name: str = SERVER_NAME) -> McpServerConfig:
    return McpServerConfig.stdio(name, f"{sys.executable} {script_path()}")


def _error(future: object) -> McpServerError:
    exc = future.exception(WAIT_S)  # type: ignore[attr-defined]
    assert isinstance(exc, McpServerError), repr(exc)
    return exc


@pytest.fixture
def client() -> Iterator[McpClient]:
    states: list[ServerState] = []
    c = McpClient(_config(), on_state=states.append)
    c.states = states  # type: ignore[attr-defined]
    c.start().result(WAIT_S)
    yield c
    assert c.close(WAIT_S), "the client's thread did not end"


def test_lists_the_servers_tools_with_descriptions_and_schemas(client: McpClient) -> None:
    tools = {t.name: t for t in client.tools}
    assert set(tools) == {"add", "echo", "crash", "hang"}
    assert tools["add"].description == "Add two whole numbers."
    assert tools["add"].server == SERVER_NAME
    schema = tools["add"].input_schema
    assert schema["type"] == "object" and set(schema["required"]) == {"a", "b"}
    assert schema["properties"]["a"]["type"] == "integer"
    assert client.state is ServerState.CONNECTED
    assert client.states == [ServerState.CONNECTING, ServerState.CONNECTED]  # type: ignore[attr-defined]
    assert {t.name for t in client.list_tools().result(WAIT_S)} == set(tools)


def test_calls_a_tool_and_returns_its_result_as_text(client: McpClient) -> None:
    result = client.call_tool("add", {"a": 2, "b": 40}).result(WAIT_S)
    assert (result.text, result.is_error, result.tool, result.server) == ("42", False, "add", SERVER_NAME)
    assert 0 < result.seconds < WAIT_S
    assert client.call_tool("echo", {"text": "naïve — 日本語"}).result(WAIT_S).text == "naïve — 日本語"


def test_a_tool_that_rejects_its_arguments_answers_an_error_result_not_an_exception(client: McpClient) -> None:
    result = client.call_tool("add", {"a": 2, "b": "two"}).result(WAIT_S)
    assert result.is_error and "b" in result.text
    assert client.state is ServerState.CONNECTED


def test_a_server_that_crashes_mid_call_is_reported_by_name_and_marked_stopped(client: McpClient) -> None:
    error = _error(client.call_tool("crash", {}))
    assert error.failure is McpFailure.DIED and error.server == SERVER_NAME
    assert f"{SERVER_NAME!r} stopped during the call to crash" in error.message
    assert client.state is ServerState.STOPPED and client.error == error.message
    # Later calls are refused at once, in words, without reaching a dead process.
    later = _error(client.call_tool("add", {"a": 1, "b": 1}))
    assert later.failure is McpFailure.NOT_CONNECTED and "it stopped" in later.message


def test_a_call_past_its_time_limit_is_reported_and_the_server_stays_usable(client: McpClient) -> None:
    t0 = time.perf_counter()
    error = _error(client.call_tool("hang", {}, timeout_s=0.5))
    waited = time.perf_counter() - t0
    assert error.failure is McpFailure.TIMED_OUT
    assert f"{SERVER_NAME!r} did not answer the call to hang within 0.5 s" in error.message
    assert 0.5 <= waited < 5.0
    assert client.state is ServerState.CONNECTED
    assert client.call_tool("add", {"a": 1, "b": 2}).result(WAIT_S).text == "3"


def test_closing_ends_a_call_in_flight_and_refuses_new_ones() -> None:
    client = McpClient(_config())
    client.start().result(WAIT_S)
    pending = client.call_tool("hang", {}, timeout_s=60)
    assert client.close(WAIT_S)
    assert _error(pending).failure is McpFailure.NOT_CONNECTED
    assert _error(client.call_tool("add", {"a": 1, "b": 1})).failure is McpFailure.NOT_CONNECTED
    assert client.state is ServerState.CLOSED


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("/no/such/mcp-server --stdio", "could not start: its command /no/such/mcp-server was not found"),
        (
            f"{sys.executable} -c \"import sys; sys.stderr.write('missing API key\\n'); sys.exit(2)\"",
            "closed the connection while starting: check its command or URL. Its last output: missing API key",
        ),
        # Reads its stdin and never answers; ends when it closes (no kill needed).
        (f'{sys.executable} -c "import sys; sys.stdin.read()"', "did not answer MCP's handshake within 1 s"),
    ],
    ids=["not-found", "exits", "silent"],
)
def test_a_server_that_will_not_start_is_reported_by_name(command: str, says: str) -> None:
    client = McpClient(McpServerConfig.stdio("broken", command), connect_timeout_s=1.0)
    error = _error(client.start())
    assert error.failure is McpFailure.WONT_START and error.server == "broken"
    assert error.message.startswith("MCP server 'broken' ") and says in error.message
    assert client.state is ServerState.FAILED
    assert _error(client.call_tool("add", {})).failure is McpFailure.NOT_CONNECTED
    assert client.close(WAIT_S)


def test_an_http_url_where_nothing_listens_is_reported_by_name() -> None:
    client = McpClient(McpServerConfig.http("web", "http://127.0.0.1:9/mcp"), connect_timeout_s=5.0)
    error = _error(client.start())
    assert error.failure is McpFailure.WONT_START and error.message.startswith("MCP server 'web' could not start")
    assert client.close(WAIT_S)


def test_the_pool_follows_the_settings_and_offers_only_connected_tools_switched_on() -> None:
    events: list[tuple[str, ServerState]] = []
    pool = McpPool(on_state=lambda name, state: events.append((name, state)))
    settings = McpSettings().with_server(_config("one")).with_server(_config("two"))
    settings = settings.with_tool_enabled("one", "crash", False).with_tool_enabled("two", "hang", False)
    try:
        pool.apply(settings)
        for client in pool.clients:
            client.start().result(WAIT_S)
        offered = {(t.server, t.name) for t in pool.enabled_tools(settings)}
        assert offered == {("one", n) for n in ("add", "echo", "hang")} | {("two", n) for n in ("add", "echo", "crash")}
        first = pool.client("one")
        pool.apply(settings.without_server("two"))  # "one" keeps its connection, "two" is closed
        assert pool.client("one") is first and pool.client("two") is None
        assert [c.name for c in pool.clients] == ["one"] and ("two", ServerState.CLOSED) in events
        pool.reconnect("one")
        assert pool.client("one") is not first and first is not None and first.state is ServerState.CLOSED
    finally:
        assert pool.close_all()
    assert pool.clients == ()


def test_a_streamable_http_server_lists_calls_and_is_reported_when_it_goes_away() -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(script_path()), "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    client = McpClient(McpServerConfig.http("web", f"http://127.0.0.1:{port}/mcp"))
    try:
        deadline = time.monotonic() + WAIT_S
        while True:  # until uvicorn listens (about 1.5 s here)
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the HTTP test server did not start"
                time.sleep(0.05)
        assert {t.name for t in client.start().result(WAIT_S)} == {"add", "echo", "crash", "hang"}
        assert client.call_tool("add", {"a": 20, "b": 22}).result(WAIT_S).text == "42"
        server.kill()
        server.wait(WAIT_S)
        error = _error(client.call_tool("add", {"a": 1, "b": 1}, timeout_s=5))
        assert error.failure is McpFailure.DIED and "'web' stopped during the call to add" in error.message
        assert client.state is ServerState.STOPPED
    finally:
        server.kill()
        server.wait(WAIT_S)
        assert client.close(WAIT_S)


def test_the_window_does_not_load_the_sdk_until_a_server_starts() -> None:
    """The SDK takes about 1 s to import here: the window's MCP parts load it on the first client's thread."""
    code = (
        "import sys\n"
        "import app.ui.window.compose, app.ui.mcp.entry, app.ui.mcp.chat_tools, app.mcp.pool\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('mcp', 'mcp_types', 'httpx2')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_server_that_dies_while_idle_shows_as_stopped_without_a_call(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pidfile = tmp_path / "server.pid"
    config = McpServerConfig.stdio("idle", f"{sys.executable} {script_path()}", env=((PIDFILE_ENV, str(pidfile)),))
    stopped = threading.Event()
    client = McpClient(config, ping_every_s=0.1, on_state=lambda s: stopped.set() if s is ServerState.STOPPED else None)
    try:
        client.start().result(WAIT_S)
        assert client.state is ServerState.CONNECTED
        os.kill(int(pidfile.read_text(encoding="utf-8")), signal.SIGKILL)
        assert stopped.wait(WAIT_S), "the dead server still shows as connected"
        assert client.error.startswith("MCP server 'idle' stopped (its connection closed while it was idle)")
        assert _error(client.call_tool("add", {"a": 1, "b": 1})).failure is McpFailure.NOT_CONNECTED
    finally:
        assert client.close(WAIT_S)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_closing_during_the_handshake_ends_the_servers_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Review 24 #2: a command that never speaks MCP (it sleeps, deaf to its stdin closing), closed while the
    handshake waits (60 s limit): the process is stopped, not left an orphan."""
    pidfile = tmp_path / "server.pid"
    silent = f"{sys.executable} -c \"import os, time; open(os.environ['PIDFILE'], 'w').write(str(os.getpid())); time.sleep(3600)\""
    pool = McpPool()
    pool.apply(McpSettings().with_server(McpServerConfig.stdio("mute", silent, env=(("PIDFILE", str(pidfile)),))))
    deadline = time.monotonic() + WAIT_S
    while not (pidfile.exists() and pidfile.read_text(encoding="utf-8")) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text(encoding="utf-8"))
    client = pool.client("mute")
    assert client is not None and client.state is ServerState.CONNECTING and not _gone(pid)
    try:
        assert pool.close_all(), "the client's thread did not end within the pool's 8 s"
        assert _gone(pid), "the server's process outlived its client"
    finally:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_call_cut_short_by_removing_its_server_says_it_was_removed() -> None:
    """Review 24 #3: not "it was disconnected: reconnect it", since there is nothing left to reconnect."""
    pool = McpPool()
    settings = McpSettings().with_server(_config("mine"))
    pool.apply(settings)
    client = pool.client("mine")
    assert client is not None
    try:
        client.start().result(WAIT_S)
        pending = client.call_tool("hang", {}, timeout_s=60)
        pool.apply(settings.without_server("mine"))
        error = _error(pending)
        assert error.failure is McpFailure.NOT_CONNECTED
        assert error.message == "MCP server 'mine' is not connected: it was removed in Tools → MCP servers."
    finally:
        assert pool.close_all()


def test_a_server_that_dies_after_its_call_was_given_up_is_reported_as_stopped_while_idle(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Review 24 #5: a call given up (the chat's Stop cancels its future), then the server killed: no call
    is in flight, so not "stopped during the call to hang"."""
    pidfile = tmp_path / "server.pid"
    config = McpServerConfig.stdio("idle", f"{sys.executable} {script_path()}", env=((PIDFILE_ENV, str(pidfile)),))
    stopped = threading.Event()
    client = McpClient(config, ping_every_s=1.0, on_state=lambda s: stopped.set() if s is ServerState.STOPPED else None)
    try:
        client.start().result(WAIT_S)
        given_up = client.call_tool("hang", {}, timeout_s=60)
        assert given_up.cancel()
        deadline = time.monotonic() + 2.0
        while client._pending and time.monotonic() < deadline:  # the client lets it go (at once)
            time.sleep(0.01)
        os.kill(int(pidfile.read_text(encoding="utf-8")), signal.SIGKILL)
        assert stopped.wait(WAIT_S), "the dead server still shows as connected"
        assert client.error.startswith("MCP server 'idle' stopped (its connection closed while it was idle)")
    finally:
        assert client.close(WAIT_S)

"""``McpClient``: one MCP server's connection on a thread of its own, answering with futures.

The SDK is asyncio (anyio); the window is Qt. Each client runs ``asyncio.run`` on its own daemon
thread (``glassbox-mcp-<name>``): it opens the transport (a stdio command started, or a
streamable-HTTP URL), runs the handshake and lists the tools, then keeps the session until
:meth:`McpClient.close` or the server's death. Every request returns a
:class:`concurrent.futures.Future` that ends with a value or a
:class:`~app.mcp.values.McpServerError` naming the server; no other exception leaves a client, and
its thread never dies with one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, InvalidStateError
from typing import Any, TextIO, TypeVar, cast

from app.core.mcp.config import DEFAULT_CALL_TIMEOUT_S, McpServerConfig
from app.mcp.values import STARTING, CloseReason, McpFailure, McpServerError, McpTool, ServerState, ToolResult

log = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_S = 60.0  # `npx -y some-server` may download the server on its first start
PING_EVERY_S = 15.0  # an idle connection is pinged this often, so a server that died shows as stopped
PING_TIMEOUT_S = 10.0
STDERR_TAIL_CHARS = 600  # of a failed server's stderr, quoted in its error
_T = TypeVar("_T")


class McpClient:
    """One server's connection.

    Args:
        config: the server.
        connect_timeout_s: time for the handshake and the tool list, seconds.
        ping_every_s: how often a connected server is pinged (MCP ``ping``), seconds: one whose
            connection has closed becomes :attr:`ServerState.STOPPED` without waiting for a call.
        on_state: called with the new :class:`ServerState` whenever it changes, on whichever thread
            changed it, under the client's lock (a Qt user emits a signal, queued to the window's
            thread; it must not call back into the client).

    Attributes:
        config: the server.
        tools: its tools once connected (``()`` before).
        error: the last failure's sentence ("" when none).
    """

    def __init__(
        self,
        config: McpServerConfig,
        *,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        on_state: Callable[[ServerState], None] | None = None,
        ping_every_s: float = PING_EVERY_S,
    ) -> None:
        self.config = config
        self.tools: tuple[McpTool, ...] = ()
        self.error = ""
        self._connect_timeout_s = connect_timeout_s
        self._ping_every_s = ping_every_s
        self._on_state = on_state
        self._lock = threading.Lock()
        self._state = ServerState.IDLE
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._closed_for = CloseReason.DISCONNECTED
        self._scope: Any = None  # the open session's anyio CancelScope: close cancels it (a handshake too)
        self._session: Any = None  # the SDK's ClientSession, only touched on the client's thread
        self._pending: set[Future[Any]] = set()
        self._tasks: set[asyncio.Task[None]] = set()  # the requests running, on the client's loop
        self._ready: Future[tuple[McpTool, ...]] = Future()
        self._stderr: TextIO | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def state(self) -> ServerState:
        return self._state

    def start(self) -> Future[tuple[McpTool, ...]]:
        """Start the connection (once); the future ends with the tools, or a
        :attr:`McpFailure.WONT_START` error (the command's last stderr lines quoted)."""
        with self._lock:
            if self._thread is not None or self._state is ServerState.CLOSED:
                return self._ready
            self._thread = threading.Thread(target=self._run, name=f"glassbox-mcp-{self.name}", daemon=True)
            self._set_state(ServerState.CONNECTING)
        self._thread.start()
        return self._ready

    def call_tool(
        self, name: str, arguments: dict[str, Any], timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    ) -> Future[ToolResult]:
        """Call the tool ``name`` with ``arguments`` (a JSON object) within ``timeout_s`` seconds.

        The future ends with a :class:`ToolResult` (``is_error`` when the tool reported one) or a
        :class:`McpServerError`: ``NOT_CONNECTED``, ``TIMED_OUT`` (the server stays connected),
        ``DIED`` (the server is then :attr:`ServerState.STOPPED`), ``REFUSED``. Cancelling the future
        (``future.cancel()``, the chat's Stop) gives the call up: its request is no longer awaited, so
        the server's later death is one while idle, not "during the call" (the server is not told; it
        may go on working).
        """
        doing = f"the call to {name}"

        async def run(session: Any) -> ToolResult:
            from app.mcp import connection  # imported on the client's thread by then (see _run)

            return await connection.call_tool(session, self.name, name, arguments, timeout_s)

        return self._submit(run, doing, timeout_s)

    def list_tools(self) -> Future[tuple[McpTool, ...]]:
        """List the tools again (``tools/list``); the future ends with them or an :class:`McpServerError`."""

        async def run(session: Any) -> tuple[McpTool, ...]:
            from app.mcp import connection

            tools = await connection.list_tools(session, self.name)
            self.tools = tools
            return tools

        return self._submit(run, "listing its tools", self._connect_timeout_s)

    def close(self, wait_s: float = 0.0, reason: CloseReason = CloseReason.DISCONNECTED) -> bool:
        """Close the connection, whatever it is doing (a handshake too): the session's cancel scope is
        cancelled, and the SDK's stdio transport stops the server's process in its shielded shutdown
        (stdin closed, 2 s, then SIGTERM to its process group, 2 s, SIGKILL: about 4 s for a server that
        ignores all but the kill). Calls in flight end with ``NOT_CONNECTED``, saying ``reason``.

        Returns whether the client's thread ended within ``wait_s`` seconds (True when it never started).
        """
        with self._lock:
            loop, thread = self._loop, self._thread
            if self._state is not ServerState.CLOSED:
                self._closed_for = reason
            self._set_state(ServerState.CLOSED)
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(self._cancel)
        if thread is None:
            self._settle_all()
            return True
        thread.join(wait_s)
        return not thread.is_alive()

    # The client's thread ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            # The SDK (pydantic, httpx2...: about 1 s to import here) is loaded on the first client's
            # thread, not at the window's start: a person with no MCP server never pays for it.
            from app.mcp import connection
        except ImportError as exc:
            msg = f"MCP server {self.name!r} could not start: the mcp package could not be loaded ({exc})."
            self._fail(McpServerError(self.name, McpFailure.WONT_START, msg))
            self._settle_all()
            return
        try:
            with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
                self._stderr = cast(TextIO, stderr)
                asyncio.run(self._main())
        except BaseException as exc:  # nothing may end the thread with a traceback
            error = connection.describe(exc, self.name, STARTING, self._connect_timeout_s)
            log.warning("MCP server %r: %s", self.name, error)
            self._fail(error)
        finally:
            self._settle_all()

    async def _main(self) -> None:

        from app.mcp import connection

        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        with self._lock:
            if self._state is ServerState.CLOSED:
                return
            self._loop, self._stop = loop, stop
        assert self._stderr is not None
        try:
            await self._session_until_stopped(stop)
        except BaseException as exc:  # reported, never raised out of the thread
            doing = "its session" if self._ready.done() else STARTING
            error = connection.describe(exc, self.name, doing, self._connect_timeout_s, self._stderr_tail())
            log.warning("MCP server %r: %s", self.name, error)
            self._fail(error)
        finally:
            self._session = None

    def _cancel(self) -> None:
        """On the client's loop: end the session (:meth:`close`)."""
        if self._stop is not None:
            self._stop.set()
        if self._scope is not None:
            self._scope.cancel()

    async def _session_until_stopped(self, stop: asyncio.Event) -> None:
        """Open the session (a stdio server started) and keep it (:meth:`_keep_session`) until ``stop``, its
        death, or :meth:`close`."""
        import anyio

        from app.mcp import connection

        assert self._stderr is not None
        async with connection.open_session(self.config, self._stderr) as session:
            # Cancelled by close, on this loop, once the process runs (never mid-spawn, where the SDK
            # could lose the process): the SDK's shielded exit then stops it.
            with anyio.CancelScope() as scope:
                self._scope = scope
                if stop.is_set():
                    scope.cancel()
                await self._keep_session(session, stop)
            self._scope = None

    async def _keep_session(self, session: Any, stop: asyncio.Event) -> None:
        """Shake hands, list the tools, then keep the session (pinged) until ``stop`` or its death."""
        import anyio

        from app.mcp import connection

        tools = await connection.handshake(session, self.name, self._connect_timeout_s)
        self._session, self.tools = session, tools
        with self._lock:
            if self._state is ServerState.CONNECTING:  # not closed meanwhile
                self._set_state(ServerState.CONNECTED)
        _settle(self._ready, tools)
        log.info("MCP server %r connected: %d tools", self.name, len(tools))
        while not stop.is_set():
            with anyio.move_on_after(self._ping_every_s):
                await stop.wait()
            if not stop.is_set() and not await connection.alive(session, PING_TIMEOUT_S):
                msg = f"MCP server {self.name!r} stopped (its connection closed while it was idle)."
                tail = self._stderr_tail()
                self._fail(
                    McpServerError(self.name, McpFailure.DIED, msg + (f" Its last output: {tail}" if tail else ""))
                )
                break

    def _submit(self, work: Callable[[Any], Coroutine[Any, Any, _T]], doing: str, timeout_s: float) -> Future[_T]:
        """``work(session)`` run on the client's loop; its errors become :class:`McpServerError`."""
        future: Future[_T] = Future()
        with self._lock:
            loop, connected = self._loop, self._state is ServerState.CONNECTED
            if connected:
                self._pending.add(future)
        if not connected or loop is None:
            _settle(future, self._not_connected())
            return future

        since = self._stderr_size()

        async def run() -> None:
            try:
                session = self._session
                if session is None:
                    raise self._not_connected()
                _settle(future, await work(session))
            except asyncio.CancelledError:
                _settle(future, self._not_connected())
                raise
            except BaseException as exc:  # handed to the future, never raised
                from app.mcp import connection

                if self._state is ServerState.CLOSED:
                    _settle(future, self._not_connected())
                    return
                error = connection.describe(exc, self.name, doing, timeout_s, self._stderr_tail(since))
                if error.failure is McpFailure.DIED:
                    self._fail(error)
                    if self._stop is not None:
                        self._stop.set()  # the transport is torn down and the process reaped
                _settle(future, error)
            finally:
                with self._lock:
                    self._pending.discard(future)

        def begin() -> None:  # on the client's loop
            if future.cancelled():
                with self._lock:
                    self._pending.discard(future)
                return
            task = loop.create_task(run())
            self._tasks.add(task)  # the loop keeps only a weak reference
            task.add_done_callback(self._tasks.discard)
            future.add_done_callback(lambda f: _cancel_soon(loop, task) if f.cancelled() else None)

        try:
            loop.call_soon_threadsafe(begin)
        except RuntimeError:  # the loop ended between the check and the call
            _settle(future, self._not_connected())
        return future

    def _not_connected(self) -> McpServerError:
        state = self._state
        if state is ServerState.CLOSED and self._closed_for is CloseReason.REMOVED:
            msg = f"MCP server {self.name!r} is not connected: it was removed in Tools → MCP servers."
            return McpServerError(self.name, McpFailure.NOT_CONNECTED, msg)
        if state is ServerState.CLOSED and self._closed_for is CloseReason.RESTARTED:
            msg = f"MCP server {self.name!r} is not connected: it was restarted (Reconnect, or its settings changed)."
            return McpServerError(self.name, McpFailure.NOT_CONNECTED, msg)
        why = {
            ServerState.IDLE: "it was not started",
            ServerState.CONNECTING: "it is still starting",
            ServerState.FAILED: "it did not start",
            ServerState.STOPPED: "it stopped",
            ServerState.CLOSED: "it was disconnected",
        }.get(state, "")
        msg = f"MCP server {self.name!r} is not connected ({why}): reconnect it in Tools → MCP servers."
        return McpServerError(self.name, McpFailure.NOT_CONNECTED, msg.replace(" ()", ""))

    def _fail(self, error: McpServerError) -> None:
        """Record ``error``; a client not closed by Glassbox becomes FAILED (never connected) or STOPPED."""
        with self._lock:
            self.error = error.message
            if self._state is ServerState.CONNECTING:
                self._set_state(ServerState.FAILED)
            elif self._state is ServerState.CONNECTED:
                self._set_state(ServerState.STOPPED)
        _settle(self._ready, error)

    def _settle_all(self) -> None:
        """End the start future and every call still pending (the loop is gone)."""
        _settle(self._ready, self._not_connected())
        with self._lock:
            pending, self._pending = self._pending, set()
            if self._state is ServerState.CONNECTED:
                self._set_state(ServerState.STOPPED)
        for future in pending:
            _settle(future, self._not_connected())

    def _set_state(self, state: ServerState) -> None:
        """Change the state (under ``_lock``) and tell ``on_state``."""
        if state is self._state:
            return
        self._state = state
        if self._on_state is not None:
            try:
                self._on_state(state)
            except Exception:  # a listener's bug must not end the client
                log.exception("MCP server %r: state listener failed", self.name)

    def _stderr_size(self) -> int:
        """How many bytes a stdio server has written to stderr so far."""
        stderr = self._stderr
        try:
            return os.fstat(stderr.fileno()).st_size if stderr is not None else 0
        except (OSError, ValueError):
            return 0

    def _stderr_tail(self, since: int = 0) -> str:
        """The last lines a stdio server wrote to stderr after byte ``since`` (at most about 600
        characters, lines joined by " / "), or ""."""
        stderr = self._stderr
        if stderr is None:
            return ""
        try:
            fd = stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(since, size - 4 * STDERR_TAIL_CHARS)
            if hasattr(os, "pread"):  # reads without moving the offset the server's writes share
                raw = os.pread(fd, size - start, start)
            else:  # no pread (Windows)
                stderr.seek(start)
                raw = stderr.read().encode("utf-8")
            text = raw.decode("utf-8", errors="replace")[-STDERR_TAIL_CHARS:]
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return " / ".join(lines[-5:])


def _cancel_soon(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None]) -> None:
    """Cancel ``task`` on ``loop`` (from any thread); nothing when the loop has ended."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(task.cancel)


def _settle(future: Future[Any], outcome: object) -> None:
    """End ``future`` with ``outcome`` (an exception or a value) unless it has already ended."""
    with contextlib.suppress(InvalidStateError):
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

"""The Starlette application: ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``.

Every route needs ``Authorization: Bearer <key>`` (401 otherwise). Errors have OpenAI's body
(:mod:`app.server.errors`): 400 for a bad request, 401 for a wrong key, 503 when no model is
loaded, the person's reply is being written and the busy policy says refuse, or the request was
cancelled in the window; 500 for an engine failure. A client that closes its connection
cancels its request (queued: it never runs; in flight: the engine stops it like Stop).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.tools.spec import ToolChoiceKind
from app.server.embeddings import embeddings_body, parse_embeddings
from app.server.errors import ApiError, bad_request
from app.server.gateway import ApiJob, EmbeddingJob, EngineGateway, ModelCard
from app.server.responses import ReplyBuilder
from app.server.schema import Endpoint, ParsedRequest, parse_request

# Engine failure kinds and the HTTP status each gets.
_FAILED_STATUS = {
    P.FailureKind.CONTEXT_OVERFLOW: 400,
    P.FailureKind.TEMPLATE: 400,
    P.FailureKind.BAD_SETTINGS: 400,
    P.FailureKind.CONSTRAINT: 400,  # a schema the converter refuses (response_format's, a forced tool call's)
    P.FailureKind.NO_MODEL: 503,
    P.FailureKind.BUSY: 503,
    P.FailureKind.CANCELLED: 503,
    P.FailureKind.ENGINE: 503,
}


def _error(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


def failed_error(ev: P.Failed, parsed: ParsedRequest | None = None) -> ApiError:
    """The API error for an engine :class:`~app.core.protocol.Failed`, naming the request field at fault
    (:func:`failed_param`) when ``parsed`` is the request it answers."""
    status = _FAILED_STATUS.get(ev.kind, 500)
    kind = "invalid_request_error" if status == 400 else "server_error"
    param = failed_param(ev, parsed) if parsed is not None and status == 400 else None
    return ApiError(status, ev.message, kind, param, ev.kind)


def failed_param(ev: P.Failed, parsed: ParsedRequest) -> str | None:
    """The field of ``parsed`` an engine refusal is about, or None.

    - ``template`` with tools offered by "auto" (a chat template with no place for them): ``tool_choice``;
    - ``constraint`` with a forced call: ``tools[i].function.parameters`` of the tool the message names
      ("tool 'x': ..."), else ``tool_choice``; without one: ``response_format``.
    """
    if ev.kind is P.FailureKind.TEMPLATE and parsed.tools and parsed.tool_choice.kind is ToolChoiceKind.AUTO:
        return "tool_choice"
    if ev.kind is not P.FailureKind.CONSTRAINT:
        return None
    if not parsed.tool_choice.forced:
        return "response_format"
    for i, tool in enumerate(parsed.tools):
        if ev.message.startswith(f"tool {tool.name!r}:"):
            return f"tools[{i}].function.parameters"
    return "tool_choice"


def _cancelled() -> ApiError:
    return ApiError(
        503,
        "The request was stopped in Glassbox: cancelled in its Server panel, or the model was switched or unloaded.",
        "server_error",
        None,
        "cancelled",
    )


def _sse(obj: dict[str, Any] | str) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


class Api:
    """The routes, bound to one gateway and one API key.

    Args:
        gateway: the engine's owner.
        api_key: the key every request must send.
    """

    def __init__(self, gateway: EngineGateway, api_key: str) -> None:
        self.gateway = gateway
        self.api_key = api_key
        self.open_jobs: set[ApiJob] = set()  # requests being answered (the server thread's loop only)
        self.open_embeds: set[EmbeddingJob] = set()  # embeddings requests waiting for the engine (likewise)

    def end_open_jobs(self, message: str) -> None:
        """Answer every open request with 503 ``message`` and cancel it in the engine (any thread):
        the server is stopping."""
        for job in list(self.open_jobs):
            self.gateway.cancel(job)
            job.deliver(P.Failed(0, P.FailureKind.ENGINE, message))
        for embed in list(self.open_embeds):
            embed.deliver(P.Failed(0, P.FailureKind.ENGINE, message))

    def _check_key(self, request: Request) -> None:
        auth = request.headers.get("authorization", "")
        scheme, _, key = auth.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), self.api_key.encode()):
            raise ApiError(
                401,
                "Incorrect API key. Send the key shown in Glassbox's Server panel as 'Authorization: Bearer <key>'.",
                "authentication_error",
                None,
                "invalid_api_key",
            )

    def _model(self) -> ModelCard:
        model = self.gateway.model()
        if model is None:
            raise ApiError(
                503, "No model is loaded in Glassbox. Load one in the window first.", "server_error", None, "no_model"
            )
        return model

    async def models(self, request: Request) -> Response:
        try:
            self._check_key(request)
        except ApiError as exc:
            return _error(exc)
        model = self.gateway.model()
        data = (
            [{"id": model.id, "object": "model", "created": model.loaded_at, "owned_by": "glassbox"}] if model else []
        )
        return JSONResponse({"object": "list", "data": data})

    async def chat(self, request: Request) -> Response:
        return await self._generate(request, Endpoint.CHAT)

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, Endpoint.COMPLETIONS)

    async def embeddings(self, request: Request) -> Response:
        """``/v1/embeddings`` (:mod:`app.server.embeddings`): the vectors once the engine has them. A
        client that goes away meanwhile cancels its request (the engine stops at its next batch or graph node)."""
        try:
            self._check_key(request)
            try:
                body = json.loads(await request.body() or b"null")
            except ValueError as exc:
                raise bad_request(f"The request body is not valid JSON ({exc}).") from None
            model = self._model()
            parsed = parse_embeddings(body, model.n_embd)
        except ApiError as exc:
            return _error(exc)
        client = f"{request.client.host}:{request.client.port}" if request.client else "?"
        job = EmbeddingJob(parsed, client, asyncio.get_running_loop())
        self.open_embeds.add(job)
        gone = asyncio.ensure_future(_disconnected(request))
        answer = asyncio.ensure_future(job.answer())
        try:
            self.gateway.embed(job)
            await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():
                answer.cancel()
                self.gateway.cancel(job)
                return Response(status_code=499)  # nobody is listening any more
            ev = answer.result()
        finally:
            gone.cancel()
            self.open_embeds.discard(job)
        if isinstance(ev, P.Embedded):
            return JSONResponse(embeddings_body(ev, parsed, model.id))
        if isinstance(ev, P.Failed):
            return _error(failed_error(ev))
        return _error(ApiError(500, f"The engine answered with {type(ev).__name__}.", "server_error"))

    async def _generate(self, request: Request, endpoint: Endpoint) -> Response:
        try:
            self._check_key(request)
            try:
                body = json.loads(await request.body() or b"null")
            except ValueError as exc:
                raise bad_request(f"The request body is not valid JSON ({exc}).") from None
            parsed = parse_request(body, endpoint)
            model = self._model()
        except ApiError as exc:
            return _error(exc)
        client = f"{request.client.host}:{request.client.port}" if request.client else "?"
        job = ApiJob(parsed, client, asyncio.get_running_loop())
        self.gateway.submit(job)
        builder = ReplyBuilder(job, model)
        if parsed.stream:
            first: object = None
            if parsed.generate.constraint is not None or parsed.generate.tools:
                # The engine checks a constraint (and that the template can offer the tools) before
                # evaluating anything: a refusal is a 400, not a stream that starts and fails, so the
                # stream waits for the engine's first event.
                self.open_jobs.add(job)
                try:
                    first = await self._first_event(request, job)
                finally:
                    self.open_jobs.discard(job)
                if first is None:
                    return Response(status_code=499)  # nobody is listening any more
                if isinstance(first, P.Failed):
                    return _error(failed_error(first, parsed))
            return StreamingResponse(self._stream(job, builder, first), media_type="text/event-stream")
        self.open_jobs.add(job)
        try:
            return await self._whole(request, job, builder)
        finally:
            self.open_jobs.discard(job)

    async def _first_event(self, request: Request, job: ApiJob) -> object:
        """The job's first event, or None (the job cancelled) when the client goes away first."""
        gone = asyncio.ensure_future(_disconnected(request))
        nxt = asyncio.ensure_future(job.next_event())
        try:
            await asyncio.wait({nxt, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if nxt.done():
            return nxt.result()
        nxt.cancel()
        self.gateway.cancel(job)
        return None

    def _queued_s(self, job: ApiJob, started_ns: int | None) -> float:
        return ((started_ns or job.arrived_ns) - job.arrived_ns) / 1e9

    async def _whole(self, request: Request, job: ApiJob, builder: ReplyBuilder) -> Response:
        """Wait for the whole reply; a client that disconnects meanwhile cancels it."""
        gone = asyncio.ensure_future(_disconnected(request))
        started_ns: int | None = None
        done = False
        try:
            while True:
                nxt = asyncio.ensure_future(job.next_event())
                await asyncio.wait({nxt, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not nxt.done():
                    nxt.cancel()
                    return Response(status_code=499)  # nobody is listening any more
                ev = nxt.result()
                if isinstance(ev, P.PromptPrepared):
                    started_ns = time.perf_counter_ns()
                elif isinstance(ev, P.TokenEvent):
                    builder.take(ev)
                elif isinstance(ev, P.Failed):
                    done = True
                    return _error(failed_error(ev, job.request))
                elif isinstance(ev, P.Finished):
                    done = True
                    if ev.stats.stop_reason is StopReason.CANCELLED:
                        return _error(_cancelled())
                    return JSONResponse(builder.completion(ev, self._queued_s(job, started_ns)))
        finally:
            gone.cancel()
            if not done:
                self.gateway.cancel(job)

    async def _stream(self, job: ApiJob, builder: ReplyBuilder, first: object = None) -> AsyncIterator[bytes]:
        """Server-sent events: chunks as tokens come, the last with finish_reason and timings, then [DONE].

        ``first``: the job's first event when it was read already (a constrained request, :meth:`_generate`).

        The batch of tokens the engine sends (~30 a second) becomes one chunk. When the client
        goes away Starlette stops this generator, and the ``finally`` cancels the request.
        """
        done = False
        started_ns: int | None = None
        self.open_jobs.add(job)
        try:
            if builder.chat:
                yield _sse(builder.first_chunk())
            batch: list[P.TokenEvent] = []
            while True:
                ev, first = (first, None) if first is not None else (await job.next_event(), None)
                if isinstance(ev, P.TokenEvent):
                    batch.append(ev)
                    if job.has_events():  # more already waiting: send them in one chunk
                        continue
                    chunk = builder.text_chunk(batch)
                    batch = []
                    if chunk is not None:
                        yield _sse(chunk)
                    continue
                if batch:
                    chunk = builder.text_chunk(batch)
                    batch = []
                    if chunk is not None:
                        yield _sse(chunk)
                if isinstance(ev, P.PromptPrepared):
                    started_ns = time.perf_counter_ns()
                elif isinstance(ev, P.Failed):
                    done = True
                    yield _sse(failed_error(ev, job.request).body())
                    break
                elif isinstance(ev, P.Finished):
                    done = True
                    if ev.stats.stop_reason is StopReason.CANCELLED:
                        yield _sse(_cancelled().body())
                        break
                    for chunk in builder.call_chunks(ev):
                        yield _sse(chunk)
                    yield _sse(builder.last_chunk(ev, self._queued_s(job, started_ns)))
                    if job.request.include_usage:
                        yield _sse(builder.usage_chunk(ev))
                    break
            yield _sse("[DONE]")
        finally:
            self.open_jobs.discard(job)
            if not done:
                self.gateway.cancel(job)


async def _disconnected(request: Request) -> None:
    """Returns when the client has closed the connection (the body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def build_app(gateway: EngineGateway, api_key: str, cors_origins: tuple[str, ...] = ()) -> Starlette:
    """The ASGI application.

    Args:
        gateway: the engine's owner.
        api_key: the key every request must send (must not be empty).
        cors_origins: origins browsers may call from; empty: no CORS headers at all.

    Raises:
        ValueError: ``api_key`` is empty.
    """
    if not api_key:
        raise ValueError("the local API needs an API key")
    api = Api(gateway, api_key)
    middleware = (
        [
            Middleware(
                CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"], allow_headers=["*"]
            )
        ]
        if cors_origins
        else []
    )

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(ApiError(404, f"There is no {request.method} {request.url.path} here.", code="not_found"))

    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {404: not_found, 405: not_found}
    routes = [
        Route("/v1/models", api.models, methods=["GET"]),
        Route("/v1/chat/completions", api.chat, methods=["POST"]),
        Route("/v1/completions", api.completions, methods=["POST"]),
        Route("/v1/embeddings", api.embeddings, methods=["POST"]),
    ]
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
    app.state.api = api
    return app

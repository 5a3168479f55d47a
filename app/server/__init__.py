"""The local OpenAI-compatible API: Starlette on uvicorn, in the window process.

Plain Python, no Qt and no llama.cpp: requests become :class:`~app.core.protocol.Generate`
requests handed to an :class:`~app.server.gateway.EngineGateway` (the window's
:mod:`app.ui.server` bridge, which queues them on the one engine client), and the engine's
events come back through a thread-safe channel.
"""

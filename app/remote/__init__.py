"""Remote engines: an OpenAI-compatible server (llama-server, vLLM, Ollama...) used as the engine.

Plain Python on the standard library's ``http.client``: no Qt, no llama.cpp (import-linter contract
in pyproject.toml). :mod:`app.remote.http` makes the requests and names each failure,
:mod:`app.remote.probe` is the connection test, :mod:`app.remote.generation` turns a streamed reply
into the protocol's events, :mod:`app.remote.host` puts it behind the engine host's interface.
"""

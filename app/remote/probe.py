"""The connection test: is there an OpenAI-compatible server at this address, and what does it tell us?

:func:`probe` asks ``GET <base>/models`` (every OpenAI-compatible server has it; some state the model's context size
there), then, to learn
whether it is llama.cpp's llama-server, ``GET <root>/props`` (n_ctx, chat template, build) and a
``POST <root>/tokenize``. Each failure is a :class:`~app.remote.http.RemoteError` with its
:class:`~app.core.remote.ConnectionFailure` kind and a message for people.
"""

from __future__ import annotations

import time
from typing import Any

from app.core.remote import ConnectionFailure, RemoteEndpoint, RemoteFacts, ServerKind
from app.remote.http import RemoteError, get_json, post_json

PROBE_TIMEOUT_S = 15.0


def _model_entries(data: Any, url: str) -> dict[str, dict[str, Any]]:
    """OpenAI's model list ``{"object": "list", "data": [{"id": ...}, ...]}`` as ``{id: entry}``, in order."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise RemoteError(
            ConnectionFailure.NOT_OPENAI,
            f"{url} answered with JSON, but not an OpenAI model list (no 'data' list): this is not an "
            "OpenAI-compatible API, or the path is not its /v1.",
        )
    return {m["id"]: m for m in items if isinstance(m, dict) and isinstance(m.get("id"), str)}


def listed_n_ctx(entry: dict[str, Any]) -> int:
    """A context size a model list entry states: vLLM's ``max_model_len``, llama-server's ``meta.n_ctx``,
    LM Studio's ``max_context_length``; 0 when it states none."""
    meta = entry.get("meta")
    for v in (
        entry.get("max_model_len"),
        meta.get("n_ctx") if isinstance(meta, dict) else None,
        entry.get("max_context_length"),
        entry.get("context_length"),
    ):
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 0


def _llama_server_props(endpoint: RemoteEndpoint) -> dict[str, Any] | None:
    """llama-server's ``/props``, or None when the server has no such route (another server)."""
    try:
        props = get_json(endpoint, endpoint.server_root + "/props", PROBE_TIMEOUT_S)
    except RemoteError as exc:
        if exc.kind in (ConnectionFailure.WRONG_PATH, ConnectionFailure.NOT_OPENAI, ConnectionFailure.SERVER_ERROR):
            return None
        raise
    if not isinstance(props, dict) or not isinstance(props.get("default_generation_settings"), dict):
        return None
    return props


def _tokenize_works(endpoint: RemoteEndpoint) -> bool:
    try:
        out = post_json(endpoint, endpoint.server_root + "/tokenize", {"content": "a"}, PROBE_TIMEOUT_S)
    except RemoteError:
        return False
    return isinstance(out, dict) and isinstance(out.get("tokens"), list)


def probe(endpoint: RemoteEndpoint) -> RemoteFacts:
    """Test the connection and learn what the server reports.

    Returns:
        The server's :class:`RemoteFacts`; ``model`` is ``endpoint.model`` when the server lists it
        (or lists nothing to choose from), else the first listed id.

    Raises:
        RemoteError: unreachable, TLS, 401, wrong path (404), not OpenAI-compatible, no model.
    """
    url = endpoint.base_url + "/models"
    t0 = time.monotonic()
    entries = _model_entries(get_json(endpoint, url, PROBE_TIMEOUT_S), url)
    models = tuple(entries)
    latency = time.monotonic() - t0
    if endpoint.model:
        if models and endpoint.model not in models:
            raise RemoteError(
                ConnectionFailure.NO_MODEL,
                f"The server does not serve {endpoint.model!r}; it lists: {', '.join(models[:8])}.",
            )
        model = endpoint.model
    elif models:
        model = models[0]
    else:
        raise RemoteError(ConnectionFailure.NO_MODEL, f"{url} lists no model: load one on the server first.")
    props = _llama_server_props(endpoint)
    listed = listed_n_ctx(entries.get(model, {}))
    if props is None:
        return RemoteFacts(
            endpoint.base_url, ServerKind.OPENAI_COMPATIBLE, models, model, n_ctx=listed, latency_s=latency
        )
    settings = props["default_generation_settings"]
    n_ctx = settings.get("n_ctx")
    template = props.get("chat_template")
    return RemoteFacts(
        endpoint.base_url,
        ServerKind.LLAMA_SERVER,
        models,
        model,
        n_ctx=n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else listed,
        can_tokenize=_tokenize_works(endpoint),
        chat_template=template if isinstance(template, str) and template else None,
        build_info=str(props.get("build_info") or ""),
        model_path=str(props.get("model_path") or ""),
        latency_s=latency,
    )

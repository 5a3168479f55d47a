"""A remote engine: an OpenAI-compatible server (llama-server, vLLM, Ollama...) instead of the local llama.cpp.

The values here are shared by the settings, the protocol (:attr:`app.core.protocol.ModelLoaded.remote`),
the HTTP side (:mod:`app.remote`) and the window. Plain Python.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit


class ServerKind(str, enum.Enum):
    """What answers at the URL, as far as the connection test could tell."""

    LLAMA_SERVER = "llama-server"  #: llama.cpp's server: /props, /tokenize, /apply-template and ``timings``
    OPENAI_COMPATIBLE = "openai-compatible"  #: any other server speaking OpenAI's /v1 API

    @property
    def label(self) -> str:
        return "llama.cpp's llama-server" if self is ServerKind.LLAMA_SERVER else "an OpenAI-compatible server"


class ConnectionFailure(str, enum.Enum):
    """Why talking to a remote server failed; each has its own message for people."""

    BAD_URL = "bad_url"  #: not an http:// or https:// address
    UNREACHABLE = "unreachable"  #: no answer: wrong host or port, server down, firewall
    TIMEOUT = "timeout"  #: it accepted the connection but did not answer in time
    TLS = "tls"  #: the TLS handshake failed (certificate, or https:// to a plain-HTTP server)
    UNAUTHORIZED = "unauthorized"  #: 401/403: the API key is missing or wrong
    WRONG_PATH = "wrong_path"  #: 404: a web server answers, but not an OpenAI API at this path
    NOT_OPENAI = "not_openai"  #: it answers, but not with OpenAI-shaped JSON
    NO_MODEL = "no_model"  #: the server lists no model (or not the one asked for)
    SERVER_ERROR = "server_error"  #: the server answered with an error (5xx, 4xx other than the above)


@dataclass(frozen=True)
class RemoteSettings:
    """The remote engine the person set up in the Models page (stored in settings.json under ``remote``).

    Attributes:
        url: the OpenAI-compatible base URL, e.g. ``http://gpu-box:8080/v1`` ("" until entered).
        api_key: sent as ``Authorization: Bearer <key>`` ("" = none); stored in settings.json
            in plain text, like the Hub token; never logged or shown.
        model: the model id to ask for ("" = the first the server lists).
    """

    url: str = ""
    api_key: str = ""
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "api_key": self.api_key, "model": self.model}

    @classmethod
    def from_dict(cls, data: object) -> RemoteSettings:
        """From stored values; a missing or bad field reads as empty."""
        if not isinstance(data, dict):
            return cls()

        def text(key: str) -> str:
            v = data.get(key)
            return v.strip() if isinstance(v, str) else ""

        return cls(url=text("url"), api_key=text("api_key"), model=text("model"))

    def endpoint(self) -> RemoteEndpoint:
        """The endpoint these settings describe (raises :class:`ValueError` for a bad URL)."""
        return RemoteEndpoint(api_base(self.url), self.api_key, self.model)


def api_base(url: str) -> str:
    """The OpenAI base URL for what a person typed: scheme added, no trailing slash, ``/v1`` when no path.

    ``gpu-box:8080`` -> ``http://gpu-box:8080/v1``; ``https://h/api/v1/`` -> ``https://h/api/v1``.

    Raises:
        ValueError: not an http(s) URL with a host.
    """
    text = url.strip()
    if not text:
        raise ValueError("enter the server's address, e.g. http://192.168.1.20:8080/v1")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// address")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"{url!r} has a bad port: {exc}") from None
    path = parts.path.rstrip("/") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class RemoteEndpoint:
    """Where a remote engine is and how to ask it.

    Attributes:
        base_url: the OpenAI base URL (:func:`api_base` form), e.g. ``http://h:8080/v1``.
        api_key: the bearer key ("" = none).
        model: the model id to ask for ("" = the first the server lists).
    """

    base_url: str
    api_key: str = ""
    model: str = ""

    @property
    def server_root(self) -> str:
        """The URL llama-server's own routes hang off (/props, /tokenize): the base without ``/v1``."""
        return self.base_url.removesuffix("/v1")


@dataclass(frozen=True)
class RemoteFacts:
    """What the connection test learnt about a server (also the remote part of ``ModelLoaded``).

    Attributes:
        base_url: the OpenAI base URL.
        kind: a :class:`ServerKind`.
        models: the model ids ``/models`` lists.
        model: the model id replies are asked from.
        n_ctx: context size, tokens (llama-server's ``/props``, else what the model list states, e.g.
            vLLM's ``max_model_len``; 0 = not reported by this server).
        can_tokenize: ``/tokenize`` and ``/apply-template`` work (llama-server): the prompt's
            tokens are shown.
        chat_template: the server's chat template (``/props``), or None when not reported.
        build_info: the server's build (``/props``), "" when not reported.
        model_path: the model file on the server (``/props``), "" when not reported.
        latency_s: seconds the ``/models`` request took (the network plus the server).
    """

    base_url: str
    kind: ServerKind
    models: tuple[str, ...]
    model: str
    n_ctx: int = 0
    can_tokenize: bool = False
    chat_template: str | None = None
    build_info: str = ""
    model_path: str = ""
    latency_s: float = 0.0

    @property
    def engine_label(self) -> str:
        """Who made a reply, for provenance: e.g. ``llama-server b1234 at http://h:8080/v1``."""
        who = "llama-server" if self.kind is ServerKind.LLAMA_SERVER else "OpenAI-compatible server"
        if self.build_info:
            who += f" {self.build_info}"
        return f"{who} at {self.base_url}"


NOT_REPORTED = "not reported by this server"

"""The local API server's settings (the Server panel; stored in settings.json under ``server``)."""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass, replace
from typing import Any

DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"
DEFAULT_PARALLEL = 1  # API requests decoded together (issue 23 §4): one at a time unless the person sets more
# (each sequence holds the loaded n_ctx's KV cache: N times the chat's, not yet in the fit verdict)
MAX_PARALLEL = 16  # app.core.protocol.parallel.MAX_SEQUENCES


class BusyPolicy(str, enum.Enum):
    """What an API request does while the person's own reply is being written."""

    QUEUE = "queue"  # wait in the queue (shown in the Server panel) until the engine is free
    REFUSE = "refuse"  # answer 503 at once, saying the person is using the model


def new_api_key() -> str:
    """A fresh API key: ``gb-`` and 32 random URL-safe characters (192 bits)."""
    return "gb-" + secrets.token_urlsafe(24)


@dataclass(frozen=True)
class ServerSettings:
    """How the local OpenAI-compatible API is served.

    Attributes:
        enabled: serve at all (off by default; switched on in the Server panel).
        port: TCP port, 0-65535 (0: any free port; the Server panel shows which).
        api_key: the key clients send as ``Authorization: Bearer <key>``; generated once and
            stored in settings.json in plain text, like the Hub token. "" until first generated.
        expose_lan: listen on every network interface (0.0.0.0) instead of 127.0.0.1 only;
            anyone on the network who has the key can then use the model.
        cors_origins: origins allowed by CORS (browser pages); empty: CORS off.
        busy_policy: what a request does while the person's reply is being written.
        parallel: API requests decoded together at most, 1 to :data:`MAX_PARALLEL` (llama-server's
            ``--parallel``): each a sequence of a second llama.cpp context with the loaded n_ctx, so its
            KV cache costs ``parallel`` times the chat's; 1: one at a time in the chat context, as before.
    """

    enabled: bool = False
    port: int = DEFAULT_PORT
    api_key: str = ""
    expose_lan: bool = False
    cors_origins: tuple[str, ...] = ()
    busy_policy: BusyPolicy = BusyPolicy.QUEUE
    parallel: int = DEFAULT_PARALLEL

    def __post_init__(self) -> None:
        # A Qt item's data comes back as plain text ("refuse"): keep the field an enum.
        policy: object = self.busy_policy
        if not isinstance(policy, BusyPolicy):
            object.__setattr__(self, "busy_policy", BusyPolicy(policy))

    @property
    def host(self) -> str:
        """The address to listen on."""
        return ALL_INTERFACES if self.expose_lan else LOOPBACK

    def with_key(self) -> ServerSettings:
        """These settings with an API key (a new one when there is none)."""
        return self if self.api_key else replace(self, api_key=new_api_key())

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "port": self.port,
            "api_key": self.api_key,
            "expose_lan": self.expose_lan,
            "cors_origins": list(self.cors_origins),
            "busy_policy": self.busy_policy.value,
            "parallel": self.parallel,
        }

    @classmethod
    def from_dict(cls, data: object) -> ServerSettings:
        """From stored values; a missing or bad field gets its default."""
        if not isinstance(data, dict):
            return cls()
        d = cls()
        port = data.get("port")
        origins = data.get("cors_origins")
        try:
            policy = BusyPolicy(data.get("busy_policy", d.busy_policy.value))
        except ValueError:
            policy = d.busy_policy
        key = data.get("api_key")
        parallel = data.get("parallel")
        return cls(
            enabled=data.get("enabled") is True,
            port=port if isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535 else d.port,
            api_key=key.strip() if isinstance(key, str) else "",
            expose_lan=data.get("expose_lan") is True,
            cors_origins=tuple(o for o in origins if isinstance(o, str) and o.strip())
            if isinstance(origins, list)
            else (),
            busy_policy=policy,
            parallel=parallel
            if isinstance(parallel, int) and not isinstance(parallel, bool) and 1 <= parallel <= MAX_PARALLEL
            else d.parallel,
        )

"""The Hub's HTTP side: errors in words, token scrubbing, and a fail-fast shared client.

Offline and unreachable Hub (case H3): with ``HF_HUB_OFFLINE`` set, every
:class:`~app.core.models.hub.HubClient` method raises :class:`HubOfflineError` before any
network use. When the Hub cannot be reached, huggingface_hub's own retry loop
(``http_backoff``: five retries, 23 s of sleeps) would make a search hang;
:func:`install_http_client` gives huggingface_hub's shared ``httpx`` client a
connect timeout (:data:`CONNECT_TIMEOUT`) and turns a failed *connect* into
:class:`HubOfflineError`, which huggingface_hub does not retry. Reads that stall
after connecting still time out (:data:`READ_TIMEOUT`).

Gated and private repositories (H4): a 401 or 403 raises :class:`HubAuthError`
whose message says that a Hugging Face token and accepting the model's licence
are needed, with the repository page's URL. Tokens never appear in messages or
logs: messages are written here, and anything quoted from elsewhere goes
through :func:`scrub`. :func:`translate_error` turns huggingface_hub's and
httpx's exceptions into :class:`HubError` subclasses.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING, Any

from huggingface_hub import constants
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from huggingface_hub.utils import _http as _hf_http
from huggingface_hub.utils import set_client_factory

# The HTTP library huggingface_hub's session is built on: httpx2 in huggingface_hub 2.x, httpx in 1.x
# (same API). Exceptions must be caught from the very module the session raises them from. The type
# checker reads httpx2's types (installed with huggingface_hub 2.x); at run time it is whichever one
# huggingface_hub imported.
if TYPE_CHECKING:
    import httpx2 as httpx2  # re-exported: the download transfer catches the same exceptions
else:
    httpx2 = getattr(_hf_http, "httpx2", None) or _hf_http.httpx

CONNECT_TIMEOUT = 5.0  # seconds to open a connection before calling the Hub unreachable
READ_TIMEOUT = 30.0  # seconds without a byte before a read fails
HUB_WEBSITE = "https://huggingface.co"
LIBRARY_NAME = "glassbox"


# --- errors --------------------------------------------------------------------------------------
class HubError(Exception):
    """A Hub operation failed; ``str(error)`` is a message for a person (never holds a token)."""

    @property
    def message(self) -> str:
        return str(self)


class HubOfflineError(HubError):
    """No network use is possible: ``HF_HUB_OFFLINE`` is set or the Hub cannot be reached."""


class HubAuthError(HubError):
    """401/403: the repository is gated or private.

    Attributes:
        repo_id: the repository.
        url: its page on huggingface.co (where the licence is accepted).
        status: the HTTP status (401 or 403).
    """

    def __init__(self, message: str, *, repo_id: str, status: int) -> None:
        super().__init__(message)
        self.repo_id = repo_id
        self.url = repo_page_url(repo_id)
        self.status = status


class HubNotFoundError(HubError):
    """The repository, revision or file does not exist."""


def repo_page_url(repo_id: str) -> str:
    """The repository's page on huggingface.co."""
    return f"{HUB_WEBSITE}/{repo_id}"


def scrub(text: str, *secrets: str | None) -> str:
    """``text`` with every secret (and anything shaped like an hf_ token) replaced by ``hf_***``."""
    for s in secrets:
        if s:
            text = text.replace(s, "hf_***")
    return re.sub(r"\bhf_[A-Za-z0-9]{8,}\b", "hf_***", text)


def is_offline_mode() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set now or was at import."""
    if constants.is_offline_mode():
        return True
    v = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return v.strip().upper() in {"1", "ON", "YES", "TRUE"}


def offline_error(endpoint: str | None = None, reason: str | None = None) -> HubOfflineError:
    """The :class:`HubOfflineError` for offline mode (no reason) or an unreachable endpoint."""
    if reason is None:
        return HubOfflineError(
            "Offline: HF_HUB_OFFLINE is set, so Glassbox does not use the network. "
            "Your local models work as usual; unset HF_HUB_OFFLINE to search and download."
        )
    host = endpoint or constants.ENDPOINT
    return HubOfflineError(
        f"Offline: the Hugging Face Hub ({host}) cannot be reached ({reason}). "
        "Check the network connection; your local models work as usual."
    )


def auth_error(repo_id: str, status: int, *, token_sent: bool, rejected: bool = False) -> HubAuthError:
    """The message for a 401/403 on ``repo_id`` (names no token)."""
    url = repo_page_url(repo_id)
    if rejected:
        what = "the Hugging Face token Glassbox sent was rejected (it is invalid or expired)"
    elif token_sent:
        what = "your Hugging Face token does not give access to it"
    else:
        what = "it needs a Hugging Face access token and none is set"
    return HubAuthError(
        f"{repo_id} is gated or private (HTTP {status}): {what}. To download it, create a token at "
        f"{HUB_WEBSITE}/settings/tokens and enter it under Models → Hub (or run `hf auth login`), and accept the "
        f"model's licence (request access) on its page: {url}",
        repo_id=repo_id,
        status=status,
    )


# --- the shared HTTP client ---------------------------------------------------------------------
class _FailFastClient(httpx2.Client):
    """huggingface_hub's client, with default timeouts and fail-fast connects.

    A request without a timeout (huggingface_hub passes ``timeout=None`` to most
    calls) gets :data:`CONNECT_TIMEOUT` to connect and :data:`READ_TIMEOUT` per
    read. A connect that fails raises :class:`HubOfflineError`, which
    huggingface_hub's retry loop does not catch.
    """

    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = READ_TIMEOUT

    def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        t = dict(request.extensions.get("timeout") or {})
        for key, default in (
            ("connect", self.connect_timeout),
            ("read", self.read_timeout),
            ("write", self.read_timeout),
            ("pool", self.read_timeout),
        ):
            if t.get(key) is None:
                t[key] = default
        request.extensions = {**request.extensions, "timeout": t}
        try:
            return super().send(request, **kwargs)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            origin = f"{request.url.scheme}://{request.url.host}" + (f":{request.url.port}" if request.url.port else "")
            reason = "timed out" if isinstance(exc, httpx2.ConnectTimeout) else scrub(str(exc) or type(exc).__name__)
            raise offline_error(origin, reason) from None


_install_lock = threading.Lock()
_installed: tuple[float, float] | None = None


def _request_hook() -> Any:
    try:
        from huggingface_hub.utils._http import hf_request_event_hook  # the hook huggingface_hub installs

        return hf_request_event_hook
    except ImportError:  # pragma: no cover - a future huggingface_hub

        def hook(request: httpx2.Request) -> None:
            if is_offline_mode():
                raise OfflineModeIsEnabled(f"Cannot reach {request.url}: offline mode is enabled.")

        return hook


def install_http_client(*, connect_timeout: float | None = None, read_timeout: float | None = None) -> None:
    """Make huggingface_hub's shared HTTP client fail fast (opens no connection).

    Replaces huggingface_hub's client factory (``set_client_factory``) with one
    that builds the same client (its request hook, redirects, proxies from the
    environment) plus default timeouts and fail-fast connects. Process-wide:
    huggingface_hub has one shared session. Called without arguments it keeps
    an existing installation (so :class:`HubClient` and the download manager
    do not undo a configuration the app chose).

    Args:
        connect_timeout: seconds to open a connection (default :data:`CONNECT_TIMEOUT`).
        read_timeout: seconds a read may wait for the next byte (default :data:`READ_TIMEOUT`).
    """
    global _installed
    with _install_lock:
        if connect_timeout is None and read_timeout is None and _installed is not None:
            return
        connect_timeout = CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        read_timeout = READ_TIMEOUT if read_timeout is None else read_timeout
        if _installed == (connect_timeout, read_timeout):
            return
        hook = _request_hook()

        def factory() -> httpx2.Client:
            client = _FailFastClient(event_hooks={"request": [hook]}, follow_redirects=True, timeout=None)
            client.connect_timeout = connect_timeout
            client.read_timeout = read_timeout
            return client

        set_client_factory(factory)
        _installed = (connect_timeout, read_timeout)


def translate_error(
    exc: BaseException,
    *,
    repo_id: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    token_sent: bool = False,
) -> HubError:
    """A :class:`HubError` for an exception from huggingface_hub or httpx.

    Args:
        exc: the exception.
        repo_id: the repository the call was about (for 401/403/404 messages).
        token: the token used, scrubbed from any quoted text.
        endpoint: the Hub endpoint (for the offline message).
        token_sent: whether a token was sent (changes the 401/403 advice).
    """
    if isinstance(exc, HubError):
        return exc
    if isinstance(exc, OfflineModeIsEnabled):
        return offline_error()
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
        server_msg = exc.response.headers.get("X-Error-Message", "")
        if status in (401, 403) and repo_id:
            return auth_error(
                repo_id,
                status,
                token_sent=token_sent,
                rejected=server_msg == "Invalid credentials in Authorization header",
            )
        if status == 404:
            return HubNotFoundError(
                f"Not found on the Hugging Face Hub: {repo_id or ''} ({scrub(server_msg or 'HTTP 404', token)})."
            )
        return HubError(
            f"The Hugging Face Hub answered HTTP {status} "
            f"{scrub(server_msg, token)} for {repo_id or 'the request'}. Try again later."
        )
    if isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout)):
        return offline_error(endpoint, scrub(str(exc), token))
    if isinstance(exc, httpx2.TransportError):
        return HubError(
            f"The connection to the Hugging Face Hub failed ({type(exc).__name__}: "
            f"{scrub(str(exc), token)}). Try again."
        )
    return HubError(f"Hugging Face Hub request failed: {type(exc).__name__}: {scrub(str(exc), token)}")

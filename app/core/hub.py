"""The Hugging Face Hub: search GGUF repositories, list their files, judge fit.

:class:`HubClient` works over huggingface_hub's ``HfApi`` (search, file listing
with LFS sizes and sha256) and huggingface_hub's shared HTTP session (the GGUF
header of a file, fetched with HTTP Range requests, so a verdict costs a few
MiB, not the download). Nothing here touches the network until a method is
called: constructing a client, importing this module and
:func:`install_http_client` open no connection.

Offline and unreachable Hub (case H3): with ``HF_HUB_OFFLINE`` set, every
method raises :class:`HubOfflineError` before any network use. When the Hub
cannot be reached, huggingface_hub's own retry loop (``http_backoff``: five
retries, 23 s of sleeps) would make a search hang; :func:`install_http_client`
gives huggingface_hub's shared ``httpx`` client a connect timeout
(:data:`CONNECT_TIMEOUT`) and turns a failed *connect* into
:class:`HubOfflineError`, which huggingface_hub does not retry. Reads that stall
after connecting still time out (:data:`READ_TIMEOUT`).

Gated and private repositories (H4): a 401 or 403 raises :class:`HubAuthError`
whose message says that a Hugging Face token and accepting the model's licence
are needed, with the repository page's URL. Tokens never appear in messages or
logs: messages are written here, and anything quoted from elsewhere goes
through :func:`scrub`.

All methods block; call them from a worker thread, not the UI thread.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from huggingface_hub import HfApi, constants, hf_hub_url
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from huggingface_hub.utils import _http as _hf_http
from huggingface_hub.utils import build_hf_headers, get_session, get_token, hf_raise_for_status, set_client_factory

from app.core.fit import FitReport, SystemMemory, Verdict, fit_verdict, system_memory
from app.core.gguf_info import SPLIT_RE, GGUFHeaderIncomplete, GGUFInfo, format_bytes, read_gguf_info_bytes

log = logging.getLogger(__name__)

# The HTTP library huggingface_hub's session is built on: httpx2 in huggingface_hub 2.x, httpx in 1.x
# (same API). Exceptions must be caught from the very module the session raises them from. The type
# checker reads httpx2's types (installed with huggingface_hub 2.x); at run time it is whichever one
# huggingface_hub imported.
if TYPE_CHECKING:
    import httpx2 as httpx2  # re-exported: downloads catches the same exceptions
else:
    httpx2 = getattr(_hf_http, "httpx2", None) or _hf_http.httpx

CONNECT_TIMEOUT = 5.0  # seconds to open a connection before calling the Hub unreachable
READ_TIMEOUT = 30.0  # seconds without a byte before a read fails
HEADER_FIRST_FETCH = 2 << 20  # bytes: the first Range request for a GGUF header
HEADER_MAX = 64 << 20  # bytes: give up on headers longer than this
HUB_WEBSITE = "https://huggingface.co"
LIBRARY_NAME = "glassbox"
SORTS = {
    "downloads": "downloads",
    "likes": "likes",
    "recent": "last_modified",
    "created": "created_at",
    "trending": "trending_score",
}
_SEARCH_EXPAND = ["author", "downloads", "likes", "lastModified", "createdAt", "gated", "private", "tags", "gguf"]


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


# --- values ------------------------------------------------------------------------------------
_QUANT_NAMES = [
    "IQ1_S",
    "IQ1_M",
    "IQ2_XXS",
    "IQ2_XS",
    "IQ2_S",
    "IQ2_M",
    "IQ3_XXS",
    "IQ3_XS",
    "IQ3_S",
    "IQ3_M",
    "IQ4_XS",
    "IQ4_NL",
    "TQ1_0",
    "TQ2_0",
    "Q2_K",
    "Q2_K_S",
    "Q2_K_L",
    "Q2_K_XL",
    "Q3_K",
    "Q3_K_S",
    "Q3_K_M",
    "Q3_K_L",
    "Q3_K_XL",
    "Q4_0",
    "Q4_1",
    "Q4_K",
    "Q4_K_S",
    "Q4_K_M",
    "Q4_K_L",
    "Q4_K_XL",
    "Q4_0_4_4",
    "Q4_0_4_8",
    "Q4_0_8_8",
    "Q5_0",
    "Q5_1",
    "Q5_K",
    "Q5_K_S",
    "Q5_K_M",
    "Q5_K_L",
    "Q5_K_XL",
    "Q6_K",
    "Q6_K_L",
    "Q6_K_XL",
    "Q8_0",
    "Q8_K_XL",
    "F16",
    "BF16",
    "F32",
    "FP16",
    "FP32",
    "MXFP4",
]
_QUANT_RE = re.compile(
    r"(?:^|[-._\s])((?:UD-)?(?:" + "|".join(sorted(_QUANT_NAMES, key=len, reverse=True)) + r"))(?=$|[-._\s])",
    re.IGNORECASE,
)


def quant_from_filename(filename: str) -> str:
    """The quant type named in a GGUF file name, upper case (``Q4_K_M``, ``IQ4_XS``, ``BF16``), or "".

    ``fp16``/``fp32`` become ``F16``/``F32``; unsloth's ``UD-`` prefix is kept
    (``UD-Q4_K_XL``); a split suffix and folders are ignored.
    """
    name = PurePosixPath(filename).name
    m = SPLIT_RE.match(name)
    stem = m.group("stem") if m else re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE)
    found = [x.group(1).upper() for x in _QUANT_RE.finditer(stem)]
    if not found:
        return ""
    q = found[-1]
    return {"FP16": "F16", "FP32": "F32"}.get(q, q)


@dataclass(frozen=True)
class RepoSummary:
    """One search result. Counts are from the Hub; dates are timezone-aware."""

    repo_id: str
    author: str | None = None
    downloads: int = 0
    likes: int = 0
    last_modified: datetime | None = None
    created_at: datetime | None = None
    gated: bool = False
    private: bool = False
    tags: tuple[str, ...] = ()
    architecture: str | None = None
    context_length: int | None = None

    @property
    def url(self) -> str:
        return repo_page_url(self.repo_id)


@dataclass(frozen=True)
class HubFilePart:
    """One file on the Hub: repo path, size in bytes, and LFS sha256 (hex; None if not in LFS)."""

    filename: str
    size: int
    sha256: str | None


@dataclass(frozen=True)
class HubFile:
    """A downloadable model: one GGUF file, or all parts of a split model.

    Attributes:
        repo_id: the repository.
        revision: the commit the listing came from (downloads use it, so all
            parts and a resumed download come from the same version).
        parts: the files, in order (one for a plain GGUF).
        quant: quant type from the file name ("" if it does not say).
        missing_parts: split parts named by the pattern but not in the listing.
    """

    repo_id: str
    revision: str
    parts: tuple[HubFilePart, ...]
    quant: str = ""
    missing_parts: tuple[str, ...] = ()

    @property
    def filename(self) -> str:
        """The first part's repo path (what llama.cpp is given)."""
        return self.parts[0].filename

    @property
    def name(self) -> str:
        """Display name: the file name, or ``stem (3 parts)`` for a split model."""
        base = PurePosixPath(self.filename).name
        m = SPLIT_RE.match(base)
        if m and len(self.parts) > 1:
            return f"{m.group('stem')}.gguf ({len(self.parts)} parts)"
        return base

    @property
    def size(self) -> int:
        """Total bytes of all parts."""
        return sum(p.size for p in self.parts)

    @property
    def is_split(self) -> bool:
        return len(self.parts) > 1 or bool(SPLIT_RE.match(PurePosixPath(self.filename).name))

    @property
    def is_projector(self) -> bool:
        """A multimodal projector (``mmproj-*.gguf``), not a model to chat with."""
        return PurePosixPath(self.filename).name.lower().startswith("mmproj")

    @property
    def url(self) -> str:
        return repo_page_url(self.repo_id)


@dataclass(frozen=True)
class RepoFiles:
    """A repository's GGUF files (smallest first) and its facts."""

    repo: RepoSummary
    revision: str
    files: tuple[HubFile, ...]


@dataclass(frozen=True)
class StarterModel:
    """A small instruct model offered on first run. ``approx_size`` in bytes (the Hub listing is exact)."""

    repo_id: str
    filename: str
    approx_size: int
    label: str


# Small instruct models for a first run with an empty library (sizes approximate, from the Hub pages).
STARTER_MODELS: tuple[StarterModel, ...] = (
    StarterModel(
        "unsloth/gemma-3-270m-it-GGUF",
        "gemma-3-270m-it-Q4_K_M.gguf",
        253_000_000,
        "Gemma 3 270M Instruct (Google): tiny and quick",
    ),
    StarterModel(
        "HuggingFaceTB/SmolLM2-360M-Instruct-GGUF",
        "smollm2-360m-instruct-q8_0.gguf",
        386_000_000,
        "SmolLM2 360M Instruct (Hugging Face): tiny, English",
    ),
    StarterModel(
        "bartowski/Qwen2.5-0.5B-Instruct-GGUF",
        "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf",
        398_000_000,
        "Qwen2.5 0.5B Instruct (Alibaba): small, multilingual",
    ),
    StarterModel(
        "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", 639_000_000, "Qwen3 0.6B (Alibaba): small, with a thinking mode"
    ),
    StarterModel(
        "bartowski/Llama-3.2-1B-Instruct-GGUF",
        "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        808_000_000,
        "Llama 3.2 1B Instruct (Meta): good all-rounder for its size",
    ),
    StarterModel(
        "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF",
        "smollm2-1.7b-instruct-q4_k_m.gguf",
        1_060_000_000,
        "SmolLM2 1.7B Instruct (Hugging Face): the largest of the set",
    ),
)


def group_gguf_files(
    repo_id: str, revision: str, siblings: Iterable[tuple[str, int | None, str | None]]
) -> list[HubFile]:
    """Group a repository's files into downloadable models.

    Args:
        repo_id, revision: where the files are.
        siblings: (repo path, size in bytes, LFS sha256) of every file.

    Returns:
        :class:`HubFile` items, smallest first; parts of a split model
        (``x-00001-of-00003.gguf`` in one folder) form one item, with the parts
        the listing lacks in ``missing_parts``.
    """
    singles: list[HubFile] = []
    groups: dict[tuple[str, str, str], dict[int, HubFilePart]] = {}
    for name, size, sha in siblings:
        if not name.lower().endswith(".gguf"):
            continue
        part = HubFilePart(name, int(size or 0), sha)
        p = PurePosixPath(name)
        m = SPLIT_RE.match(p.name)
        if m:
            key = (str(p.parent), m.group("stem"), m.group("count"))
            groups.setdefault(key, {})[int(m.group("no"))] = part
        else:
            singles.append(HubFile(repo_id, revision, (part,), quant_from_filename(name)))
    for (folder, stem, count), parts in groups.items():
        n = int(count)
        width = len(count)
        ordered = tuple(parts[i] for i in sorted(parts))
        prefix = "" if folder in ("", ".") else folder + "/"
        missing = tuple(f"{prefix}{stem}-{i:0{width}d}-of-{count}.gguf" for i in range(1, n + 1) if i not in parts)
        singles.append(HubFile(repo_id, revision, ordered, quant_from_filename(ordered[0].filename), missing))
    singles.sort(key=lambda f: (f.size, f.filename))
    return singles


def recommend(reports: dict[HubFile, FitReport] | Sequence[tuple[HubFile, FitReport]]) -> HubFile | None:
    """The largest file whose verdict is ``fits`` (the best quality that fits comfortably), or None."""
    items = reports.items() if isinstance(reports, dict) else reports
    fitting = [f for f, r in items if r.verdict is Verdict.FITS and not f.is_projector and not f.missing_parts]
    return max(fitting, key=lambda f: f.size) if fitting else None


# --- the client -------------------------------------------------------------------------------------
@dataclass
class HubClient:
    """Search the Hub, list a repository's GGUF files, and judge fit before downloading.

    Args:
        endpoint: the Hub URL; default huggingface_hub's (``HF_ENDPOINT``).
        token: a token from Glassbox's settings; None uses huggingface_hub's
            login (``get_token()``: ``HF_TOKEN`` or ``hf auth login``).
        use_login_token: False sends no token unless ``token`` is given.
        memory: the machine's memory for fit verdicts; default
            :func:`~app.core.fit.system_memory` at each call.

    Every method blocks (network): call it from a worker thread. Errors are
    :class:`HubError` subclasses with a message for a person.
    """

    endpoint: str | None = None
    token: str | None = field(default=None, repr=False)
    use_login_token: bool = True
    memory: SystemMemory | None = None
    _headers_cache: dict[tuple[str, str, str], GGUFInfo] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.endpoint = (self.endpoint or constants.ENDPOINT).rstrip("/")
        install_http_client()
        self._api = HfApi(endpoint=self.endpoint, library_name=LIBRARY_NAME)

    # --- token -------------------------------------------------------------------------------
    def _token_arg(self) -> str | bool | None:
        if self.token:
            return self.token
        return None if self.use_login_token else False

    def _effective_token(self) -> str | None:
        if self.token:
            return self.token
        if not self.use_login_token or constants.HF_HUB_DISABLE_IMPLICIT_TOKEN:
            return None
        try:
            return get_token()
        except Exception:
            return None

    @property
    def has_token(self) -> bool:
        """Whether requests carry a token (the token itself is never exposed)."""
        return self._effective_token() is not None

    def _check_online(self) -> None:
        if is_offline_mode():
            raise offline_error()

    def _fail(self, exc: BaseException, repo_id: str | None = None) -> HubError:
        token = self._effective_token()
        err = translate_error(exc, repo_id=repo_id, token=token, endpoint=self.endpoint, token_sent=token is not None)
        log.info("Hub request failed: %s", err)
        return err

    # --- search ------------------------------------------------------------------------------
    def search(self, query: str = "", *, sort: str = "downloads", limit: int = 30) -> list[RepoSummary]:
        """GGUF repositories whose name contains ``query``, best first.

        Args:
            query: words in the repository id ("" lists all GGUF repositories).
            sort: ``downloads``, ``likes``, ``recent`` (last modified),
                ``created`` or ``trending``.
            limit: at most this many results.

        Returns:
            :class:`RepoSummary` items in the Hub's order (descending).

        Raises:
            ValueError: unknown ``sort``.
            HubOfflineError: offline mode, or the Hub cannot be reached (raised
                within :data:`CONNECT_TIMEOUT`, no retries).
            HubError: any other failure.
        """
        if sort not in SORTS:
            raise ValueError(f"unknown sort '{sort}'; expected one of {', '.join(SORTS)}")
        self._check_online()
        try:
            models = list(
                self._api.list_models(
                    search=query or None,
                    filter="gguf",
                    sort=SORTS[sort],  # type: ignore[arg-type]
                    limit=limit,
                    expand=_SEARCH_EXPAND,  # type: ignore[arg-type]
                    token=self._token_arg(),
                )
            )
        except Exception as exc:
            raise self._fail(exc) from None
        return [_summary(m) for m in models]

    # --- files -------------------------------------------------------------------------------
    def repo_files(self, repo_id: str, revision: str | None = None) -> RepoFiles:
        """A repository's GGUF files with sizes, sha256 and quant types.

        Args:
            repo_id: ``owner/name``.
            revision: branch, tag or commit; default the main branch.

        Returns:
            :class:`RepoFiles`; ``revision`` is the commit sha the listing is from.

        Raises:
            HubOfflineError, HubAuthError (private repository without access),
            HubNotFoundError, HubError.
        """
        self._check_online()
        try:
            info = self._api.model_info(repo_id, revision=revision, files_metadata=True, token=self._token_arg())
        except Exception as exc:
            raise self._fail(exc, repo_id) from None
        rev = info.sha or revision or "main"
        sibs = [
            (s.rfilename, (s.lfs.size if s.lfs else s.size), (s.lfs.sha256 if s.lfs else None))
            for s in (info.siblings or [])
        ]
        return RepoFiles(_summary(info), rev, tuple(group_gguf_files(repo_id, rev, sibs)))

    def file(self, repo_id: str, filename: str, revision: str | None = None) -> HubFile:
        """The downloadable item whose (first) file is ``filename`` (e.g. a :data:`STARTER_MODELS` entry).

        Raises:
            HubNotFoundError: no such GGUF file in the repository; and what
            :meth:`repo_files` raises.
        """
        rf = self.repo_files(repo_id, revision)
        for f in rf.files:
            if filename in (p.filename for p in f.parts):
                return f
        raise HubNotFoundError(f"{repo_id} has no GGUF file {filename} (at {rf.revision[:12]})")

    def file_url(self, repo_id: str, filename: str, revision: str) -> str:
        """The download URL of a file (huggingface_hub's ``hf_hub_url``)."""
        return hf_hub_url(repo_id, filename, revision=revision, endpoint=self.endpoint)

    # --- header and fit --------------------------------------------------------------------------
    def fetch_header(
        self, file: HubFile, *, first_fetch: int = HEADER_FIRST_FETCH, max_bytes: int = HEADER_MAX
    ) -> GGUFInfo:
        """The GGUF header of ``file``'s first part, read with HTTP Range requests.

        Starts with ``first_fetch`` bytes and fetches more (at least doubling)
        while the header continues; a 262k-token vocabulary needs about 6 MiB.

        Returns:
            The parsed header (tensor sizes are not checked against the file:
            only its start is here). Cached per (repo, revision, file).

        Raises:
            HubOfflineError, HubAuthError (gated: needs token and licence),
            HubNotFoundError, HubError: network or server trouble, or a header
            longer than ``max_bytes``.
            GGUFError: the file is not a usable GGUF (from app.core.gguf_info).
        """
        part = file.parts[0]
        key = (file.repo_id, file.revision, part.filename)
        if key in self._headers_cache:
            return self._headers_cache[key]
        self._check_online()
        url = self.file_url(file.repo_id, part.filename, file.revision)
        data = bytearray()
        want = min(first_fetch, part.size) if part.size else first_fetch
        while True:
            data += self._fetch_range(file.repo_id, url, len(data), want - 1)
            try:
                info = read_gguf_info_bytes(
                    data, file_size=part.size or len(data), name=part.filename, check_tensors=False
                )
                break
            except GGUFHeaderIncomplete as inc:
                if len(data) >= max_bytes or (part.size and len(data) >= part.size):
                    raise HubError(
                        f"{part.filename}: its GGUF header is longer than {format_bytes(max_bytes)}; "
                        "Glassbox cannot judge it before downloading"
                    ) from None
                want = min(max(inc.needed + (1 << 20), 2 * len(data)), max_bytes)
                if part.size:
                    want = min(want, part.size)
        self._headers_cache[key] = info
        return info

    def _fetch_range(self, repo_id: str, url: str, start: int, end: int) -> bytes:
        token = self._effective_token()
        headers = build_hf_headers(token=token if token else False, library_name=LIBRARY_NAME)
        headers["Range"] = f"bytes={start}-{end}"
        headers["Accept-Encoding"] = "identity"
        want = end - start + 1
        out = bytearray()
        try:
            with get_session().stream("GET", url, headers=headers, follow_redirects=True) as r:
                if r.status_code >= 400:
                    r.read()
                    hf_raise_for_status(r)
                skip = start if r.status_code == 200 else 0  # server ignored the Range
                for chunk in r.iter_raw(256 * 1024):
                    if skip:
                        cut = min(skip, len(chunk))
                        chunk = chunk[cut:]
                        skip -= cut
                    out += chunk
                    if len(out) >= want:
                        break
        except Exception as exc:
            raise self._fail(exc, repo_id) from None
        return bytes(out[:want])

    def fit(self, file: HubFile, n_ctx: int, *, memory: SystemMemory | None = None) -> FitReport:
        """Whether ``file`` fits this machine at ``n_ctx`` tokens, before downloading it.

        Fetches only the header (:meth:`fetch_header`), then applies the one
        memory formula (:func:`~app.core.fit.fit_verdict`). For a split model
        the weights are the first part's tensors plus the other parts' sizes.

        Raises:
            Whatever :meth:`fetch_header` raises; ValueError for a header
            without attention shape.
        """
        info = self.fetch_header(file)
        weights = None
        if len(file.parts) > 1:
            weights = info.tensor_bytes + sum(p.size for p in file.parts[1:])
        return fit_verdict(info, n_ctx, memory=memory or self.memory or system_memory(), weights_bytes=weights)

    def fit_all(
        self, files: Sequence[HubFile], n_ctx: int, *, memory: SystemMemory | None = None
    ) -> dict[HubFile, FitReport]:
        """Verdicts for every quant of one model from a single header fetch.

        The quants of one model share its shape, so KV cache and compute come
        from one header per model (the smallest file's; files are grouped by
        :func:`model_key`, so a repo holding two models gets two); each file's weights
        are its size minus that header (exact to within the header's few MiB).
        Projectors and incomplete split listings are left out. Use
        :func:`recommend` on the result.

        Raises:
            What :meth:`fetch_header` raises.
        """
        return _fit_all(self, files, n_ctx, memory)


def model_key(filename: str) -> str:
    """What stays of a GGUF file name without its quant and split suffix: files with the
    same key are quants of one model (``Qwen2.5-7B-Instruct-Q4_K_M.gguf`` -> ``qwen2-5-7b-instruct``)."""
    name = PurePosixPath(filename).name
    m = SPLIT_RE.match(name)
    stem = m.group("stem") if m else re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE)
    q = quant_from_filename(filename)
    if q:
        stem = re.sub(re.escape(q), "", stem, flags=re.IGNORECASE)
    return re.sub(r"[-_. ]+", "-", stem).strip("-").lower()


def _fit_all(
    client: HubClient, files: Sequence[HubFile], n_ctx: int, memory: SystemMemory | None
) -> dict[HubFile, FitReport]:
    judged = [f for f in files if not f.is_projector and not f.missing_parts]
    if not judged:
        return {}
    mem = memory or client.memory or system_memory()
    groups: dict[str, list[HubFile]] = {}
    for f in judged:
        groups.setdefault(model_key(f.filename), []).append(f)
    out = {}
    for group in groups.values():  # one header per model; a repo may hold several (a draft model...)
        info = client.fetch_header(min(group, key=lambda f: f.size))
        for f in group:
            weights = max(0, f.size - info.data_offset * len(f.parts))
            out[f] = fit_verdict(info, n_ctx, memory=mem, weights_bytes=weights)
    return out


def _summary(m: Any) -> RepoSummary:
    gg = getattr(m, "gguf", None) or {}
    gated = getattr(m, "gated", None)
    return RepoSummary(
        repo_id=m.id,
        author=getattr(m, "author", None) or (m.id.split("/")[0] if "/" in m.id else None),
        downloads=int(getattr(m, "downloads", 0) or 0),
        likes=int(getattr(m, "likes", 0) or 0),
        last_modified=getattr(m, "last_modified", None),
        created_at=getattr(m, "created_at", None),
        gated=bool(gated) and gated is not False,
        private=bool(getattr(m, "private", False)),
        tags=tuple(getattr(m, "tags", None) or ()),
        architecture=gg.get("architecture") if isinstance(gg, dict) else None,
        context_length=gg.get("context_length") if isinstance(gg, dict) else None,
    )

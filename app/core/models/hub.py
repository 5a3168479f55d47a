"""The Hugging Face Hub: search GGUF repositories, list their files, judge fit.

:class:`HubClient` works over huggingface_hub's ``HfApi`` (search, file listing
with LFS sizes and sha256) and huggingface_hub's shared HTTP session (the GGUF
header of a file, fetched with HTTP Range requests, so a verdict costs a few
MiB, not the download). Nothing here touches the network until a method is
called: constructing a client, importing this module and
:func:`install_http_client` open no connection.

Errors, token scrubbing and the fail-fast HTTP client (offline and gated
repositories, cases H3 and H4) are in :mod:`app.core.models.hub_http`; the listed values
(:class:`HubFile`, split models grouped, quants, starter models) in
:mod:`app.core.models.hub_files`. Their public names import from here too.

All methods block; call them from a worker thread, not the UI thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from huggingface_hub import HfApi, constants, hf_hub_url
from huggingface_hub.utils import build_hf_headers, get_session, get_token, hf_raise_for_status

from app.core.gguf.gguf_info import GGUFHeaderIncomplete, GGUFInfo, format_bytes, read_gguf_info_bytes
from app.core.hardware.fit import FitReport, SystemMemory, fit_verdict, system_memory
from app.core.models.hub_files import (
    STARTER_MODELS,
    HubFile,
    HubFilePart,
    RepoFiles,
    RepoSummary,
    StarterModel,
    group_gguf_files,
    model_key,
    quant_from_filename,
    recommend,
)
from app.core.models.hub_http import (
    CONNECT_TIMEOUT,
    HUB_WEBSITE,
    LIBRARY_NAME,
    READ_TIMEOUT,
    HubAuthError,
    HubError,
    HubNotFoundError,
    HubOfflineError,
    auth_error,
    httpx2,
    install_http_client,
    is_offline_mode,
    offline_error,
    repo_page_url,
    scrub,
    translate_error,
)

log = logging.getLogger(__name__)

HEADER_FIRST_FETCH = 2 << 20  # bytes: the first Range request for a GGUF header
HEADER_MAX = 64 << 20  # bytes: give up on headers longer than this
SORTS = {
    "downloads": "downloads",
    "likes": "likes",
    "recent": "last_modified",
    "created": "created_at",
    "trending": "trending_score",
}
_SEARCH_EXPAND = ["author", "downloads", "likes", "lastModified", "createdAt", "gated", "private", "tags", "gguf"]


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
            :func:`~app.core.hardware.fit.system_memory` at each call.

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
            GGUFError: the file is not a usable GGUF (from app.core.gguf.gguf_info).
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
        memory formula (:func:`~app.core.hardware.fit.fit_verdict`). For a split model
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


__all__ = [
    "CONNECT_TIMEOUT",
    "HEADER_FIRST_FETCH",
    "HEADER_MAX",
    "HUB_WEBSITE",
    "LIBRARY_NAME",
    "READ_TIMEOUT",
    "SORTS",
    "STARTER_MODELS",
    "HubAuthError",
    "HubClient",
    "HubError",
    "HubFile",
    "HubFilePart",
    "HubNotFoundError",
    "HubOfflineError",
    "RepoFiles",
    "RepoSummary",
    "StarterModel",
    "auth_error",
    "group_gguf_files",
    "httpx2",
    "install_http_client",
    "is_offline_mode",
    "model_key",
    "offline_error",
    "quant_from_filename",
    "recommend",
    "repo_page_url",
    "scrub",
    "translate_error",
]

"""A local stand-in for the Hugging Face Hub, for tests.

:class:`FakeHub` is a threaded ``http.server`` on 127.0.0.1 (random port) that
answers the parts of the Hub protocol huggingface_hub and Glassbox use:

- ``GET /api/models?search=&filter=gguf&sort=downloads&limit=&expand=...``
  (``HfApi.list_models``), sorted descending like the Hub;
- ``GET /api/models/<repo>[/revision/<rev>]?blobs=true`` (``HfApi.model_info``
  with ``files_metadata=True``): siblings with size, blobId and LFS sha256;
- ``GET /api/models/<repo>/tree/<rev>[/<path>]`` (``HfApi.list_repo_tree``);
- ``GET|HEAD /<repo>/resolve/<rev>/<file>``: the file, with ``Range`` support
  (206 + ``Content-Range``, 416), ``ETag``, ``X-Linked-Etag``, ``X-Linked-Size``,
  ``X-Repo-Commit`` and ``Accept-Ranges`` as the Hub sends them
  (huggingface_hub's ``get_hf_file_metadata`` reads the first three). With
  ``cdn_redirect`` LFS files answer 302 to a second server on another port, as
  the Hub redirects to its CDN; that server records whether an
  ``Authorization`` header reached it (it must not).

Access control like the Hub's: a gated repo answers 401 (no token) or 403
(token without access) with ``X-Error-Code: GatedRepo`` on file downloads; a
private repo answers 401 ``RepoNotFound`` everywhere without a token that has
access; an unknown token answers 401 "Invalid credentials in Authorization
header".

Fault switches for download tests: :meth:`FakeHub.drop_after` (close the
connection after N body bytes), :meth:`FakeHub.hold_at` (stop sending at an
absolute offset until released), :meth:`FakeHub.corrupt` (serve one flipped
byte while the listing keeps the true sha256), ``throttle`` (bytes/s per
response) and :meth:`FakeHub.fail_next` (answer an HTTP status N times).
Every request is recorded in :attr:`FakeHub.requests`.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

CHUNK = 64 * 1024
_SORT_KEYS = {
    "downloads": "downloads",
    "likes": "likes",
    "lastModified": "last_modified",
    "createdAt": "created_at",
    "trendingScore": "downloads",
}


@dataclass
class FakeFile:
    """One file of a fake repository.

    Attributes:
        name: path in the repo (``Q4_K_M/model.gguf`` for a subfolder).
        source: a local file served as-is, or bytes.
        lfs: stored in Git LFS (GGUF files are); small text files are not.
    """

    name: str
    source: Path | bytes
    lfs: bool = True
    sha256_hex: str | None = None
    _git_sha1: str | None = None

    @property
    def size(self) -> int:
        return self.source.stat().st_size if isinstance(self.source, Path) else len(self.source)

    @property
    def sha256(self) -> str:
        if self.sha256_hex is None:
            h = hashlib.sha256()
            if isinstance(self.source, Path):
                with open(self.source, "rb") as fh:
                    while block := fh.read(4 << 20):
                        h.update(block)
            else:
                h.update(self.source)
            self.sha256_hex = h.hexdigest()
        return self.sha256_hex

    @property
    def git_sha1(self) -> str:
        """The blob id: git's sha1 of the LFS pointer (LFS) or of the content."""
        if self._git_sha1 is None:
            body = self.pointer() if self.lfs else self.read(0, self.size)
            self._git_sha1 = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
        return self._git_sha1

    def pointer(self) -> bytes:
        return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {self.size}\n").encode()

    def read(self, start: int, length: int) -> bytes:
        if isinstance(self.source, Path):
            with open(self.source, "rb") as fh:
                fh.seek(start)
                return fh.read(length)
        return self.source[start : start + length]


@dataclass
class FakeRepo:
    """A model repository on the fake Hub.

    Attributes:
        gated: ``"auto"``/``"manual"`` for a gated repo (downloads need a token in
            ``allowed_tokens``), False otherwise.
        private: visible only with a token in ``allowed_tokens``.
    """

    repo_id: str
    files: dict[str, FakeFile]
    sha: str
    gated: str | bool = False
    private: bool = False
    allowed_tokens: set[str] = field(default_factory=set)
    downloads: int = 0
    likes: int = 0
    created_at: str = "2024-01-01T00:00:00.000Z"
    last_modified: str = "2024-06-01T00:00:00.000Z"
    tags: list[str] = field(default_factory=lambda: ["gguf", "text-generation"])


@dataclass(frozen=True)
class RequestRecord:
    """One request the fake Hub answered: which server, method, path, Range, auth."""

    server: str
    method: str
    path: str
    range: str | None
    authorized: bool
    status: int


class FakeHub:
    """The fake Hub server. Use as a context manager or call start()/stop().

    Attributes:
        url: ``http://127.0.0.1:<port>`` (set HF_ENDPOINT to it).
        cdn_url: the second server LFS downloads are redirected to (``cdn_redirect``).
        requests: every request answered, in order.
        throttle: bytes/s per file response (None: as fast as possible).
        cdn_redirect: answer LFS ``resolve`` with 302 to the CDN server.
    """

    def __init__(self, *, cdn_redirect: bool = False, throttle: float | None = None) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.valid_tokens: set[str] = set()
        self.requests: list[RequestRecord] = []
        self.throttle = throttle
        self.cdn_redirect = cdn_redirect
        self._lock = threading.Lock()
        self._drops: list[list[Any]] = []  # [n_bytes, times, filename|None]
        self._holds: dict[str, list[tuple[int, threading.Event]]] = {}
        self._corrupt: dict[str, set[int]] = {}
        self._fail: list[list[Any]] = []  # [status, times, path substring]
        self._stopping = threading.Event()
        self._conns: set[socket.socket] = set()
        self._bodies_in_flight = 0
        self._servers: list[ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []
        self.url = ""
        self.cdn_url = ""

    # --- content -----------------------------------------------------------------------------
    def add_repo(self, repo_id: str, files: dict[str, Path | bytes], **kw: Any) -> FakeRepo:
        """Add a repository. ``files`` maps repo paths to local files or bytes.

        Keyword arguments are :class:`FakeRepo` fields (gated, private,
        allowed_tokens, downloads, likes, created_at, last_modified, tags, sha).
        ``.gguf`` files are LFS files, others are regular git files.
        """
        sha = kw.pop("sha", None) or hashlib.sha1(repo_id.encode()).hexdigest()
        sha256s = kw.pop("sha256s", {})
        ff = {
            name: FakeFile(name, src, lfs=name.endswith(".gguf"), sha256_hex=sha256s.get(name))
            for name, src in files.items()
        }
        repo = FakeRepo(repo_id, ff, sha, **kw)
        self.repos[repo_id] = repo
        self.valid_tokens |= repo.allowed_tokens
        return repo

    # --- fault switches ----------------------------------------------------------------------
    def drop_after(self, n_bytes: int, *, times: int = 1, filename: str | None = None) -> None:
        """The next ``times`` file responses close the connection after ``n_bytes`` body bytes."""
        with self._lock:
            self._drops.append([n_bytes, times, filename])

    def hold_at(self, filename: str, offset: int) -> threading.Event:
        """Stop sending ``filename`` at absolute byte ``offset`` until the returned event is set."""
        ev = threading.Event()
        with self._lock:
            self._holds.setdefault(filename, []).append((offset, ev))
        return ev

    def corrupt(self, filename: str, offset: int) -> None:
        """Serve ``filename`` with the byte at ``offset`` flipped (the listing keeps the true sha256)."""
        with self._lock:
            self._corrupt.setdefault(filename, set()).add(offset)

    def fail_next(self, status: int, *, times: int = 1, path_contains: str = "/resolve/") -> None:
        """Answer the next ``times`` requests whose path contains ``path_contains`` with ``status``."""
        with self._lock:
            self._fail.append([status, times, path_contains])

    def release_all(self) -> None:
        """Release every hold."""
        with self._lock:
            for holds in self._holds.values():
                for _, ev in holds:
                    ev.set()
            self._holds.clear()

    def bodies_in_flight(self) -> int:
        """File bodies being sent right now: a download the client stopped reaches 0 once the
        server has seen the connection go (its next write failed)."""
        with self._lock:
            return self._bodies_in_flight

    def file_requests(self, filename: str) -> list[RequestRecord]:
        """Requests that downloaded ``filename`` (GET, from the Hub or the CDN)."""
        return [
            r
            for r in self.requests
            if r.method == "GET" and r.path.endswith("/" + quote(filename)) and "/api/" not in r.path
        ]

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeHub:
        for role in ("hub", "cdn"):
            srv = _Server(("127.0.0.1", 0), _Handler)
            srv.hub = self
            srv.role = role
            t = threading.Thread(
                target=srv.serve_forever, kwargs={"poll_interval": 0.05}, name=f"fake-hub-{role}", daemon=True
            )
            t.start()
            self._servers.append(srv)
            self._threads.append(t)
        self.url = f"http://127.0.0.1:{self._servers[0].server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{self._servers[1].server_address[1]}"
        return self

    def stop(self) -> None:
        """Stop both servers, release holds, close open connections and join every thread."""
        self._stopping.set()
        self.release_all()
        for srv in self._servers:
            srv.shutdown()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        for srv in self._servers:
            srv.server_close()  # joins the handler threads (block_on_close)
        for t in self._threads:
            t.join(5)
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- helpers used by the handler -----------------------------------------------------------
    def _take_drop(self, filename: str) -> int | None:
        with self._lock:
            for d in self._drops:
                if d[1] > 0 and (d[2] is None or d[2] == filename):
                    d[1] -= 1
                    n = d[0]
                    self._drops = [x for x in self._drops if x[1] > 0]
                    return n
        return None

    def _take_fail(self, path: str) -> int | None:
        with self._lock:
            for f in self._fail:
                if f[1] > 0 and f[2] in path:
                    f[1] -= 1
                    self._fail = [x for x in self._fail if x[1] > 0]
                    return f[0]
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True
    hub: FakeHub
    role: str


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 15  # idle keep-alive connections end after this

    # quiet
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.hub._lock:
            self.server.hub._conns.add(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        with self.server.hub._lock:
            self.server.hub._conns.discard(self.connection)

    def handle(self) -> None:
        with contextlib.suppress(TimeoutError, ConnectionError, OSError):
            super().handle()

    # --- plumbing --------------------------------------------------------------------------------
    @property
    def hub(self) -> FakeHub:
        return self.server.hub

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization") or ""
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def _record(self, status: int) -> None:
        with self.hub._lock:
            self.hub.requests.append(
                RequestRecord(
                    self.server.role,
                    self.command,
                    urlsplit(self.path).path,
                    self.headers.get("Range"),
                    self.headers.get("Authorization") is not None,
                    status,
                )
            )

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers)

    def _error(self, status: int, code: str | None, message: str) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._json(status, {"error": message}, headers)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        status = self.hub._take_fail(parts.path)
        if status is not None:
            self._error(status, None, f"injected {status}")
            return
        token = self._token()
        if token is not None and token not in self.hub.valid_tokens:
            self._error(401, None, "Invalid credentials in Authorization header")
            return
        if self.server.role == "cdn":
            self._cdn(path)
            return
        if path == "/api/models":
            self._search(query, token)
            return
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?/?$", path)
        if m:
            self._model_info(m.group(1), m.group(2), query, token)
            return
        m = re.match(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?$", path)
        if m:
            self._tree(m.group(1), m.group(2), m.group(3) or "", token)
            return
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            self._resolve(m.group(1), m.group(2), m.group(3), token)
            return
        self._error(404, None, "Not found")

    # --- API -------------------------------------------------------------------------------------
    def _visible(self, repo: FakeRepo, token: str | None) -> bool:
        return not repo.private or (token is not None and token in repo.allowed_tokens)

    def _repo_json(self, repo: FakeRepo, fields: list[str] | None) -> dict[str, Any]:
        ggufs = [f for f in repo.files.values() if f.name.endswith(".gguf")]
        full: dict[str, Any] = {
            "_id": repo.sha[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": repo.sha,
            "downloads": repo.downloads,
            "likes": repo.likes,
            "trendingScore": repo.likes,
            "private": repo.private,
            "gated": repo.gated,
            "disabled": False,
            "tags": repo.tags,
            "pipeline_tag": "text-generation",
            "library_name": "gguf",
            "createdAt": repo.created_at,
            "lastModified": repo.last_modified,
        }
        if ggufs:
            full["gguf"] = {"total": 0, "architecture": "llama", "context_length": 2048}
        if fields:
            return {k: v for k, v in full.items() if k in fields or k in ("_id", "id")}
        keep = (
            "_id",
            "id",
            "modelId",
            "likes",
            "trendingScore",
            "private",
            "downloads",
            "tags",
            "pipeline_tag",
            "library_name",
            "createdAt",
        )
        return {k: full[k] for k in keep}

    def _search(self, query: dict[str, list[str]], token: str | None) -> None:
        search = (query.get("search") or [""])[0].lower()
        filters = query.get("filter") or []
        author = (query.get("author") or [None])[0]
        sort = (query.get("sort") or [None])[0]
        limit = int((query.get("limit") or ["1000"])[0])
        expand = query.get("expand") or query.get("expand[]")
        repos = [
            r
            for r in self.hub.repos.values()
            if self._visible(r, token)
            and search in r.repo_id.lower()
            and all(f in r.tags for f in filters)
            and (author is None or r.repo_id.startswith(author + "/"))
        ]
        if sort:
            key = _SORT_KEYS.get(sort)
            if key is None:
                self._error(400, None, f"Invalid sort parameter {sort}")
                return
            repos.sort(key=lambda r: getattr(r, key), reverse=True)
        self._json(200, [self._repo_json(r, expand) for r in repos[:limit]])

    def _lookup(self, repo_id: str, revision: str | None, token: str | None) -> FakeRepo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None or not self._visible(repo, token):
            self._error(401, "RepoNotFound", "Repository not found")
            return None
        if revision not in (None, "main", repo.sha):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return repo

    def _model_info(self, repo_id: str, revision: str | None, query: dict[str, list[str]], token: str | None) -> None:
        repo = self._lookup(repo_id, revision and unquote(revision), token)
        if repo is None:
            return
        data = self._repo_json(
            repo,
            [
                "author",
                "sha",
                "downloads",
                "likes",
                "private",
                "gated",
                "disabled",
                "tags",
                "pipeline_tag",
                "library_name",
                "createdAt",
                "lastModified",
                "gguf",
                "modelId",
            ],
        )
        blobs = (query.get("blobs") or ["false"])[0].lower() == "true"
        sibs = []
        for f in repo.files.values():
            s: dict[str, Any] = {"rfilename": f.name}
            if blobs:
                s.update(blobId=f.git_sha1, size=f.size)
                if f.lfs:
                    s["lfs"] = {"sha256": f.sha256, "size": f.size, "pointerSize": len(f.pointer())}
            sibs.append(s)
        data["siblings"] = sibs
        data["usedStorage"] = sum(f.size for f in repo.files.values())
        self._json(200, data)

    def _tree(self, repo_id: str, revision: str, sub: str, token: str | None) -> None:
        repo = self._lookup(repo_id, unquote(revision), token)
        if repo is None:
            return
        out = []
        for f in repo.files.values():
            if sub and not f.name.startswith(sub.rstrip("/") + "/"):
                continue
            item: dict[str, Any] = {"type": "file", "oid": f.git_sha1, "size": f.size, "path": f.name}
            if f.lfs:
                item["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": len(f.pointer())}
            out.append(item)
        self._json(200, out)

    # --- files -----------------------------------------------------------------------------------
    def _resolve(self, repo_id: str, revision: str, filename: str, token: str | None) -> None:
        repo = self._lookup(repo_id, revision, token)
        if repo is None:
            return
        if repo.gated and not (token is not None and token in repo.allowed_tokens):
            if token is None:
                self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it "
                    "and be authenticated to access it. Please log in.",
                )
            else:
                self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the "
                    "authorized list. Visit https://huggingface.co/{repo_id} to ask for access.",
                )
            return
        f = repo.files.get(filename)
        if f is None:
            self._error(404, "EntryNotFound", f'{filename} does not exist on "{revision}"')
            return
        etag = f'"{f.sha256 if f.lfs else f.git_sha1}"'
        common = {
            "X-Repo-Commit": repo.sha,
            "ETag": etag,
            "Accept-Ranges": "bytes",
            "Last-Modified": email.utils.formatdate(0, usegmt=True),
        }
        if f.lfs:
            common.update({"X-Linked-Etag": etag, "X-Linked-Size": str(f.size)})
        if f.lfs and self.hub.cdn_redirect:
            loc = f"{self.hub.cdn_url}/cdn/{quote(repo_id)}/{f.sha256}/{quote(filename)}"
            self._send(302, b"", {**common, "Location": loc})
            return
        self._serve_file(f, common)

    def _cdn(self, path: str) -> None:
        m = re.match(r"^/cdn/([^/]+/[^/]+)/([0-9a-f]{64})/(.+)$", path)
        repo = self.hub.repos.get(m.group(1)) if m else None
        f = repo.files.get(m.group(3)) if repo and m else None
        if f is None or f.sha256 != m.group(2):  # type: ignore[union-attr]
            self._error(404, None, "NoSuchKey")
            return
        self._serve_file(f, {"ETag": f'"{f.sha256}"', "Accept-Ranges": "bytes"})

    def _serve_file(self, f: FakeFile, headers: dict[str, str]) -> None:
        size = f.size
        start, end = 0, size - 1
        status = 200
        rng = self.headers.get("Range")
        if rng:
            m = re.match(r"^bytes=(\d*)-(\d*)$", rng.strip())
            if not m or (m.group(1) == "" and m.group(2) == ""):
                self._send(416, b"", {**headers, "Content-Range": f"bytes */{size}"})
                return
            if m.group(1) == "":
                start, end = max(0, size - int(m.group(2))), size - 1
            else:
                start = int(m.group(1))
                end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            if start >= size or start > end:
                self._send(416, b"", {**headers, "Content-Range": f"bytes */{size}"})
                return
            status = 206
            headers = {**headers, "Content-Range": f"bytes {start}-{end}/{size}"}
        length = end - start + 1
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        self._body(f, start, length)

    def _body(self, f: FakeFile, start: int, length: int) -> None:
        hub = self.hub
        with hub._lock:
            hub._bodies_in_flight += 1
        try:
            self._send_body(f, start, length)
        finally:
            with hub._lock:
                hub._bodies_in_flight -= 1

    def _send_body(self, f: FakeFile, start: int, length: int) -> None:
        hub = self.hub
        drop = hub._take_drop(f.name) if self.command == "GET" else None
        with hub._lock:
            holds = sorted(hub._holds.get(f.name, []), key=lambda h: h[0])
            corrupt = set(hub._corrupt.get(f.name, ()))
        plain = drop is None and not holds and not corrupt and hub.throttle is None
        if plain and isinstance(f.source, Path):
            self.wfile.flush()
            with open(f.source, "rb") as fh:
                self.connection.sendfile(fh, start, length)
            return
        sent = 0
        t0 = time.monotonic()
        with contextlib.ExitStack() as stack:
            fh = stack.enter_context(open(f.source, "rb")) if isinstance(f.source, Path) else None
            while sent < length:
                pos = start + sent
                n = min(CHUNK, length - sent)
                for off, ev in holds:
                    if pos <= off < pos + n and not ev.is_set():
                        n = off - pos
                        if n == 0:
                            self.wfile.flush()
                            while not ev.wait(0.05):
                                if hub._stopping.is_set():
                                    return
                            n = min(CHUNK, length - sent)
                        break
                if drop is not None:
                    if sent >= drop:
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    n = min(n, drop - sent)
                if fh is not None:
                    fh.seek(pos)
                    chunk = bytearray(fh.read(n))
                else:
                    chunk = bytearray(f.source[pos : pos + n])  # type: ignore[index]
                for c in corrupt:
                    if pos <= c < pos + n:
                        chunk[c - pos] ^= 0xFF
                self.wfile.write(chunk)
                sent += n
                if hub.throttle:
                    ahead = sent / hub.throttle - (time.monotonic() - t0)
                    if ahead > 0:
                        self.wfile.flush()
                        time.sleep(ahead)
                if hub._stopping.is_set():
                    return

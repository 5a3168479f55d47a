"""The model library: every GGUF model Glassbox can load, from every place it knows.

Sources, in this order (a file reachable from two places, through a symlink, a hard link or
two library folders that overlap, is listed once, under the first):

1. Glassbox's models folder (``Paths.models_dir``, searched recursively:
   downloads land in ``models/<owner>/<repo>/``);
2. folders the person adds (for example LM Studio's ``~/.lmstudio/models``),
   searched recursively; see :func:`app.core.models.other_apps.suggested_folders`;
3. GGUF files in the standard Hugging Face hub cache that other tools share
   (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``),
   read with huggingface_hub's ``scan_cache_dir``.

Each :class:`ModelEntry` has the facts from the file's GGUF header
(:func:`~app.core.gguf.gguf_info.read_gguf_info`, the fast reader). Headers are
cached in ``<cache_dir>/library-headers.json`` keyed by (path, size, mtime_ns),
so a rescan of unchanged files reads no header. A file that cannot be read
becomes an entry with ``error`` (the file's name and what is wrong), never an
exception.

A model split into ``name-00001-of-00003.gguf``... is one entry; a missing
part is named in its ``error``. Incomplete downloads (``*.part``) and
multimodal projectors (``mmproj*.gguf``) are never listed.

Last-used times live in ``<data_dir>/library-usage.json`` (atomic writes).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from huggingface_hub import constants as hf_constants

from app.core.gguf.gguf_info import SPLIT_RE, GGUFError, format_bytes, read_gguf_info, split_part_paths
from app.core.settings import atomic_write_text
from app.paths import Paths

log = logging.getLogger(__name__)

SOURCE_MODELS = "models"
SOURCE_FOLDER = "folder"
SOURCE_HF_CACHE = "hf-cache"
HEADER_CACHE_NAME = "library-headers.json"
USAGE_NAME = "library-usage.json"
CACHE_VERSION = 1
COPY_CHUNK = 8 << 20


@dataclass(frozen=True)
class ModelEntry:
    """One loadable model (one file, or all parts of a split model).

    Attributes:
        path: the file to load (the first part of a split model).
        paths: every part's path, present or not.
        name: the model's name from its metadata (or the file name).
        file_name: the file's name (``stem (3 parts)`` for a split model).
        architecture: e.g. ``llama``, ``gemma3``.
        n_params: parameter count over all present parts.
        quant: quantization, e.g. ``Q4_K_M``.
        size: bytes on disk of all present parts.
        context_length: trained context length, tokens (0 if unknown).
        last_used: when Glassbox last loaded it (seconds since the epoch) or None.
        source: ``models``, ``folder`` or ``hf-cache``.
        source_label: where it is, for a person.
        repo_id: the Hugging Face repository when known.
        error: why it cannot be loaded (names the file), or None.
        missing_parts: parts of a split model that are not on disk.
    """

    path: Path
    paths: tuple[Path, ...]
    name: str
    file_name: str
    architecture: str
    n_params: int
    quant: str
    size: int
    context_length: int
    last_used: float | None
    source: str
    source_label: str
    repo_id: str | None = None
    error: str | None = None
    missing_parts: tuple[Path, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def folder(self) -> Path:
        """The folder holding the file (what "Show in file manager" opens)."""
        return self.path.parent

    @property
    def is_split(self) -> bool:
        return len(self.paths) > 1


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache folder, honouring the environment now.

    ``HF_HUB_CACHE``, then the legacy ``HUGGINGFACE_HUB_CACHE``, then
    ``HF_HOME/hub``; otherwise huggingface_hub's own default (its constants are
    read when it is imported, so the environment is consulted first).
    """
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        v = os.environ.get(var)
        if v:
            return Path(os.path.expandvars(os.path.expanduser(v)))
    home = os.environ.get("HF_HOME")
    if home:
        return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"
    return Path(hf_constants.HF_HUB_CACHE)


@dataclass
class _Facts:
    """What the library keeps of one file's header (cached as JSON)."""

    name: str = ""
    architecture: str = ""
    n_params: int = 0
    quant: str = ""
    context_length: int = 0
    error: str | None = None


@dataclass
class _Candidate:
    path: Path
    source: str
    label: str
    repo_id: str | None = None


class ModelLibrary:
    """Finds, describes, imports and deletes GGUF models.

    Args:
        paths: Glassbox's folders (models folder, cache and data folders).
        folders: extra folders to search (``Settings.library_folders``).
        hf_cache: True: the standard Hugging Face cache (:func:`hf_cache_dir`,
            looked up at each scan); a Path: that cache; False: none.

    Not thread-safe: use one library from one thread at a time (scan from a
    worker thread; a scan of unchanged files is fast).
    """

    def __init__(self, paths: Paths, *, folders: Iterable[Path] = (), hf_cache: Path | bool = True) -> None:
        self.paths = paths
        self.folders = [Path(f) for f in folders]
        self.hf_cache = hf_cache
        self.header_cache_file = paths.cache_dir / HEADER_CACHE_NAME
        self.usage_file = paths.data_dir / USAGE_NAME
        self.entries: list[ModelEntry] = []
        self.headers_read = 0  # headers parsed by the last scan (the rest came from the cache)
        self._cache: dict[str, dict[str, Any]] = self._load_json(self.header_cache_file).get("files", {})
        self._usage: dict[str, float] = {
            k: float(v)
            for k, v in self._load_json(self.usage_file).get("last_used", {}).items()
            if isinstance(v, (int, float))
        }

    # --- scanning ------------------------------------------------------------------------------
    def scan(self) -> list[ModelEntry]:
        """Look at every source and return the entries (also kept in :attr:`entries`).

        Most recently used first, then by name. Never raises for a bad file or
        an unreadable folder (a bad file is an entry with ``error``).
        """
        self.headers_read = 0
        seen_files: set[str] = set()
        entries: list[ModelEntry] = []
        seen_entries: set[tuple[int, int] | str] = set()
        fresh_cache: dict[str, dict[str, Any]] = {}
        for group in self._groups(self._candidates(), seen_files):
            entry = self._entry(group, fresh_cache)
            if entry is None:
                continue
            key = _identity(entry.path)
            if key in seen_entries:
                continue
            seen_entries.add(key)
            entries.append(entry)
        if fresh_cache != self._cache:
            self._cache = fresh_cache
            self._save_json(self.header_cache_file, {"version": CACHE_VERSION, "files": fresh_cache})
        entries.sort(key=lambda e: (-(e.last_used or 0.0), e.name.lower(), str(e.path)))
        self.entries = entries
        return entries

    def find(self, path: os.PathLike[str] | str) -> ModelEntry | None:
        """The entry of the last scan whose parts include ``path``."""
        want = _abs(Path(path))
        for e in self.entries:
            if any(_abs(p) == want for p in e.paths):
                return e
        return None

    def _candidates(self) -> Iterator[_Candidate]:
        yield from self._walk(self.paths.models_dir, SOURCE_MODELS, "Glassbox models folder", self.paths.models_dir)
        for folder in self.folders:
            yield from self._walk(folder, SOURCE_FOLDER, str(folder), folder)
        if self.hf_cache is not False:
            cache = hf_cache_dir() if self.hf_cache is True else Path(self.hf_cache)
            yield from self._hf_cache_files(cache)

    def _walk(self, root: Path, source: str, label: str, base: Path) -> Iterator[_Candidate]:
        if not root.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: log.info("cannot list %s", e)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fn in sorted(filenames):
                if is_model_file_name(fn):
                    p = Path(dirpath) / fn
                    rel = p.parent.relative_to(base).parts if source == SOURCE_MODELS else ()
                    repo = "/".join(rel[:2]) if len(rel) >= 2 else None
                    yield _Candidate(p, source, label, repo)

    def _hf_cache_files(self, cache: Path) -> Iterator[_Candidate]:
        if not cache.is_dir():
            return
        try:
            from huggingface_hub import scan_cache_dir

            info = scan_cache_dir(cache)
        except Exception as exc:
            log.info("cannot scan the Hugging Face cache %s: %s", cache, exc)
            return
        for repo in sorted(info.repos, key=lambda r: r.repo_id):
            if repo.repo_type != "model":
                continue
            # Newest revision with a ref (main) first, so duplicates of a blob keep the current name.
            revs = sorted(repo.revisions, key=lambda r: (not r.refs, -r.last_modified))
            blobs: set[Path] = set()
            for rev in revs:
                for f in sorted(rev.files, key=lambda f: str(f.file_path)):
                    if is_model_file_name(f.file_name) and f.blob_path not in blobs:
                        blobs.add(f.blob_path)
                        yield _Candidate(
                            Path(f.file_path), SOURCE_HF_CACHE, f"Hugging Face cache ({repo.repo_id})", repo.repo_id
                        )

    def _groups(self, cands: Iterable[_Candidate], seen: set[str]) -> Iterator[list[_Candidate]]:
        """One list per model: a single file, or the present parts of a split model."""
        splits: dict[tuple[str, str, str], list[_Candidate]] = {}
        order: list[Any] = []
        for c in cands:
            key = _abs(c.path)
            if key in seen:
                continue
            seen.add(key)
            m = SPLIT_RE.match(c.path.name)
            if m:
                k = (str(c.path.parent), m.group("stem"), m.group("count"))
                if k not in splits:
                    splits[k] = []
                    order.append(k)
                splits[k].append(c)
            else:
                order.append([c])
        for o in order:
            yield splits[o] if isinstance(o, tuple) else o

    # --- header facts ---------------------------------------------------------------------------------
    def _facts(self, path: Path, fresh: dict[str, dict[str, Any]]) -> tuple[_Facts, int]:
        """The file's facts and size, from the cache when (size, mtime_ns) match."""
        key = _abs(path)
        try:
            st = path.stat()
        except OSError as exc:
            return _Facts(error=f"{path.name}: cannot be read ({exc.strerror or exc})"), 0
        cached = self._cache.get(key)
        if cached and cached.get("size") == st.st_size and cached.get("mtime_ns") == st.st_mtime_ns:
            facts = _Facts(**cached.get("facts", {}))
        else:
            facts = self._read_facts(path)
        fresh[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "facts": facts.__dict__}
        return facts, st.st_size

    def _read_facts(self, path: Path) -> _Facts:
        self.headers_read += 1
        try:
            info = read_gguf_info(path)
        except GGUFError as exc:
            return _Facts(error=str(exc))
        except Exception as exc:
            return _Facts(error=f"{path.name}: cannot be read ({type(exc).__name__}: {exc})")
        return _Facts(info.name, info.architecture, info.n_params, info.quant_type, info.context_length)

    def _entry(self, group: list[_Candidate], fresh: dict[str, dict[str, Any]]) -> ModelEntry | None:
        first = group[0]
        m = SPLIT_RE.match(first.path.name)
        if m:
            expected = split_part_paths(first.path)
            present = {_abs(c.path): c for c in group}
            paths = tuple(expected)
            missing = tuple(p for p in expected if _abs(p) not in present and not p.exists())
            file_name = f"{m.group('stem')}.gguf ({len(expected)} parts)"
        else:
            paths = (first.path,)
            missing = ()
            file_name = first.path.name
        facts_list = []
        size = 0
        errors = []
        for p in paths:
            if p in missing:
                continue
            f, s = self._facts(p, fresh)
            facts_list.append((p, f))
            size += s
            if f.error:
                errors.append(f.error)
        head = next((f for p, f in facts_list if p == paths[0]), None)
        if head is not None and head.architecture == "clip":
            return None  # a multimodal projector, not a chat model
        if missing:
            names = ", ".join(p.name for p in missing)
            errors.insert(
                0,
                f"{file_name}: {len(missing)} of {len(paths)} parts missing: {names} "
                f"(expected in {paths[0].parent}). Download or copy the missing part(s) again",
            )
        name = (head.name if head and head.name else None) or (m.group("stem") if m else first.path.stem)
        return ModelEntry(
            path=paths[0],
            paths=paths,
            name=name,
            file_name=file_name,
            architecture=(head.architecture if head else "") or "unknown",
            n_params=sum(f.n_params for _, f in facts_list),
            quant=(head.quant if head else "") or "",
            size=size,
            context_length=head.context_length if head else 0,
            last_used=self._usage.get(_abs(paths[0])),
            source=first.source,
            source_label=first.label,
            repo_id=first.repo_id,
            error="; ".join(errors) if errors else None,
            missing_parts=missing,
        )

    # --- usage -----------------------------------------------------------------------------------
    def mark_used(self, path: os.PathLike[str] | str, when: float | None = None) -> None:
        """Record that the model at ``path`` was loaded now (or at ``when``, seconds since the epoch).

        Raises:
            OSError: the usage file cannot be written (names it).
        """
        self._usage[_abs(Path(path))] = time.time() if when is None else when
        self._save_json(self.usage_file, {"version": 1, "last_used": self._usage}, raise_errors=True)
        self.entries = [replace(e, last_used=self._usage.get(_abs(e.path), e.last_used)) for e in self.entries]

    # --- delete / import -------------------------------------------------------------------------
    def delete(self, entry: ModelEntry) -> list[Path]:
        """Delete a model's files: every part (the caller asks the person first).

        For a Hugging Face cache entry the snapshot link and its blob are
        removed (the blob only when no other snapshot of the repo uses it).
        Empty folders left inside the models folder are removed too.

        Returns:
            The paths deleted.

        Raises:
            OSError: a file could not be deleted; the message names it (parts
                deleted before the failure stay deleted).
        """
        deleted: list[Path] = []
        for p in entry.paths:
            if not p.exists() and not p.is_symlink():
                continue
            try:
                if entry.source == SOURCE_HF_CACHE and p.is_symlink():
                    blob = Path(os.path.abspath(p.parent / os.readlink(p)))
                    p.unlink()
                    deleted.append(p)
                    if blob.exists() and not _blob_still_used(blob):
                        blob.unlink()
                        deleted.append(blob)
                else:
                    p.unlink()
                    deleted.append(p)
            except OSError as exc:
                raise OSError(exc.errno, f"could not delete {p}: {exc.strerror or exc}") from exc
        models = _abs(self.paths.models_dir)
        parent = entry.path.parent
        while _abs(parent).startswith(models + os.sep) and parent.is_dir():
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
        if _abs(entry.path) in self._usage:
            self._usage.pop(_abs(entry.path))
            self._save_json(self.usage_file, {"version": 1, "last_used": self._usage})
        self.entries = [e for e in self.entries if e.path != entry.path]
        return deleted

    def import_file(
        self, src: os.PathLike[str] | str, *, move: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> ModelEntry:
        """Copy (or move) a GGUF file into the models folder, atomically.

        Each file is copied to a hidden temporary name in the models folder and
        renamed to its final name when complete, so an interrupted import never
        shows up as a model. A split model brings all its parts (the first last).

        Args:
            src: the file (any part of a split model).
            move: move instead of copy (a rename when on the same disk).
            progress: ``progress(bytes_done, bytes_total)``, called from this thread.

        Returns:
            The new entry.

        Raises:
            GGUFError: ``src`` is not a usable GGUF model.
            FileNotFoundError: a part of a split model is missing (named).
            FileExistsError: a file of that name is already in the models folder.
            OSError: not enough space (both sizes in the message) or a copy failure.
        """
        src_path = Path(src)
        parts = split_part_paths(src_path) or [src_path]
        missing = [p for p in parts if not p.is_file()]
        if missing:
            raise FileNotFoundError(errno.ENOENT, "missing: " + ", ".join(str(p) for p in missing))
        read_gguf_info(parts[0])  # raises GGUFError with a clear message
        dest_dir = self.paths.models_dir
        dest_dir.mkdir(parents=True, exist_ok=True)
        dests = [dest_dir / p.name for p in parts]
        for d in dests:
            if d.exists():
                raise FileExistsError(errno.EEXIST, f"{d.name} is already in the models folder", str(d))
        total = sum(p.stat().st_size for p in parts)
        same_disk = move and all(p.stat().st_dev == dest_dir.stat().st_dev for p in parts)
        if not same_disk:
            free = shutil.disk_usage(dest_dir).free
            if total > free:
                raise OSError(
                    errno.ENOSPC,
                    f"Not enough disk space to import {parts[0].name}: it needs "
                    f"{format_bytes(total)} but only {format_bytes(free)} is free on "
                    f"the disk holding {dest_dir}",
                )
        done = 0
        order = list(zip(parts, dests, strict=True))
        order = order[1:] + order[:1]
        for p, d in order:
            if same_disk:
                os.replace(p, d)
                done += d.stat().st_size
                if progress:
                    progress(done, total)
                continue
            done = _copy_atomic(p, d, done, total, progress)
            if move:
                p.unlink()
        self.scan()
        entry = self.find(dests[0])
        if entry is None:  # pragma: no cover - the file was just put there
            raise OSError(errno.ENOENT, f"imported {dests[0]} but it is not listed")
        return entry

    # --- JSON helpers ----------------------------------------------------------------------------
    @staticmethod
    def _load_json(path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _save_json(path: Path, data: dict[str, Any], *, raise_errors: bool = False) -> None:
        try:
            atomic_write_text(path, json.dumps(data, ensure_ascii=False))
        except OSError as exc:
            if raise_errors:
                raise
            log.warning("could not write %s: %s", path, exc)


def is_model_file_name(name: str) -> bool:
    """Whether a file of that name is a model the library lists: ``*.gguf``, not a projector
    (``mmproj*``) nor a hidden file."""
    low = name.lower()
    return low.endswith(".gguf") and not low.startswith(("mmproj", "."))


def _abs(p: Path) -> str:
    return os.path.abspath(p)


def _real(p: Path) -> str:
    try:
        return os.path.realpath(p)
    except OSError:  # pragma: no cover
        return _abs(p)


def _identity(p: Path) -> tuple[int, int] | str:
    """What makes two paths the same file: its device and inode (a hard link, a symlink, a folder
    reached through two library folders or a linked folder), else its resolved path."""
    try:
        st = p.stat()
    except OSError:
        return _real(p)
    return (st.st_dev, st.st_ino) if st.st_ino else _real(p)


def _blob_still_used(blob: Path) -> bool:
    """Whether a snapshot of the blob's cache repo still links to it."""
    repo = blob.parent.parent
    snaps = repo / "snapshots"
    if not snaps.is_dir():
        return False
    for link in snaps.rglob("*"):
        if link.is_symlink() and Path(os.path.abspath(link.parent / os.readlink(link))) == blob:
            return True
    return False


def _copy_atomic(src: Path, dest: Path, done: int, total: int, progress: Callable[[int, int], None] | None) -> int:
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            while block := fin.read(COPY_CHUNK):
                fout.write(block)
                done += len(block)
                if progress:
                    progress(done, total)
            fout.flush()
            os.fsync(fout.fileno())
        shutil.copystat(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return done

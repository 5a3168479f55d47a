"""What the Hub lists, as values: search results, GGUF files (split models grouped), quants, starters.

:func:`group_gguf_files` turns a repository's file listing into downloadable
:class:`HubFile` items (the parts of ``x-00001-of-00003.gguf`` form one);
:func:`quant_from_filename` and :func:`model_key` read a file name;
:func:`recommend` picks the largest file that fits. No network here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath

from app.core.gguf.gguf_info import SPLIT_RE
from app.core.hardware.fit import FitReport, Verdict
from app.core.models.hub_http import repo_page_url

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

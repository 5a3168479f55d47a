"""GGUF facts and validation, before llama.cpp ever sees a file.

:func:`read_gguf_info` reads a GGUF file's header (metadata key/values and the
tensor table) and checks that the file is whole. It gives one
:class:`GGUFError` that names the file and says what is wrong and what to do,
for the inputs that make llama.cpp abort or print garbage: an empty file, a
text file renamed ``.gguf``, an old GGML ``.bin``, a truncated download, a
corrupt header.

Why not ``gguf.GGUFReader``: the llama.cpp project's reader builds two numpy
views per array element, so a file with a 262,144-entry vocabulary takes about
19 s to open (measured on Gemma 3 270M, 2 cores) and 4 s for SmolLM2's 49,152.
This module walks the same layout (``ggml/include/gguf.h``, docs/gguf.md in
llama.cpp) in one pass, skipping the contents of large arrays, and takes its
type tables from the ``gguf`` package (``GGUFValueType``,
``GGMLQuantizationType``, ``GGML_QUANT_SIZES``, ``LlamaFileType``). A test
holds every field and tensor it reads against ``GGUFReader`` on real models.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gguf

GGUF_MAGIC_BYTES = b"GGUF"
# Old GGML-family magics as they appear on disk (little-endian uint32 of 'ggml', 'ggmf', 'ggjt', 'ggla', 'ggsn').
_OLD_GGML_MAGICS = {b"lmgg": "GGML", b"fmgg": "GGMF", b"tjgg": "GGJT", b"algg": "GGLA", b"nsgg": "GGSN"}
DEFAULT_ALIGNMENT = 32
# Arrays longer than this keep only their length (vocabularies, merges, scores).
SMALL_ARRAY_LIMIT = 64
SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

# Sliding-window layer patterns llama.cpp applies per architecture when the file
# does not carry ``{arch}.attention.sliding_window_pattern``.
# Source: llama.cpp src/models/*.cpp, ``load_swa_pattern(ml, n_pattern, dense_first)``;
# llama_hparams::set_swa_pattern in src/llama-hparams.cpp gives the layer rule.
SWA_PATTERNS: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False),
    "gemma3": (6, False),
    "gemma3n": (5, False),
    "gemma-embedding": (6, False),
    "cohere2": (4, False),
    "gpt-oss": (2, False),
    "exaone4": (4, False),
    "olmo2": (4, False),
    "afmoe": (4, False),
    "plamo3": (8, False),
    "smallthinker": (4, True),
    "modern-bert": (3, True),
}


class GGUFError(ValueError):
    """A file is not a usable GGUF model.

    Attributes:
        path: the file.
        problem: what is wrong, in a person's words.
        advice: what to do about it.
    """

    def __init__(self, path: os.PathLike[str] | str, problem: str, advice: str) -> None:
        self.path = Path(path)
        self.problem = problem
        self.advice = advice
        end = "" if advice.endswith((".", "!", "?")) else "."
        super().__init__(f"{self.path.name}: {problem}. {advice}{end}")

    @property
    def message(self) -> str:
        """The full text for a dialog: file name, problem and advice."""
        return str(self)


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table.

    Attributes:
        name: tensor name, e.g. ``blk.0.attn_q.weight``.
        shape: dimensions as stored (GGUF order, innermost first).
        type_name: ggml type, e.g. ``Q4_K`` or ``F32``.
        n_elements: number of values.
        n_bytes: bytes on disk.
        offset: bytes from the start of the data section.
    """

    name: str
    shape: tuple[int, ...]
    type_name: str
    n_elements: int
    n_bytes: int
    offset: int


@dataclass(frozen=True)
class GGUFInfo:
    """What a GGUF file says about its model. Plain values, safe to pickle.

    Sizes are in bytes, lengths in tokens.
    """

    path: str
    file_size: int
    version: int
    metadata: dict[str, Any]
    array_lengths: dict[str, int]
    tensors: tuple[TensorInfo, ...]
    data_offset: int
    token_texts: dict[int, str] = field(default_factory=dict)

    # --- general -----------------------------------------------------------------
    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def name(self) -> str:
        """The model's name from its metadata, or the file name."""
        name = self.metadata.get("general.name")
        if isinstance(name, str) and name.strip():
            return name.strip()
        return Path(self.path).stem

    def arch_key(self, suffix: str, default: Any = None) -> Any:
        """Value of ``{architecture}.{suffix}``, e.g. ``arch_key("context_length")``."""
        return self.metadata.get(f"{self.architecture}.{suffix}", default)

    @property
    def n_params(self) -> int:
        """Parameter count: the sum of all tensors' elements (this file only)."""
        return sum(t.n_elements for t in self.tensors)

    @property
    def tensor_bytes(self) -> int:
        """Bytes of weights in this file (what llama.cpp maps into memory)."""
        return sum(t.n_bytes for t in self.tensors)

    @property
    def bits_per_weight(self) -> float:
        """Average bits per parameter over all tensors (quantization's net effect)."""
        n = self.n_params
        return 8.0 * self.tensor_bytes / n if n else 0.0

    @property
    def quant_type(self) -> str:
        """The file's quantization, e.g. ``Q4_K_M`` (from ``general.file_type``).

        Falls back to the most common weight type by bytes when the key is absent.
        """
        ft = self.metadata.get("general.file_type")
        if isinstance(ft, int):
            try:
                name = gguf.LlamaFileType(ft).name
            except ValueError:
                name = ""
            if name:
                name = name.removeprefix("MOSTLY_")
                return "F32" if name == "ALL_F32" else name
        by_bytes: Counter[str] = Counter()
        for t in self.tensors:
            if len(t.shape) >= 2:
                by_bytes[t.type_name] += t.n_bytes
        return by_bytes.most_common(1)[0][0] if by_bytes else "unknown"

    @property
    def tensor_types(self) -> dict[str, tuple[int, int]]:
        """``{ggml type: (tensor count, bytes)}``, largest first."""
        acc: dict[str, list[int]] = {}
        for t in self.tensors:
            a = acc.setdefault(t.type_name, [0, 0])
            a[0] += 1
            a[1] += t.n_bytes
        return {k: (v[0], v[1]) for k, v in sorted(acc.items(), key=lambda kv: -kv[1][1])}

    # --- shape -----------------------------------------------------------------------
    @property
    def context_length(self) -> int:
        """Trained context length (tokens); 0 when the file does not say."""
        return int(self.arch_key("context_length", 0) or 0)

    @property
    def n_embd(self) -> int:
        """Hidden size: the length of each token's embedding vector."""
        return int(self.arch_key("embedding_length", 0) or 0)

    @property
    def n_layer(self) -> int:
        return int(self.arch_key("block_count", 0) or 0)

    @property
    def n_head(self) -> int:
        v = self.arch_key("attention.head_count", 0)
        return int(max(v) if isinstance(v, (list, tuple)) else v or 0)

    def n_head_kv_layer(self, il: int) -> int:
        """KV heads of layer ``il`` (GQA); the key may be one number or one per layer."""
        v = self.arch_key("attention.head_count_kv")
        if v is None:
            return self.n_head
        if isinstance(v, (list, tuple)):
            return int(v[il]) if il < len(v) else int(v[-1])
        return int(v)

    @property
    def n_embd_head_k(self) -> int:
        """Key head size: ``attention.key_length``, else n_embd / n_head."""
        v = self.arch_key("attention.key_length")
        if v:
            return int(v)
        return self.n_embd // self.n_head if self.n_head else 0

    @property
    def n_embd_head_v(self) -> int:
        """Value head size: ``attention.value_length``, else n_embd / n_head."""
        v = self.arch_key("attention.value_length")
        if v:
            return int(v)
        return self.n_embd // self.n_head if self.n_head else 0

    @property
    def sliding_window(self) -> int:
        """Sliding-window size in tokens of the SWA layers (0 = none)."""
        return int(self.arch_key("attention.sliding_window", 0) or 0)

    def swa_layers(self) -> tuple[bool, ...]:
        """For each layer, whether it uses sliding-window attention.

        Rule and defaults from llama.cpp (``llama_hparams::set_swa_pattern``,
        src/llama-hparams.cpp; per-arch patterns in src/models/*.cpp). A
        ``sliding_window_pattern`` key in the file wins: an int n_pattern, or
        one bool per layer.
        """
        n = self.n_layer
        if self.sliding_window <= 0:
            return (False,) * n
        key = self.arch_key("attention.sliding_window_pattern")
        if isinstance(key, (list, tuple)) and len(key) >= n:
            return tuple(bool(x) for x in key[:n])
        n_pattern, dense_first = SWA_PATTERNS.get(self.architecture, (0, False))
        if isinstance(key, int):
            n_pattern = key
        if n_pattern == 0 and self.architecture not in SWA_PATTERNS and not isinstance(key, int):
            # llama.cpp marks no layer as SWA for architectures it does not pattern.
            return (False,) * n
        if dense_first:
            return tuple(n_pattern == 0 or (il % n_pattern != 0) for il in range(n))
        return tuple(n_pattern == 0 or (il % n_pattern < n_pattern - 1) for il in range(n))

    @property
    def n_vocab(self) -> int:
        n = self.array_lengths.get("tokenizer.ggml.tokens")
        if n:
            return n
        return int(self.arch_key("vocab_size", 0) or 0)

    @property
    def expert_count(self) -> int:
        return int(self.arch_key("expert_count", 0) or 0)

    # --- tokenizer and chat -----------------------------------------------------------------
    @property
    def chat_template(self) -> str | None:
        t = self.metadata.get("tokenizer.chat_template")
        return t if isinstance(t, str) and t.strip() else None

    @property
    def has_chat_template(self) -> bool:
        return self.chat_template is not None

    @property
    def bos_token_id(self) -> int | None:
        v = self.metadata.get("tokenizer.ggml.bos_token_id")
        return int(v) if v is not None else None

    @property
    def eos_token_id(self) -> int | None:
        v = self.metadata.get("tokenizer.ggml.eos_token_id")
        return int(v) if v is not None else None

    @property
    def tokenizer_model(self) -> str:
        return str(self.metadata.get("tokenizer.ggml.model", ""))

    @property
    def embedding_tensor(self) -> TensorInfo | None:
        """``token_embd.weight``: the [n_vocab x n_embd] lookup table."""
        for t in self.tensors:
            if t.name == "token_embd.weight":
                return t
        return None

    # --- split files -------------------------------------------------------------------------
    @property
    def split_count(self) -> int:
        return int(self.metadata.get("split.count", 1) or 1)

    @property
    def split_no(self) -> int:
        return int(self.metadata.get("split.no", 0) or 0)

    def split_paths(self) -> list[Path]:
        """All parts' paths for a split model (``-00001-of-00003.gguf``), else [path]."""
        return split_part_paths(Path(self.path)) or [Path(self.path)]

    def missing_parts(self) -> list[Path]:
        """Parts of a split model that are not on disk (names the missing files)."""
        return [p for p in self.split_paths() if not p.exists()]

    def summary(self) -> str:
        """One line: name, architecture, params, quant, size."""
        return (
            f"{self.name} ({self.architecture}, {format_count(self.n_params)} params, "
            f"{self.quant_type}, {format_bytes(self.file_size)})"
        )


def split_part_paths(path: Path) -> list[Path]:
    """Every part's path when ``path`` is named like ``x-00001-of-00003.gguf``, else []."""
    m = SPLIT_RE.match(path.name)
    if not m:
        return []
    count = int(m.group("count"))
    width = len(m.group("no"))
    return [path.with_name(f"{m.group('stem')}-{i:0{width}d}-of-{m.group('count')}.gguf") for i in range(1, count + 1)]


def format_bytes(n: float) -> str:
    """Human-readable size in binary units (``97.7 MiB``)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def format_count(n: float) -> str:
    """``134.5M``, ``7.2B``, ``512``."""
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}"
    return f"{int(n)}"


class GGUFHeaderIncomplete(GGUFError):
    """The bytes given to :func:`read_gguf_info_bytes` end inside the header.

    Not a damaged file: the caller holds only a prefix of it and must fetch more.

    Attributes:
        needed: the parser needed at least this many bytes from the start of
            the file (a lower bound: more may be needed after that).
        have: how many bytes it was given.
    """

    def __init__(self, path: os.PathLike[str] | str, needed: int, have: int) -> None:
        self.needed = needed
        self.have = have
        super().__init__(
            path,
            f"the header continues past the first {have:,} bytes (at least {needed:,} are needed)",
            "Fetch more of the file",
        )


class _Cursor:
    """Little-endian reads over a buffer (a memory map or bytes).

    ``file_size`` is the whole file's size; the buffer may hold only a prefix of
    it (``partial``). An overrun past the end of the file is a truncated header;
    an overrun past the end of a partial buffer, still inside the file, raises
    :class:`GGUFHeaderIncomplete`.
    """

    def __init__(self, buf: Any, path: Path, file_size: int | None = None, partial: bool = False) -> None:
        self.buf = buf
        self.size = len(buf)
        self.file_size = self.size if file_size is None else file_size
        self.partial = partial
        self.off = 0
        self.path = path

    def _need(self, n: int) -> None:
        if n < 0 or self.off + n > self.size:
            if self.partial and n >= 0 and self.off + n <= self.file_size:
                raise GGUFHeaderIncomplete(self.path, self.off + n, self.size)
            if n < 0 or n > self.file_size:
                # A length no file of this size can hold: the header is damaged, not cut short.
                raise GGUFError(
                    self.path,
                    f"its header is damaged (at byte {self.off:,} it claims {n:,} bytes, more than the whole file)",
                    "Download the file again; if it happens again, the file was written by a broken converter",
                )
            raise GGUFError(
                self.path,
                f"the file ends inside its header (at byte {self.off:,} of {self.file_size:,}); it is cut short",
                "The download or copy is incomplete: download the file again",
            )

    def unpack(self, fmt: str) -> Any:
        s = struct.calcsize(fmt)
        self._need(s)
        v = struct.unpack_from(fmt, self.buf, self.off)
        self.off += s
        return v[0] if len(v) == 1 else v

    def string(self) -> str:
        n = self.unpack("<Q")
        self._need(n)
        raw = self.buf[self.off : self.off + n]
        self.off += n
        text: str = raw.decode("utf-8", errors="replace")
        return text

    def skip_string(self) -> None:
        n = self.unpack("<Q")
        self._need(n)
        self.off += n


_SCALAR_FMT = {
    gguf.GGUFValueType.UINT8: "<B",
    gguf.GGUFValueType.INT8: "<b",
    gguf.GGUFValueType.UINT16: "<H",
    gguf.GGUFValueType.INT16: "<h",
    gguf.GGUFValueType.UINT32: "<I",
    gguf.GGUFValueType.INT32: "<i",
    gguf.GGUFValueType.FLOAT32: "<f",
    gguf.GGUFValueType.BOOL: "<?",
    gguf.GGUFValueType.UINT64: "<Q",
    gguf.GGUFValueType.INT64: "<q",
    gguf.GGUFValueType.FLOAT64: "<d",
}


def _value_type(cur: _Cursor, raw: int, key: str) -> gguf.GGUFValueType:
    try:
        return gguf.GGUFValueType(raw)
    except ValueError:
        raise GGUFError(
            cur.path,
            f"its header is damaged (metadata key '{key}' has unknown value type {raw})",
            "Download the file again; if it persists, the file was written by a broken converter",
        ) from None


def _read_value(
    cur: _Cursor, vtype: gguf.GGUFValueType, key: str, arrays: dict[str, int], array_offsets: dict[str, int]
) -> Any:
    if vtype == gguf.GGUFValueType.STRING:
        return cur.string()
    if vtype in _SCALAR_FMT:
        return cur.unpack(_SCALAR_FMT[vtype])
    if vtype == gguf.GGUFValueType.ARRAY:
        itype = _value_type(cur, cur.unpack("<I"), key)
        count = cur.unpack("<Q")
        if count > cur.file_size:
            raise GGUFError(
                cur.path, f"its header is damaged (array '{key}' claims {count:,} items)", "Download the file again"
            )
        arrays[key] = count
        array_offsets[key] = cur.off
        if itype == gguf.GGUFValueType.STRING:
            if count <= SMALL_ARRAY_LIMIT:
                return [cur.string() for _ in range(count)]
            for _ in range(count):
                cur.skip_string()
            return None
        if itype in _SCALAR_FMT:
            fmt = _SCALAR_FMT[itype]
            size = struct.calcsize(fmt)
            cur._need(size * count)
            if count <= SMALL_ARRAY_LIMIT:
                vals = list(struct.unpack_from("<" + fmt[1] * count, cur.buf, cur.off))
                cur.off += size * count
                return vals
            cur.off += size * count
            return None
        # Nested arrays: skip item by item.
        for _ in range(count):
            _read_value(cur, itype, key, {}, {})
        return None
    raise GGUFError(cur.path, f"its header is damaged (unknown value type for '{key}')", "Download the file again")


def _sniff_not_gguf(path: Path, head: bytes) -> GGUFError:
    if head[:4] in _OLD_GGML_MAGICS:
        fmt = _OLD_GGML_MAGICS[head[:4]]
        return GGUFError(
            path,
            f"this is an old {fmt} model file (the format llama.cpp used before GGUF, August 2023); "
            "llama.cpp no longer loads it",
            "Download a GGUF version of this model, or convert it with llama.cpp's convert_llama_ggml_to_gguf.py",
        )
    sample = head[:64]
    printable = sum(32 <= b < 127 or b in (9, 10, 13) for b in sample)
    if sample and printable / len(sample) > 0.9:
        preview = sample[:24].decode("ascii", errors="replace").replace("\n", " ").strip()
        if preview.lower().startswith(("<!doctype", "<html", "version https://git-lfs")):
            what = "a web page or a Git LFS pointer, not the model itself"
        else:
            what = "a text file"
        return GGUFError(
            path,
            f'this is not a GGUF model: it is {what} (it starts with "{preview}")',
            "Choose a .gguf model file; if you downloaded it, the download saved the wrong thing",
        )
    return GGUFError(
        path,
        f"this is not a GGUF model (its first bytes are {head[:4].hex(' ')}, a GGUF file starts with 'GGUF')",
        "Choose a .gguf model file",
    )


def read_gguf_info(path: os.PathLike[str] | str, *, check_tensors: bool = True) -> GGUFInfo:
    """Read a GGUF file's metadata and tensor table, and check that the file is whole.

    Args:
        path: the ``.gguf`` file.
        check_tensors: also check that every tensor's data lies inside the file
            (catches truncated downloads). Cheap: no tensor data is read.

    Returns:
        A :class:`GGUFInfo` with metadata (arrays of more than 64 items keep only
        their length, in ``array_lengths``), the tensor table and sizes in bytes.

    Raises:
        GGUFError: the file is missing, empty, not GGUF, an old GGML file, an
            unsupported GGUF version, damaged or cut short. The message names
            the file, says what is wrong and what to do.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise GGUFError(
            p, f"the file does not exist (looked for {p})", "Check the path, or pick the file again"
        ) from None
    except OSError as exc:
        raise GGUFError(p, f"the file cannot be read ({exc.strerror or exc})", "Check its permissions") from None
    if p.is_dir():
        raise GGUFError(p, "this is a folder, not a model file", "Choose a .gguf file inside it")
    if size == 0:
        raise GGUFError(p, "the file is empty (0 bytes)", "The download or copy failed: download the model again")
    try:
        fh = open(p, "rb")  # noqa: SIM115 - closed by the with below; open errors get their own message
    except OSError as exc:
        raise GGUFError(p, f"the file cannot be opened ({exc.strerror or exc})", "Check its permissions") from None
    with fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return _parse_header(mm, p, size, check_tensors=check_tensors, partial=False)


class MissingSplitParts(GGUFError):
    """A split model (``-00001-of-00003.gguf``) with parts missing from its folder.

    Attributes:
        missing: the missing parts' paths.
    """

    def __init__(self, path: os.PathLike[str] | str, n_parts: int, missing: list[Path]) -> None:
        self.missing = tuple(missing)
        names = ", ".join(m.name for m in missing)
        verb = "is" if len(missing) == 1 else "are"
        super().__init__(
            path,
            f"this model is split into {n_parts} files and {names} {verb} missing",
            "Download the missing part(s) into the same folder",
        )


def check_loadable(path: os.PathLike[str] | str) -> GGUFInfo:
    """The one check before a model is loaded (by the window and again by the engine): the file
    is a whole GGUF (:func:`read_gguf_info`) and every part of a split model is beside it.

    Returns:
        The file's :class:`GGUFInfo`.

    Raises:
        GGUFError: the file is unusable (:func:`read_gguf_info`), or
            :class:`MissingSplitParts` naming the missing parts. The message names the
            file, what is wrong and what to do.
    """
    info = read_gguf_info(path)
    missing = info.missing_parts()
    if missing:
        raise MissingSplitParts(path, len(info.split_paths()), missing)
    return info


def read_gguf_info_bytes(
    data: bytes | bytearray | memoryview,
    *,
    file_size: int,
    name: os.PathLike[str] | str = "model.gguf",
    check_tensors: bool = True,
) -> GGUFInfo:
    """Parse a GGUF header from the first bytes of a file (for example fetched
    with an HTTP Range request), with the same parser as :func:`read_gguf_info`.

    Args:
        data: a prefix of the file (or all of it), starting at byte 0.
        file_size: the whole file's size in bytes (from the Hub listing); used
            for the sanity checks and, with ``check_tensors``, to check that the
            tensors fit in the file.
        name: what to call the file in messages and :attr:`GGUFInfo.path`
            (a file name or URL path).
        check_tensors: check that every tensor's data lies inside ``file_size``.

    Returns:
        A :class:`GGUFInfo` (``file_size`` is the whole file's size).

    Raises:
        GGUFHeaderIncomplete: ``data`` ends inside the header; ``needed`` says
            how many bytes the parser wanted (fetch more and call again).
        GGUFError: the bytes are not GGUF, an unsupported version or damaged.
    """
    p = Path(name)
    if file_size <= 0:
        raise GGUFError(p, "the file is empty (0 bytes)", "The file on the server is not a model")
    buf = bytes(data[:file_size])
    if len(buf) < 4 and file_size >= 4:
        raise GGUFHeaderIncomplete(p, 4, len(buf))
    return _parse_header(buf, p, file_size, check_tensors=check_tensors, partial=len(buf) < file_size)


def _parse_header(buf: Any, p: Path, size: int, *, check_tensors: bool, partial: bool) -> GGUFInfo:
    """The one GGUF header parser, over a memory map of the whole file or a byte prefix."""
    head = bytes(buf[:64])
    if head[:4] != GGUF_MAGIC_BYTES:
        raise _sniff_not_gguf(p, head)
    cur = _Cursor(buf, p, size, partial)
    cur.off = 4
    version = cur.unpack("<I")
    if version & 0xFFFF == 0 and version != 0:
        raise GGUFError(
            p,
            "this GGUF file is big-endian (made for s390x machines)",
            "Download the little-endian version of the model",
        )
    if version not in (2, 3):
        raise GGUFError(
            p,
            f"this GGUF file has version {version}; llama.cpp reads versions 2 and 3",
            "Download a current GGUF of this model" if version < 2 else "Update Glassbox (the file is newer than it)",
        )
    n_tensors = cur.unpack("<Q")
    n_kv = cur.unpack("<Q")
    if n_tensors > size or n_kv > size:
        raise GGUFError(
            p, f"its header is damaged ({n_tensors:,} tensors, {n_kv:,} keys claimed)", "Download the file again"
        )
    metadata: dict[str, Any] = {}
    arrays: dict[str, int] = {}
    array_offsets: dict[str, int] = {}
    for _ in range(n_kv):
        key = cur.string()
        vtype = _value_type(cur, cur.unpack("<I"), key)
        metadata[key] = _read_value(cur, vtype, key, arrays, array_offsets)
    metadata = {k: v for k, v in metadata.items() if v is not None}

    tensors_raw = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.unpack("<I")
        if n_dims > 8:
            raise GGUFError(
                p, f"its tensor table is damaged ('{name}' has {n_dims} dimensions)", "Download the file again"
            )
        dims = tuple(cur.unpack("<Q") for _ in range(n_dims))
        ttype = cur.unpack("<I")
        offset = cur.unpack("<Q")
        tensors_raw.append((name, dims, ttype, offset))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT) or DEFAULT_ALIGNMENT)
    data_offset = (cur.off + alignment - 1) // alignment * alignment

    tensors = []
    for name, dims, ttype, offset in tensors_raw:
        n_el = 1
        for d in dims:
            n_el *= d
        try:
            qtype = gguf.GGMLQuantizationType(ttype)
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
            n_bytes = n_el // block * type_size
            tname = qtype.name
        except (ValueError, KeyError):
            n_bytes = 0
            tname = f"type{ttype}"
        tensors.append(TensorInfo(name, dims, tname, n_el, n_bytes, offset))

    if check_tensors and tensors:
        end = max(data_offset + t.offset + t.n_bytes for t in tensors)
        if end > size:
            raise GGUFError(
                p,
                f"the file is cut short: it is {size:,} bytes but its tensors need {end:,} bytes "
                f"({100.0 * size / end:.0f}% present)",
                "The download or copy is incomplete: download the model again",
            )

    token_texts = _resolve_token_texts(cur, metadata, array_offsets)

    return GGUFInfo(
        path=str(p),
        file_size=size,
        version=version,
        metadata=metadata,
        array_lengths=arrays,
        tensors=tuple(tensors),
        data_offset=data_offset,
        token_texts=token_texts,
    )


def _resolve_token_texts(cur: _Cursor, metadata: dict[str, Any], array_offsets: dict[str, int]) -> dict[int, str]:
    """Texts of the special tokens named in the metadata (BOS, EOS, EOT...)."""
    start = array_offsets.get("tokenizer.ggml.tokens")
    if start is None:
        return {}
    wanted = {
        int(v)
        for k, v in metadata.items()
        if k.startswith("tokenizer.ggml.") and k.endswith("_token_id") and isinstance(v, int) and v >= 0
    }
    if not wanted:
        return {}
    out: dict[int, str] = {}
    cur.off = start
    limit = max(wanted)
    for i in range(limit + 1):
        if i in wanted:
            out[i] = cur.string()
        else:
            cur.skip_string()
    return out

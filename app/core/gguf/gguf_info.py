"""Reading and validating a GGUF header, before llama.cpp ever sees a file.

:func:`read_gguf_info` reads a GGUF file's header (metadata key/values and the
tensor table) into a :class:`~app.core.gguf.gguf_facts.GGUFInfo` and checks that the
file is whole (:func:`read_gguf_info_bytes` does the same for a prefix fetched
over HTTP). The values and their questions live in :mod:`app.core.gguf.gguf_facts`;
their public names import from here too. A bad file raises one
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

import hashlib
import mmap
import os
import struct
from pathlib import Path
from typing import Any

import gguf

from app.core.gguf.gguf_facts import (
    SPLIT_RE,
    SWA_PATTERNS,
    GGUFError,
    GGUFInfo,
    TensorInfo,
    format_bytes,
    format_count,
    split_part_paths,
)

GGUF_MAGIC_BYTES = b"GGUF"
# Old GGML-family magics as they appear on disk (little-endian uint32 of 'ggml', 'ggmf', 'ggjt', 'ggla', 'ggsn').
_OLD_GGML_MAGICS = {b"lmgg": "GGML", b"fmgg": "GGMF", b"tjgg": "GGJT", b"algg": "GGLA", b"nsgg": "GGSN"}
DEFAULT_ALIGNMENT = 32
# Arrays longer than this keep only their length (vocabularies, merges, scores).
SMALL_ARRAY_LIMIT = 64
# The vocabulary's first tokens hashed into GGUFInfo.vocab_head_sha256 (its fingerprint's part).
VOCAB_HEAD_TOKENS = 1024


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

    def __init__(self, buf: bytes | mmap.mmap, path: Path, file_size: int | None = None, partial: bool = False) -> None:
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
        fh = open(p, "rb")  # noqa: SIM115 - closed by the with below; opened apart to name an open error
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


def _parse_header(buf: bytes | mmap.mmap, p: Path, size: int, *, check_tensors: bool, partial: bool) -> GGUFInfo:
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
    vocab_head = _vocab_head_digest(cur, arrays, array_offsets)

    return GGUFInfo(
        path=str(p),
        file_size=size,
        version=version,
        metadata=metadata,
        array_lengths=arrays,
        tensors=tuple(tensors),
        data_offset=data_offset,
        token_texts=token_texts,
        vocab_head_sha256=vocab_head,
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


def _vocab_head_digest(cur: _Cursor, arrays: dict[str, int], array_offsets: dict[str, int]) -> str:
    """SHA-256 (hex) of the first :data:`VOCAB_HEAD_TOKENS` token texts, each as its GGUF bytes
    (length, then UTF-8); "" without a token list. About 1 ms: a 262,144-token vocabulary is not walked."""
    start = array_offsets.get("tokenizer.ggml.tokens")
    if start is None:
        return ""
    digest = hashlib.sha256()
    cur.off = start
    for _ in range(min(arrays.get("tokenizer.ggml.tokens", 0), VOCAB_HEAD_TOKENS)):
        at = cur.off
        cur.skip_string()
        digest.update(cur.buf[at : cur.off])
    return digest.hexdigest()


__all__ = [
    "DEFAULT_ALIGNMENT",
    "GGUF_MAGIC_BYTES",
    "SMALL_ARRAY_LIMIT",
    "SPLIT_RE",
    "SWA_PATTERNS",
    "VOCAB_HEAD_TOKENS",
    "GGUFError",
    "GGUFHeaderIncomplete",
    "GGUFInfo",
    "TensorInfo",
    "format_bytes",
    "format_count",
    "read_gguf_info",
    "read_gguf_info_bytes",
    "split_part_paths",
]

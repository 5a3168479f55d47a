"""Model files for tests: the real SmolLM2 and small synthetic GGUF files.

``smollm2_path()`` says where the real test model lives for the benches
(``GLASSBOX_TEST_SMOLLM2``, else ``/tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf``);
the tests take it from tests/conftest.py's ``smollm2`` fixture, which fails without it.

``write_gguf`` writes a valid GGUF v3 file from plain values (no llama.cpp, no
numpy): tiny models, split models named like llama.cpp's ``gguf-split``, and
header-only files that claim huge tensors (for fit verdicts).
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import gguf
import numpy as np

SMOLLM2_ENV = "GLASSBOX_TEST_SMOLLM2"
SMOLLM2_DEFAULT = Path("/tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf")
SMOLLM2_SIZE = 98_362_432
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def smollm2_path() -> Path:
    """Where the SmolLM2 135M Instruct Q4_1 test model should be (it may be absent)."""
    env = os.environ.get(SMOLLM2_ENV)
    return Path(env) if env else SMOLLM2_DEFAULT


def sha256_file(path: Path, chunk: int = 4 << 20) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


# --- a small GGUF writer ---------------------------------------------------------------------

_VT = gguf.GGUFValueType


def _enc_str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _enc_value(v: Any) -> tuple[int, bytes]:
    """(value type, encoded bytes) of a Python value. ints are UINT32 (INT32 if negative, UINT64 if large)."""
    if isinstance(v, bool):
        return _VT.BOOL, struct.pack("<?", v)
    if isinstance(v, int):
        if v < 0:
            return _VT.INT32, struct.pack("<i", v)
        if v >= 1 << 32:
            return _VT.UINT64, struct.pack("<Q", v)
        return _VT.UINT32, struct.pack("<I", v)
    if isinstance(v, float):
        return _VT.FLOAT32, struct.pack("<f", v)
    if isinstance(v, str):
        return _VT.STRING, _enc_str(v)
    if isinstance(v, (list, tuple)):
        items = list(v)
        if not items:
            return _VT.ARRAY, struct.pack("<IQ", _VT.UINT32, 0)
        itype, _ = _enc_value(items[0])
        body = b"".join(_enc_value(x)[1] for x in items)
        return _VT.ARRAY, struct.pack("<IQ", itype, len(items)) + body
    raise TypeError(f"cannot encode {type(v).__name__} in GGUF")


def tensor_nbytes(type_name: str, shape: Iterable[int]) -> int:
    qtype = gguf.GGMLQuantizationType[type_name]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = 1
    for d in shape:
        n *= d
    return n // block * size


def gguf_header(
    metadata: dict[str, Any], tensors: Iterable[tuple[str, tuple[int, ...], str]] = (), *, alignment: int = 32
) -> tuple[bytearray, int]:
    """The header :func:`write_gguf` writes for these (before the padding that aligns the data),
    and the size of the tensor data after it, bytes (each tensor aligned to ``alignment``)."""
    tensors = list(tensors)
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, value in metadata.items():
        vtype, body = _enc_value(value)
        out += _enc_str(key) + struct.pack("<I", vtype) + body
    offset = 0
    for name, shape, type_name in tensors:
        out += _enc_str(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", gguf.GGMLQuantizationType[type_name], offset)
        offset += tensor_nbytes(type_name, shape)
        offset = (offset + alignment - 1) // alignment * alignment
    return out, offset


def write_gguf(
    path: Path,
    metadata: dict[str, Any],
    tensors: Iterable[tuple[str, tuple[int, ...], str]] = (),
    *,
    write_data: bool = True,
    alignment: int = 32,
) -> Path:
    """Write a GGUF v3 file.

    Args:
        path: output file.
        metadata: key -> value (str, int, float, bool or a list of one of those).
        tensors: (name, shape, ggml type name such as ``F32`` or ``Q4_0``).
        write_data: write the tensor data (zeros, as a sparse extent); False
            writes only the header, so the file claims more data than it holds.
        alignment: data alignment in bytes.

    Returns:
        ``path``.
    """
    out, offset = gguf_header(metadata, tensors, alignment=alignment)
    header_end = (len(out) + alignment - 1) // alignment * alignment
    out += b"\0" * (header_end - len(out))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(out)
        if write_data and offset:
            fh.truncate(header_end + offset)
    return path


def llama_metadata(
    *,
    name: str = "Tiny Test",
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ctx_train: int = 2048,
    n_vocab: int = 80,
    file_type: int = 2,  # MOSTLY_Q4_0
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Metadata of a llama-architecture model with a ``n_vocab`` token vocabulary."""
    md: dict[str, Any] = {
        "general.architecture": "llama",
        "general.name": name,
        "general.file_type": file_type,
        "llama.context_length": n_ctx_train,
        "llama.embedding_length": n_embd,
        "llama.block_count": n_layer,
        "llama.attention.head_count": n_head,
        "llama.attention.head_count_kv": n_head_kv,
        "llama.feed_forward_length": n_embd * 4,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(n_vocab)],
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }
    md.update(extra or {})
    return md


def llama_tensors(
    *, n_layer: int = 2, n_embd: int = 64, n_vocab: int = 80, qtype: str = "Q4_0", n_head: int = 4, n_head_kv: int = 2
) -> list[tuple[str, tuple[int, ...], str]]:
    """A llama model's tensor table (shapes in GGUF order: innermost first)."""
    head_dim = n_embd // n_head
    kv = head_dim * n_head_kv
    t: list[tuple[str, tuple[int, ...], str]] = [("token_embd.weight", (n_embd, n_vocab), qtype)]
    for i in range(n_layer):
        t += [
            (f"blk.{i}.attn_norm.weight", (n_embd,), "F32"),
            (f"blk.{i}.attn_q.weight", (n_embd, n_embd), qtype),
            (f"blk.{i}.attn_k.weight", (n_embd, kv), qtype),
            (f"blk.{i}.attn_v.weight", (n_embd, kv), qtype),
            (f"blk.{i}.attn_output.weight", (n_embd, n_embd), qtype),
            (f"blk.{i}.ffn_norm.weight", (n_embd,), "F32"),
            (f"blk.{i}.ffn_gate.weight", (n_embd, n_embd * 4), qtype),
            (f"blk.{i}.ffn_up.weight", (n_embd, n_embd * 4), qtype),
            (f"blk.{i}.ffn_down.weight", (n_embd * 4, n_embd), qtype),
        ]
    t += [("output_norm.weight", (n_embd,), "F32")]
    return t


def write_tiny_model(path: Path, *, name: str = "Tiny Test", **kw: Any) -> Path:
    """A small, structurally valid llama GGUF (a few hundred KiB, zeros for weights)."""
    return write_gguf(path, llama_metadata(name=name, **kw), llama_tensors())


def write_split_model(
    folder: Path, stem: str, n_parts: int = 3, *, name: str = "Tiny Split", n_layer: int = 6, n_embd: int = 256
) -> list[Path]:
    """A model split like llama.cpp's gguf-split: ``{stem}-00001-of-0000N.gguf`` ...

    The first part holds all metadata; every part holds ``split.*`` keys and its
    share of the tensors (about 1 MiB per part with the defaults).
    """
    tensors = llama_tensors(n_layer=n_layer, n_embd=n_embd)
    per = -(-len(tensors) // n_parts)
    paths = []
    for i in range(n_parts):
        chunk = tensors[i * per : (i + 1) * per]
        split_keys = {"split.no": i, "split.count": n_parts, "split.tensors.count": len(tensors)}
        md = {**llama_metadata(name=name, n_layer=n_layer, n_embd=n_embd), **split_keys} if i == 0 else split_keys
        p = folder / f"{stem}-{i + 1:05d}-of-{n_parts:05d}.gguf"
        write_gguf(p, md, chunk)
        paths.append(p)
    return paths


def write_huge_header(
    path: Path, *, n_layer: int = 80, n_embd: int = 8192, n_vocab: int = 128_256, n_ctx_train: int = 131_072
) -> Path:
    """A header-only GGUF of a 70B-class F16 model (about 140 GB of claimed tensors)."""
    md = llama_metadata(
        name="Huge Test 70B",
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=64,
        n_head_kv=8,
        n_ctx_train=n_ctx_train,
        n_vocab=n_vocab,
        file_type=1,
    )
    return write_gguf(
        path,
        md,
        llama_tensors(n_layer=n_layer, n_embd=n_embd, n_vocab=n_vocab, qtype="F16", n_head=64, n_head_kv=8),
        write_data=False,
    )


# Gemma 3's turn check on SmolLM2's ChatML: a template that refuses roles that do not alternate.
STRICT_CHATML_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{% else %}{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def with_chat_template(src: Path, dst: Path, template: str) -> Path:
    """Copy the GGUF ``src`` to ``dst`` with ``tokenizer.chat_template`` set to ``template``.

    The header is rewritten (the template field replaced or added) and the tensor data
    copied unchanged after re-aligning, so the copy loads and generates like ``src``.

    Returns:
        ``dst``.
    """
    reader = gguf.GGUFReader(src)
    raw = np.memmap(src, mode="r")
    new_field = _enc_str("tokenizer.chat_template") + struct.pack("<I", _VT.STRING) + _enc_str(template)
    tensor_info_end = max(t.field.offset + sum(p.nbytes for p in t.field.parts) for t in reader.tensors)
    field = reader.fields.get("tokenizer.chat_template")
    if field is not None:
        start = field.offset
        end = field.offset + sum(p.nbytes for p in field.parts)
        header = bytes(raw[:start]) + new_field + bytes(raw[end:tensor_info_end])
    else:
        kv_count_at = 4 + 4 + 8  # magic, version, tensor count
        (n_kv,) = struct.unpack_from("<Q", bytes(raw[kv_count_at : kv_count_at + 8]))
        first_tensor = min(t.field.offset for t in reader.tensors)
        header = (
            bytes(raw[:kv_count_at])
            + struct.pack("<Q", n_kv + 1)
            + bytes(raw[kv_count_at + 8 : first_tensor])
            + new_field
            + bytes(raw[first_tensor:tensor_info_end])
        )
    alignment = reader.alignment
    header += b"\0" * ((-len(header)) % alignment)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(dst, "wb") as fh:
        fh.write(header)
        fh.write(memoryview(raw[reader.data_offset :]))
    return dst

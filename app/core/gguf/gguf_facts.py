"""What a GGUF header says, as values: :class:`GGUFInfo`, :class:`TensorInfo`, :class:`GGUFError`.

:class:`GGUFInfo` holds the metadata key/values and the tensor table that
:func:`app.core.gguf.gguf_info.read_gguf_info` reads, and answers the questions the
rest of Glassbox asks of a model (architecture, layers, heads, sliding-window
layers, vocabulary, chat template, quant type, bits per weight, split parts).
Also the byte and count formats used wherever sizes are shown.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gguf

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
    # SHA-256 of the vocabulary's first tokens (app.core.gguf.gguf_info.VOCAB_HEAD_TOKENS); "" unknown
    vocab_head_sha256: str = ""

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

    # --- tokenizer and chat -----------------------------------------------------------------
    @property
    def chat_template(self) -> str | None:
        t = self.metadata.get("tokenizer.chat_template")
        return t if isinstance(t, str) and t.strip() else None

    @property
    def has_chat_template(self) -> bool:
        return self.chat_template is not None

    @property
    def eos_token_id(self) -> int | None:
        v = self.metadata.get("tokenizer.ggml.eos_token_id")
        return int(v) if v is not None else None

    @property
    def embedding_tensor(self) -> TensorInfo | None:
        """``token_embd.weight``: the [n_vocab x n_embd] lookup table."""
        for t in self.tensors:
            if t.name == "token_embd.weight":
                return t
        return None

    # --- split files -------------------------------------------------------------------------
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

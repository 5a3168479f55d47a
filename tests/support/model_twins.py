"""Header twins of the two real test models, written with no model file at hand.

``write_smollm2_twin`` and ``write_gemma_twin`` write GGUF files whose headers say what the
real SmolLM2 135M Instruct Q4_1 and Gemma 3 270M Q4_K_M files say: every metadata scalar,
the chat template, the tensor table (names, shapes, types, in the files' order, so the same
offsets) and arrays of the same lengths; the data starts at the same offset and the files
have the same size. What differs: the token texts are made up (but for the special tokens),
and the tensor data is zeros or seeded pseudo-random bytes, not weights. So the header code
(gguf_info, architecture, memory, speed bound), the library, the Hub and the downloads are
tested on them in tests/unit; only llama.cpp needs the real files (tests/engine, which also
checks these twins against the real headers: tests/engine/test_model_twins.py).

The figures come from the real files (read with app.core.gguf.gguf_info.read_gguf_info).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.models import SMOLLM2_SIZE, gguf_header, sha256_file, write_gguf

Tensor = tuple[str, tuple[int, ...], str]

SMOLLM2_DATA_OFFSET = 1_785_664
GEMMA_DATA_OFFSET = 6_525_120
GEMMA_SIZE = 253_113_024

SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Every scalar of the real files' metadata, in their order (the long arrays are made below).
SMOLLM2_METADATA: dict[str, Any] = {
    "general.architecture": "llama",
    "general.type": "model",
    "general.name": "Smollm2 135M 8k Lc100K Mix1 Ep2",
    "general.organization": "HuggingFaceTB",
    "general.finetune": "8k-lc100k-mix1-ep2",
    "general.basename": "smollm2",
    "general.size_label": "135M",
    "general.license": "apache-2.0",
    "general.languages": ["en"],
    "llama.block_count": 30,
    "llama.context_length": 8192,
    "llama.embedding_length": 576,
    "llama.feed_forward_length": 1536,
    "llama.attention.head_count": 9,
    "llama.attention.head_count_kv": 3,
    "llama.rope.freq_base": 100000.0,
    "llama.attention.layer_norm_rms_epsilon": 1e-05,
    "general.file_type": 3,  # MOSTLY_Q4_1
    "llama.vocab_size": 49152,
    "llama.rope.dimension_count": 64,
    "tokenizer.ggml.add_space_prefix": False,
    "tokenizer.ggml.add_bos_token": False,
    "tokenizer.ggml.model": "gpt2",
    "tokenizer.ggml.pre": "smollm",
}
SMOLLM2_TOKENIZER_TAIL: dict[str, Any] = {
    "tokenizer.ggml.bos_token_id": 1,
    "tokenizer.ggml.eos_token_id": 2,
    "tokenizer.ggml.unknown_token_id": 0,
    "tokenizer.ggml.padding_token_id": 2,
    "tokenizer.chat_template": SMOLLM2_CHAT_TEMPLATE,
    "general.quantization_version": 2,
}
SMOLLM2_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SMOLLM2_MERGES = 48_900

GEMMA_METADATA: dict[str, Any] = {
    "general.architecture": "gemma3",
    "general.type": "model",
    "general.name": "Gemma 3 270m",
    "general.basename": "gemma-3",
    "general.size_label": "270M",
    "general.license": "gemma",
    "general.tags": ["gemma3", "gemma", "google", "text-generation"],
    "gemma3.context_length": 32768,
    "gemma3.embedding_length": 640,
    "gemma3.block_count": 18,
    "gemma3.feed_forward_length": 2048,
    "gemma3.attention.head_count": 4,
    "gemma3.attention.layer_norm_rms_epsilon": 1e-06,
    "gemma3.attention.key_length": 256,
    "gemma3.attention.value_length": 256,
    "gemma3.rope.freq_base": 1000000.0,
    "gemma3.attention.sliding_window": 512,
    "gemma3.attention.head_count_kv": 1,
    "tokenizer.ggml.model": "llama",
    "tokenizer.ggml.pre": "default",
}
GEMMA_TOKENIZER_TAIL: dict[str, Any] = {
    "tokenizer.ggml.bos_token_id": 2,
    "tokenizer.ggml.eos_token_id": 1,
    "tokenizer.ggml.unknown_token_id": 3,
    "tokenizer.ggml.padding_token_id": 0,
    "tokenizer.ggml.add_bos_token": True,
    "tokenizer.ggml.add_sep_token": False,
    "tokenizer.ggml.add_eos_token": False,
    "tokenizer.ggml.add_space_prefix": False,
    "general.quantization_version": 2,
    "general.file_type": 15,  # MOSTLY_Q4_K_M
}
GEMMA_SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]
GEMMA_VOCAB = 262_144
# Q4_K_M gives a few layers more bits (llama.cpp's use_more_bits): attn_v Q8_0 and ffn_down Q6_K there.
GEMMA_MORE_BITS_LAYERS = (0, 1, 4, 7, 10, 13, 15, 16, 17)


def smollm2_tensors() -> list[Tensor]:
    """SmolLM2 135M's tensor table in its file's order (layers sorted as text): token_embd Q8_0,
    Q4_1 matrices, F32 norms; tied embeddings (no output.weight)."""
    n_embd, n_ff, kv = 576, 1536, 3 * 64
    t: list[Tensor] = [("token_embd.weight", (n_embd, 49152), "Q8_0")]
    for i in sorted(range(30), key=str):  # the file's order: blk.0, blk.1, blk.10, blk.11 ...
        t += [
            (f"blk.{i}.attn_norm.weight", (n_embd,), "F32"),
            (f"blk.{i}.ffn_down.weight", (n_ff, n_embd), "Q4_1"),
            (f"blk.{i}.ffn_gate.weight", (n_embd, n_ff), "Q4_1"),
            (f"blk.{i}.ffn_up.weight", (n_embd, n_ff), "Q4_1"),
            (f"blk.{i}.ffn_norm.weight", (n_embd,), "F32"),
            (f"blk.{i}.attn_k.weight", (n_embd, kv), "Q4_1"),
            (f"blk.{i}.attn_output.weight", (n_embd, n_embd), "Q4_1"),
            (f"blk.{i}.attn_q.weight", (n_embd, n_embd), "Q4_1"),
            (f"blk.{i}.attn_v.weight", (n_embd, kv), "Q4_1"),
        ]
    return [*t, ("output_norm.weight", (n_embd,), "F32")]


def gemma_tensors() -> list[Tensor]:
    """Gemma 3 270M Q4_K_M's tensor table in its file's order (types per tensor as in the file)."""
    n_embd, n_ff, q, kv = 640, 2048, 4 * 256, 256
    t: list[Tensor] = [("output_norm.weight", (n_embd,), "F32"), ("token_embd.weight", (n_embd, GEMMA_VOCAB), "Q8_0")]
    for i in range(18):
        more = i in GEMMA_MORE_BITS_LAYERS
        t += [
            (f"blk.{i}.attn_k.weight", (n_embd, kv), "Q5_0"),
            (f"blk.{i}.attn_k_norm.weight", (kv,), "F32"),
            (f"blk.{i}.attn_norm.weight", (n_embd,), "F32"),
            (f"blk.{i}.attn_output.weight", (q, n_embd), "Q4_K"),
            (f"blk.{i}.attn_q.weight", (n_embd, q), "Q5_0"),
            (f"blk.{i}.attn_q_norm.weight", (kv,), "F32"),
            (f"blk.{i}.attn_v.weight", (n_embd, kv), "Q8_0" if more else "Q5_0"),
            (f"blk.{i}.ffn_down.weight", (n_ff, n_embd), "Q6_K" if more else "Q4_K"),
            (f"blk.{i}.ffn_gate.weight", (n_embd, n_ff), "Q5_0"),
            (f"blk.{i}.ffn_norm.weight", (n_embd,), "F32"),
            (f"blk.{i}.ffn_up.weight", (n_embd, n_ff), "Q5_0"),
            (f"blk.{i}.post_attention_norm.weight", (n_embd,), "F32"),
            (f"blk.{i}.post_ffw_norm.weight", (n_embd,), "F32"),
        ]
    return t


@dataclass(frozen=True)
class TwinFile:
    """A twin written to disk: its path and size in bytes."""

    path: Path
    size: int

    @cached_property
    def sha256(self) -> str:
        """Hex sha256 of the file's bytes (read once)."""
        return sha256_file(self.path)


def _write_twin(
    path: Path, metadata: dict[str, Any], tensors: list[Tensor], data_offset: int, size: int, *, seed: int | None
) -> TwinFile:
    """Write the twin; the last token's text is lengthened so the data starts at ``data_offset``.

    ``seed``: None for zeros as tensor data (a sparse file: nothing is written), else seeded
    pseudo-random bytes (numpy's default generator), so a byte served or written at the wrong
    offset changes the sha256.

    Raises:
        ValueError: the header is longer than the real one, or the data does not end at ``size``.
    """
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    header, data_size = gguf_header(metadata, tensors)
    pad = data_offset - len(header)
    if pad < 0 or data_offset + data_size != size:
        raise ValueError(f"the twin's header ({len(header)} bytes) or data ({data_size}) does not fit the real layout")
    tokens[-1] += "x" * pad
    write_gguf(path, metadata, tensors)
    if path.stat().st_size != size:
        raise ValueError(f"the twin is {path.stat().st_size} bytes, not {size}")
    if seed is not None:
        rng = np.random.default_rng(seed)
        with open(path, "r+b") as fh:
            fh.seek(data_offset)
            left = size - data_offset
            while left:
                block = rng.bytes(min(left, 8 << 20))
                fh.write(block)
                left -= len(block)
    return TwinFile(path, size)


def write_smollm2_twin(path: Path, *, seed: int | None = None) -> TwinFile:
    """The SmolLM2 135M Instruct Q4_1 twin (98,362,432 bytes, its header 1.7 MB, see the module docstring)."""
    n_vocab = 49152
    tokens = SMOLLM2_SPECIAL + [f"{i:x}" for i in range(len(SMOLLM2_SPECIAL), n_vocab)]
    md = {
        **SMOLLM2_METADATA,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [3] * 17 + [1] * (n_vocab - 17),
        "tokenizer.ggml.merges": [f"{i:x} {i + 1:x}" for i in range(SMOLLM2_MERGES)],
        **SMOLLM2_TOKENIZER_TAIL,
    }
    return _write_twin(path, md, smollm2_tensors(), SMOLLM2_DATA_OFFSET, SMOLLM2_SIZE, seed=seed)


def write_gemma_twin(path: Path, *, seed: int | None = None) -> TwinFile:
    """The Gemma 3 270M Q4_K_M twin (253,113,024 bytes, a 262,144-token vocabulary, see the module docstring)."""
    tokens = GEMMA_SPECIAL + [f"{i:x}" for i in range(len(GEMMA_SPECIAL), GEMMA_VOCAB)]
    md = {
        **GEMMA_METADATA,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": [-1000.0] * GEMMA_VOCAB,
        "tokenizer.ggml.token_type": [3] * 5 + [1] * (GEMMA_VOCAB - 5),
        **GEMMA_TOKENIZER_TAIL,
    }
    return _write_twin(path, md, gemma_tensors(), GEMMA_DATA_OFFSET, GEMMA_SIZE, seed=seed)

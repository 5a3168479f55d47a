"""A tiny random-weight mixture-of-experts GGUF that the real llama.cpp loads and runs.

Architecture ``llama`` with experts (Mixtral's layout; llama.cpp builds it with ``build_moe_ffn``,
softmax gating, weights normalised over the chosen experts: src/models/llama.cpp). Tensor names
and shapes from ``llama_model_llama::load_arch_tensors``: ``blk.N.ffn_gate_inp`` {n_embd, n_expert},
``blk.N.ffn_{gate,up}_exps`` {n_embd, n_ff, n_expert}, ``blk.N.ffn_down_exps`` {n_ff, n_embd, n_expert};
metadata keys ``llama.expert_count`` / ``llama.expert_used_count`` (src/llama-arch.cpp). The vocabulary,
its merges and the chat template are copied from a real model (SmolLM2's GGUF), so prompts tokenize
as in a real chat; the output matrix is its own tensor (untied), unlike SmolLM2 and Gemma 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np


@dataclass(frozen=True)
class MoEShape:
    """The tiny model's shape."""

    n_layer: int = 3
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 96
    n_expert: int = 4
    n_expert_used: int = 2
    n_ctx_train: int = 4096


def write_moe_gguf(path: Path, vocab_from: Path, shape: MoEShape = MoEShape(), seed: int = 0) -> Path:
    """Write the tiny MoE GGUF to ``path`` with the tokenizer of ``vocab_from``; returns ``path``.

    Weights are random (normal, seeded); the embedding and output tables are float16, the rest float32.
    """
    src = gguf.GGUFReader(vocab_from)
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("Tiny random MoE (Glassbox tests)")
    s = shape
    head_dim = s.n_embd // s.n_head
    w.add_context_length(s.n_ctx_train)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(s.n_expert)
    w.add_expert_used_count(s.n_expert_used)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    n_vocab = 0
    for key, field in src.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(value)
        w.add_key_value(key, value, vtype, sub_type=sub)
    w.add_vocab_size(n_vocab)

    def normal(*dims: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(dims) * scale).astype(np.float32)

    kv_dim = head_dim * s.n_head_kv
    w.add_tensor("token_embd.weight", normal(n_vocab, s.n_embd, scale=1.0).astype(np.float16))
    w.add_tensor("output_norm.weight", (1.0 + normal(s.n_embd, scale=0.1)).astype(np.float32))
    w.add_tensor("output.weight", normal(n_vocab, s.n_embd, scale=0.5).astype(np.float16))
    for il in range(s.n_layer):
        b = f"blk.{il}."
        w.add_tensor(b + "attn_norm.weight", np.ones(s.n_embd, dtype=np.float32))
        w.add_tensor(b + "attn_q.weight", normal(s.n_embd, s.n_embd, scale=0.2))
        w.add_tensor(b + "attn_k.weight", normal(kv_dim, s.n_embd, scale=0.2))
        w.add_tensor(b + "attn_v.weight", normal(kv_dim, s.n_embd, scale=0.2))
        w.add_tensor(b + "attn_output.weight", normal(s.n_embd, s.n_embd, scale=0.1))
        w.add_tensor(b + "ffn_norm.weight", np.ones(s.n_embd, dtype=np.float32))
        w.add_tensor(b + "ffn_gate_inp.weight", normal(s.n_expert, s.n_embd, scale=0.5))
        w.add_tensor(b + "ffn_gate_exps.weight", normal(s.n_expert, s.n_ff, s.n_embd, scale=0.1))
        w.add_tensor(b + "ffn_up_exps.weight", normal(s.n_expert, s.n_ff, s.n_embd, scale=0.1))
        w.add_tensor(b + "ffn_down_exps.weight", normal(s.n_expert, s.n_embd, s.n_ff, scale=0.1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path

"""The vocabulary a logit bias was set for.

A logit bias names token ids (``2:ban``), and an id means a token only in one vocabulary: id 2 is
SmolLM2's ``<|im_end|>`` and Gemma 3's ``<bos>``. So a bias is stored with the fingerprint of the
vocabulary it was set for (:attr:`~app.core.sampling.params.SamplerSettings.logit_bias_vocab`),
and a model whose vocabulary has another fingerprint is told apart (the window warns and offers
to clear it, :mod:`app.ui.window.bias_vocabulary`).

The fingerprint (:func:`vocabulary_fingerprint`) is ``"<n_vocab>:<digest>"``: the vocabulary's
size, and the first 16 hex digits of SHA-256 over the tokenizer model, its pre-tokenizer and the
hash of the first 1,024 token texts the GGUF lists (``GGUFInfo.vocab_head_sha256``). Models of
one family (the same tokenizer) share it; two vocabularies of one size differ in their first
tokens in practice (Llama 2's and Mistral's 32,000, after the 259 byte and control tokens).
A model with another vocabulary that starts alike and is as long would pass unnoticed.
"""

from __future__ import annotations

import hashlib

from app.core.gguf.gguf_facts import GGUFInfo


def vocabulary_fingerprint(info: GGUFInfo) -> str:
    """``"<n_vocab>:<16 hex digits>"`` for ``info``'s vocabulary (see the module docstring); ""
    when unknown (a remote server's model: no token list)."""
    if not info.vocab_head_sha256 or info.n_vocab <= 0:
        return ""
    md = info.metadata
    parts = (str(md.get("tokenizer.ggml.model", "")), str(md.get("tokenizer.ggml.pre", "")), info.vocab_head_sha256)
    return f"{info.n_vocab}:{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}"


def fingerprint_size(fingerprint: str) -> int:
    """The vocabulary size a fingerprint names (tokens); 0 when it names none."""
    head = fingerprint.split(":", 1)[0]
    return int(head) if head.isdigit() else 0

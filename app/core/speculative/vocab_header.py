"""Whether a draft model can draft for a model, as far as the two GGUF headers tell: before anything is loaded
or unloaded (the Model panel, before Apply).

The checks are the header's part of llama.cpp's ``common_speculative_are_compatible`` (the engine's
:mod:`app.engine.compat` makes them all on the loaded vocabularies, token texts included, and stays the
last word): the vocabulary type (``tokenizer.ggml.model``, mapped as ``llama_vocab::impl::load`` in
src/llama-vocab.cpp maps it), BOS and EOS (whether each is added, and its id when it is), and the
vocabulary sizes within :data:`~app.core.quant.compatibility.MAX_VOCAB_SIZE_DIFFERENCE`. Only what
both headers state is compared: llama.cpp fills what a header leaves out from defaults that depend on
the tokenizer, so a value missing on either side is not a refusal.
"""

from __future__ import annotations

from pathlib import Path

from app.core.gguf.gguf_facts import GGUFInfo
from app.core.quant.compatibility import MAX_VOCAB_SIZE_DIFFERENCE, CompatCheck, Incompatibility

#: ``tokenizer.ggml.model`` -> llama.cpp's vocabulary type, in the words of app/engine/compat.py.
TOKENIZER_TYPES = {
    "no_vocab": "none",
    "none": "none",
    "llama": "SentencePiece (SPM)",
    "bert": "WordPiece (WPM)",
    "gpt2": "byte-level BPE",
    "hybriddna": "byte-level BPE",
    "whitespace": "byte-level BPE",
    "gemma4": "byte-level BPE",
    "t5": "Unigram (UGM)",
    "rwkv": "RWKV",
    "plamo2": "PLaMo-2",
}


def _flag(info: GGUFInfo, key: str) -> bool | None:
    v = info.metadata.get(key)
    return v if isinstance(v, bool) else None


def _token_id(info: GGUFInfo, key: str) -> int | None:
    v = info.metadata.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def header_incompatibility(model: GGUFInfo, draft: GGUFInfo) -> Incompatibility | None:
    """The first header check (module docstring) that ``draft`` fails as ``model``'s draft model, or None.

    Returns:
        None, or the :class:`~app.core.quant.compatibility.Incompatibility` naming both files and values, worded
        as the engine's refusal (``SmolLM2.gguf cannot be the draft model of ...: different tokenizers: ...``).
    """
    name_m, name_d = Path(model.path).name, Path(draft.path).name
    if name_m == name_d:
        name_m, name_d = model.path, draft.path

    def refused(check: CompatCheck, why: str) -> Incompatibility:
        return Incompatibility(
            check,
            f"{name_d} cannot be the draft model of {name_m}: {why}. "
            "A draft model must share the model's vocabulary (usually a smaller model of the same family).",
        )

    type_m = TOKENIZER_TYPES.get(str(model.metadata.get("tokenizer.ggml.model", "")))
    type_d = TOKENIZER_TYPES.get(str(draft.metadata.get("tokenizer.ggml.model", "")))
    if type_m is not None and type_d is not None and type_m != type_d:
        return refused(CompatCheck.VOCAB_TYPE, f"different tokenizers: {name_m} uses {type_m}, {name_d} uses {type_d}")
    for check, what, key in ((CompatCheck.BOS, "BOS", "bos"), (CompatCheck.EOS, "EOS", "eos")):
        add_m = _flag(model, f"tokenizer.ggml.add_{key}_token")
        add_d = _flag(draft, f"tokenizer.ggml.add_{key}_token")
        if add_m is None or add_d is None:
            continue
        if add_m != add_d:
            adds = {True: f"adds {what}", False: f"does not add {what}"}
            return refused(check, f"different {what}: {name_m} {adds[add_m]}, {name_d} {adds[add_d]}")
        id_m = _token_id(model, f"tokenizer.ggml.{key}_token_id")
        id_d = _token_id(draft, f"tokenizer.ggml.{key}_token_id")
        if add_m and id_m is not None and id_d is not None and id_m != id_d:
            return refused(check, f"different {what}: token {id_m:,} in {name_m}, token {id_d:,} in {name_d}")
    n_m = model.array_lengths.get("tokenizer.ggml.tokens", 0)
    n_d = draft.array_lengths.get("tokenizer.ggml.tokens", 0)
    if n_m and n_d and abs(n_m - n_d) > MAX_VOCAB_SIZE_DIFFERENCE:
        return refused(
            CompatCheck.VOCAB_SIZE,
            f"different vocabulary sizes: {n_m:,} tokens in {name_m}, {n_d:,} in {name_d} "
            f"(at most {MAX_VOCAB_SIZE_DIFFERENCE} apart)",
        )
    return None

"""Whether two loaded models can be compared token by token, or one be the other's draft model.

:func:`check_compatible` makes llama.cpp's own checks, in its order (``common_speculative_are_compatible``
in common/speculative.cpp: the vocabulary type; BOS added and its id; EOS added and its id; sizes
within 128 tokens; the same text for every token id from 5 up to the smaller size) on two
``llama_model`` s, and says which failed. :func:`vocab_only` loads a model's vocabulary alone
(``llama_model_params.vocab_only``: no weights read, a fraction of a second) for a check by itself;
:func:`check_files` checks two files so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFError, check_loadable
from app.core.quant.compatibility import (
    FIRST_CHECKED_TOKEN,
    MAX_VOCAB_SIZE_DIFFERENCE,
    CompatCheck,
    Incompatibility,
)
from app.engine.errors import EngineError
from app.engine.vocab import Vocab

#: llama.cpp's ``enum llama_vocab_type``, in words.
VOCAB_TYPES = {
    0: "none",
    1: "SentencePiece (SPM)",
    2: "byte-level BPE",
    3: "WordPiece (WPM)",
    4: "Unigram (UGM)",
    5: "RWKV",
    6: "PLaMo-2",
}


def _special(vocab: Any, add: Any, token: Any) -> tuple[bool, int]:
    return bool(add(vocab)), int(token(vocab))


def check_compatible(
    model_a: Any, model_b: Any, name_a: str = "model A", name_b: str = "model B"
) -> Incompatibility | None:
    """The first of llama.cpp's draft-model checks that two models fail, or None when they pass them all.

    Args:
        model_a, model_b: ``llama_model`` pointers (a vocab-only load is enough).
        name_a, name_b: how the message names them (e.g. their file names).

    Returns:
        None, or the :class:`~app.core.quant.compatibility.Incompatibility` naming the check and both values.
    """
    va = llama_cpp.llama_model_get_vocab(model_a)
    vb = llama_cpp.llama_model_get_vocab(model_b)
    type_a, type_b = int(llama_cpp.llama_vocab_type(va)), int(llama_cpp.llama_vocab_type(vb))
    if type_a != type_b:
        return Incompatibility(
            CompatCheck.VOCAB_TYPE,
            f"different tokenizers: {name_a} uses {VOCAB_TYPES.get(type_a, type_a)}, "
            f"{name_b} uses {VOCAB_TYPES.get(type_b, type_b)}",
        )
    for check, what, add, token in (
        (CompatCheck.BOS, "BOS", llama_cpp.llama_vocab_get_add_bos, llama_cpp.llama_vocab_bos),
        (CompatCheck.EOS, "EOS", llama_cpp.llama_vocab_get_add_eos, llama_cpp.llama_vocab_eos),
    ):
        add_a, id_a = _special(va, add, token)
        add_b, id_b = _special(vb, add, token)
        if add_a != add_b:
            adds = {True: f"adds {what}", False: f"does not add {what}"}
            return Incompatibility(check, f"different {what}: {name_a} {adds[add_a]}, {name_b} {adds[add_b]}")
        if add_a and id_a != id_b:
            return Incompatibility(check, f"different {what}: token {id_a:,} in {name_a}, token {id_b:,} in {name_b}")
    n_a, n_b = int(llama_cpp.llama_vocab_n_tokens(va)), int(llama_cpp.llama_vocab_n_tokens(vb))
    if abs(n_a - n_b) > MAX_VOCAB_SIZE_DIFFERENCE:
        return Incompatibility(
            CompatCheck.VOCAB_SIZE,
            f"different vocabulary sizes: {n_a:,} tokens in {name_a}, {n_b:,} in {name_b} "
            f"(at most {MAX_VOCAB_SIZE_DIFFERENCE} apart)",
        )
    text = llama_cpp.llama_vocab_get_text
    for i in range(FIRST_CHECKED_TOKEN, min(n_a, n_b)):
        if text(va, i) != text(vb, i):
            piece_a, piece_b = Vocab(model_a).display(i), Vocab(model_b).display(i)
            return Incompatibility(
                CompatCheck.TOKEN_TEXT,
                f"different vocabulary: token {i:,} is {piece_a!r} in {name_a} and {piece_b!r} in {name_b}",
            )
    return None


@contextlib.contextmanager
def vocab_only(path: str) -> Iterator[Any]:
    """A model's vocabulary alone (``vocab_only``: no weights read), freed after the block.

    Yields:
        the ``llama_model`` pointer.

    Raises:
        EngineError: ``bad_model`` (the file fails Glassbox's GGUF checks), ``load`` (llama.cpp refused it).
    """
    try:
        check_loadable(path)
    except GGUFError as exc:
        raise EngineError(P.FailureKind.BAD_MODEL, exc.message) from None
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), params)
    if not model:
        raise EngineError(P.FailureKind.LOAD, f"llama.cpp could not read the vocabulary of {Path(path).name}.")
    try:
        yield model
    finally:
        llama_cpp.llama_model_free(model)


def file_names(path_a: str, path_b: str) -> tuple[str, str]:
    """How the messages name two files: their file names, or their whole paths when the names are the same."""
    name_a, name_b = Path(path_a).name, Path(path_b).name
    return (path_a, path_b) if name_a == name_b else (name_a, name_b)


def check_files(path_a: str, path_b: str) -> Incompatibility | None:
    """:func:`check_compatible` on two GGUF files' vocabularies (vocab-only loads), named by :func:`file_names`.

    Raises:
        EngineError: as :func:`vocab_only`.
    """
    name_a, name_b = file_names(path_a, path_b)
    with vocab_only(path_a) as a, vocab_only(path_b) as b:
        return check_compatible(a, b, name_a, name_b)

"""Whether two models share a vocabulary closely enough to compare their distributions token by token
(or for one to be the other's draft model): the check that failed and its words.

The checks are llama.cpp's own, in the order ``common_speculative_are_compatible`` makes them
(common/speculative.cpp): the vocabulary type, BOS (whether it is added, and its id when it is),
EOS (the same), the vocabulary sizes within :data:`MAX_VOCAB_SIZE_DIFFERENCE`, and the same text
for every token id from :data:`FIRST_CHECKED_TOKEN` up to the smaller size. The engine runs them on
two loaded ``llama_model`` s (:mod:`app.engine.compat`); this module holds the verdict as plain values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE: the most two vocabulary sizes may differ, tokens.
MAX_VOCAB_SIZE_DIFFERENCE = 128
#: llama.cpp's SPEC_VOCAB_CHECK_START_TOKEN_ID: token texts are compared from this id up.
FIRST_CHECKED_TOKEN = 5


class CompatCheck(str, enum.Enum):
    """One check of ``common_speculative_are_compatible``, in the order llama.cpp makes them."""

    VOCAB_TYPE = "vocab_type"  #: the tokenizer's kind (SPM, BPE, WPM, UGM, RWKV, PLaMo-2)
    BOS = "bos"  #: whether BOS is added, and its id when it is
    EOS = "eos"  #: whether EOS is added, and its id when it is
    VOCAB_SIZE = "vocab_size"  #: sizes differ by more than MAX_VOCAB_SIZE_DIFFERENCE
    TOKEN_TEXT = "token_text"  #: a token id from FIRST_CHECKED_TOKEN up has another text


@dataclass(frozen=True)
class Incompatibility:
    """Why two models cannot be compared token by token.

    Attributes:
        check: the first check that failed.
        message: the person's words: what differs, with both values, e.g. ``different vocabulary:
            token 1,234 is 'foo' in model A and 'bar' in model B``.
    """

    check: CompatCheck
    message: str

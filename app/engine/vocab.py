"""A loaded model's vocabulary: token ids to bytes, to text, and to what the token view shows."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llama_cpp

from app.core.chat.textstream import TextStream


def display_piece(piece: bytes) -> str:
    """A token's bytes as text for the token view: fragments of a UTF-8 character as ⟨F0 9F⟩."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return "⟨" + piece.hex(" ").upper() + "⟩"


class Vocab:
    """The vocabulary of one loaded model (``llama_model_get_vocab``).

    Args:
        model: the ``llama_model`` pointer (``Llama.model``).

    Attributes:
        bos, eos, eot: special token ids (-1: the model has none).
        add_bos: whether the tokenizer adds BOS at the start of a prompt.
    """

    def __init__(self, model: Any) -> None:
        self.ptr: Any = llama_cpp.llama_model_get_vocab(model)
        self._piece_buf = ctypes.create_string_buffer(256)
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.ptr))
        self.bos = int(llama_cpp.llama_vocab_bos(self.ptr))
        self.eos = int(llama_cpp.llama_vocab_eos(self.ptr))
        self.eot = int(llama_cpp.llama_vocab_eot(self.ptr))

    @property
    def n_tokens(self) -> int:
        """Tokens in the vocabulary."""
        return int(llama_cpp.llama_vocab_n_tokens(self.ptr))

    def is_special(self, token: int) -> bool:
        """Whether ``token`` is a special token of the prompt format: a control token (BOS, EOS,
        ``<|im_start|>``, ``<start_of_turn>``), or a user-defined one written as a tag (``<tool_call>``).

        Not every user-defined token: Gemma 3's vocabulary makes runs of line breaks and
        spaces user-defined tokens, and they are plain text.
        """
        attr = int(llama_cpp.llama_vocab_get_attr(self.ptr, token))
        if attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL:
            return True
        if not attr & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED:
            return False
        text = self.text(token)
        return len(text) > 2 and text.startswith("<") and text.endswith(">")

    def is_eog(self, token: int) -> bool:
        """Whether ``token`` ends generation (EOS, EOT, ...)."""
        return bool(llama_cpp.llama_vocab_is_eog(self.ptr, token))

    def piece(self, token: int, special: bool = False) -> bytes:
        """The bytes ``token`` adds to the text; may be part of a character.

        Special tokens render empty, or as their text (``<|im_end|>``) with ``special``.
        """
        buf = self._piece_buf
        n = llama_cpp.llama_token_to_piece(self.ptr, token, buf, len(buf), 0, special)
        if n < 0:
            self._piece_buf = buf = ctypes.create_string_buffer(-n + 16)
            n = llama_cpp.llama_token_to_piece(self.ptr, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def text(self, token: int, special: bool = True) -> str:
        """Text of one token (``special``: render special tokens such as ``<|im_end|>``), bad bytes replaced."""
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self.ptr, token, buf, len(buf), 0, special)
        return buf.raw[: max(n, 0)].decode("utf-8", errors="replace")

    def display(self, token: int) -> str:
        """Text of one token for display, special tokens included (``<|im_start|>``), fragments as hex."""
        b = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self.ptr, token, b, len(b), 0, True)
        return display_piece(b.raw[: max(n, 0)])

    def stream_pieces(self, tokens: Sequence[int]) -> list[str]:
        """Text each token makes visible when streamed in order (UTF-8 safe).

        This is exactly what the decode loop shows; tests use it to check that
        split characters are never broken (cases E1, E2).
        """
        stream = TextStream()
        out = [stream.push(self.piece(t)).text for t in tokens]
        tail = stream.finish().text
        if tail:
            out.append(tail)
        return out

"""Turning token pieces (bytes) into streamed text: never split a UTF-8
character, never show a stop string.

A token is a byte string, not text: byte-level BPE vocabularies split one
emoji or CJK character over several tokens (``b"\\xf0\\x9f"`` then
``b"\\x91\\x8d"`` for 👍). :class:`TextStream` holds incomplete bytes until the
character is whole (``codecs`` incremental decoder), and holds back text that
may be the start of a stop string until it is sure it is not.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass
class StreamResult:
    """What one piece of bytes produced.

    Attributes:
        text: text safe to show now (may be empty).
        stopped: a stop string was found; ``text`` ends just before it.
    """

    text: str
    stopped: bool = False


class TextStream:
    """Incremental bytes -> text, with stop strings held back.

    Usage: call :meth:`push` with each token's bytes and show ``result.text``;
    call :meth:`finish` at the end to flush what was held back. The text shown
    is always exactly :attr:`text`, the reply so far.
    """

    def __init__(self, stop_strings: tuple[str, ...] | list[str] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = tuple(s for s in stop_strings if s)
        self._held = ""  # decoded text not yet shown (could start a stop string)
        self._shown: list[str] = []
        self.stopped = False

    @property
    def text(self) -> str:
        """All text shown so far."""
        return "".join(self._shown)

    def push(self, piece: bytes) -> StreamResult:
        """Add one token's bytes; return the text that is now safe to show."""
        if self.stopped:
            return StreamResult("", True)
        new = self._decoder.decode(piece, final=False)
        return self._advance(new, final=False)

    def finish(self) -> StreamResult:
        """Flush: incomplete bytes become U+FFFD (the model ended mid-character)."""
        if self.stopped:
            return StreamResult("", True)
        new = self._decoder.decode(b"", final=True)
        return self._advance(new, final=True)

    def _advance(self, new: str, final: bool) -> StreamResult:
        buf = self._held + new
        if self._stops:
            hit = _first_stop(buf, self._stops)
            if hit is not None:
                idx, _stop = hit
                out = buf[:idx]
                self._held = ""
                self._shown.append(out)
                self.stopped = True
                return StreamResult(out, True)
            keep = 0 if final else _longest_stop_prefix_suffix(buf, self._stops)
        else:
            keep = 0
        out = buf[: len(buf) - keep] if keep else buf
        self._held = buf[len(buf) - keep :] if keep else ""
        if out:
            self._shown.append(out)
        return StreamResult(out)


def _first_stop(buf: str, stops: tuple[str, ...]) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for s in stops:
        i = buf.find(s)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, s)
    return best


def _longest_stop_prefix_suffix(buf: str, stops: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``buf`` that is a proper prefix of a stop string."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(buf)), best, -1):
            if buf.endswith(s[:k]):
                best = k
                break
    return best

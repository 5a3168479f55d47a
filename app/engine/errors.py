"""What the engine's parts share about failing and stopping: EngineError, ParentGone and the cancel flag's shape."""

from __future__ import annotations

from typing import Protocol

from app.core.protocol import FailureKind


class CancelFlag(Protocol):
    """The shared Stop flag (a ``multiprocessing.Event`` in the engine process)."""

    def is_set(self) -> bool: ...


class EngineError(Exception):
    """A request failed in a way the person can act on (becomes a ``Failed`` event).

    Attributes:
        kind: the ``Failed.kind``.
        message: the text shown to the person: the problem and what to do.
    """

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class ParentGone(Exception):
    """The UI end of the pipe is closed: nobody is listening, so the engine ends (raised by the child's emit)."""

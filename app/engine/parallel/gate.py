"""`PersonFirst`: the person's own work in the chat context goes before the API's parallel sequences.

The parallel loop (:mod:`app.engine.parallel.loop`) runs each step inside :meth:`PersonFirst.api_step`;
the session runs the person's turn, a depth sweep, and each prompt render or count inside
:meth:`PersonFirst.person`. A step waits while the person's work runs or waits; the person's work waits
at most for the one step in progress (one ``llama_decode`` of the parallel context, tens of ms on
SmolLM2). So the person's reply runs alone on the CPU, its figures (TTFT, tok/s) are those of a reply
with no API sequence beside it, and the prompt builder (not thread-safe) is used by one side at a time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class PersonFirst:
    """A two-sided lock where the person's side has priority (see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._person = 0  # the person's blocks running or waiting
        self._stepping = False

    @contextlib.contextmanager
    def person(self) -> Iterator[None]:
        """The person's block: waits for the API step in progress, and no API step starts until it ends."""
        with self._cond:
            self._person += 1
            self._cond.wait_for(lambda: not self._stepping)
        try:
            yield
        finally:
            with self._cond:
                self._person -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def api_step(self, timeout_s: float | None = None) -> Iterator[bool]:
        """One API step: waits while the person's work runs or waits (at most ``timeout_s``; None: no limit).

        Yields:
            True when the step may run; False when ``timeout_s`` passed first (the block must not
            touch the model then).
        """
        with self._cond:
            ok = self._cond.wait_for(lambda: self._person == 0, timeout=timeout_s)
            if ok:
                self._stepping = True
        try:
            yield ok
        finally:
            if ok:
                with self._cond:
                    self._stepping = False
                    self._cond.notify_all()

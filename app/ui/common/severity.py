"""How serious a message for the person is: the banner's and inline messages' colour, and the log level.

The values are what stylesheets select on (``[kind="error"]``) and what ``notice(str, str)``
signals carry: a ``Severity`` compares equal to its string and crosses a ``Signal(str)`` as it.
"""

from __future__ import annotations

import enum
import logging


class Severity(str, enum.Enum):
    """A message's severity; the value is the stylesheet's ``kind`` property."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    BUSY = "busy"  #: work in progress (inline messages only)

    @property
    def log_level(self) -> int:
        """The :mod:`logging` level a message of this severity is recorded at."""
        return {Severity.WARNING: logging.WARNING, Severity.ERROR: logging.ERROR}.get(self, logging.INFO)

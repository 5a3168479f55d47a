"""How serious a message for the person is: the banner's colour and the log level it is recorded at."""

from __future__ import annotations

import enum
import logging


class Severity(str, enum.Enum):
    """A message's severity; the value is the stylesheet's ``kind`` property."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def log_level(self) -> int:
        """The :mod:`logging` level a message of this severity is recorded at."""
        return {Severity.INFO: logging.INFO, Severity.WARNING: logging.WARNING, Severity.ERROR: logging.ERROR}[self]

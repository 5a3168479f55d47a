"""The kinds of message the window shows (banner, inline messages): one enum, string-valued.

The values are what stylesheets select on (``[kind="error"]``) and what the
``notice(str, str)`` signals carry, so a ``MessageKind`` compares equal to its
string and crosses a ``Signal(str)`` as that string.
"""

from __future__ import annotations

import enum


class MessageKind(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    BUSY = "busy"  #: work in progress (inline messages only)

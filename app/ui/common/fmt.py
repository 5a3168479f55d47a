"""How the models window writes sizes, speeds, durations and dates."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from app.core.gguf.gguf_info import format_bytes, format_count

__all__ = ["ago", "count", "duration", "format_bytes", "format_count", "speed"]


def ago(when: float | datetime | None, now: float | None = None) -> str:
    """``just now``, ``5 min ago``, ``3 h ago``, ``4 days ago``, ``12 Mar 2024``; ``—`` for None."""
    if when is None:
        return "—"
    ts = when.timestamp() if isinstance(when, datetime) else float(when)
    now = time.time() if now is None else now
    d = max(0.0, now - ts)
    if d < 60:
        return "just now"
    if d < 3600:
        return f"{int(d // 60)} min ago"
    if d < 86400:
        return f"{int(d // 3600)} h ago"
    if d < 30 * 86400:
        n = int(d // 86400)
        return f"{n} day{'s' if n > 1 else ''} ago"
    dt = datetime.fromtimestamp(ts, tz=timezone.utc).astimezone()
    return f"{dt.day} {dt.strftime('%b %Y')}"


def count(n: int) -> str:
    """Download and like counts: ``950``, ``12.3k``, ``1.2M``."""
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}k"
    if n >= 1_000:
        return f"{n / 1e3:.1f}k"
    return str(n)


def speed(bytes_per_s: float) -> str:
    """``12.3 MB/s`` (decimal megabytes, as download tools show them); ``—`` when unknown."""
    if bytes_per_s <= 0:
        return "—"
    if bytes_per_s < 1e6:
        return f"{bytes_per_s / 1e3:.0f} kB/s"
    return f"{bytes_per_s / 1e6:.1f} MB/s"


def duration(seconds: float | None) -> str:
    """``8 s``, ``3 min 05 s``, ``2 h 04 min``; ``—`` when unknown."""
    if seconds is None or seconds < 0:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"

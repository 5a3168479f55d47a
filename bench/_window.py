"""What the window benchmarks share: percentiles and running the Qt event loop until a
condition holds or for a while (bench/long_chat.py, bench/stream_render.py)."""

from __future__ import annotations

from collections.abc import Callable


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (nearest rank; 0.0 for none)."""
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] if s else 0.0


def loop_wait(cond: Callable[[], bool], timeout_s: float, check_ms: int = 20) -> None:
    """Run the event loop (idle, not polling) until ``cond()`` holds; TimeoutError after ``timeout_s``."""
    from PySide6.QtCore import QEventLoop, QTimer

    if cond():
        return
    loop = QEventLoop()
    check = QTimer()
    check.setInterval(check_ms)
    check.timeout.connect(lambda: loop.quit() if cond() else None)
    check.start()
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    check.stop()
    if not cond():
        raise TimeoutError("the window did not get there in time")


def settle(seconds: float) -> None:
    """Run the event loop for ``seconds``."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()

"""Guard for the PySide6 6.12.0 bug that made us pin PySide6<6.12: every emit of a
Signal(object) corrupted a reference count until Python aborted (bool_dealloc)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_many_object_signals_across_threads_do_not_corrupt_refcounts():
    code = textwrap.dedent("""
        import threading
        from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal, Slot

        class Box(QObject):
            sig = Signal(object, object)
            def __init__(self):
                super().__init__()
                self.n = 0
                self.sig.connect(self.on)
            @Slot(object, object)
            def on(self, a, b):
                self.n += 1
                if self.n == 40000:  # every emit delivered: the queued ones from the thread too
                    QCoreApplication.quit()

        app = QCoreApplication([])
        box = Box()
        def run():
            for i in range(20000):
                box.sig.emit(box, (i, None, True))
        t = threading.Thread(target=run)
        t.start(); t.join()
        for i in range(20000):
            box.sig.emit(None, False)
        QTimer.singleShot(60000, app.quit)  # a guard: some emits were lost
        if box.n < 40000:
            app.exec()
        print(box.n)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "40000"

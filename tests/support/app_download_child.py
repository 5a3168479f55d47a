"""The real Glassbox window in a child process, downloading from a (fake) Hub until killed.

Usage: ``python -m tests.support.app_download_child <repo_query>`` with GLASSBOX_HOME,
HF_ENDPOINT and HF_HOME in the environment. It searches the Hub, lists the first
repository's GGUF files with their fit verdicts, starts the first file's download
through the Models page (the code the Download button runs), prints
``progress <fraction>`` once 30% is on disk, and keeps going until it is killed.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.paths import default_paths
    from app.ui.theme import apply_theme
    from app.ui.window.compose import create_window

    app = QApplication(argv[:1])
    apply_theme(app)
    win = create_window(default_paths().ensure())
    win.show()
    win.show_page("models")
    client = win.models.hub_client()
    repo = client.search(argv[1], limit=5)[0]
    files = client.repo_files(repo.repo_id).files
    reports = client.fit_all(files, 4096)
    print("fit", files[0].filename, reports[files[0]].verdict.value, flush=True)
    download_id = win.models.download(files[0])
    told = False

    def poll() -> None:
        nonlocal told
        st = win.models.manager.status(download_id)
        if not told and st.total_bytes and st.done_bytes >= 0.3 * st.total_bytes:
            told = True
            print(f"progress {st.done_bytes / st.total_bytes:.3f} {st.done_bytes}", flush=True)

    timer = QTimer()
    timer.timeout.connect(poll)
    timer.start(20)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main(sys.argv))

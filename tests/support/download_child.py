"""A stand-in for the app process in crash tests: downloads one file, then waits to be killed.

Usage::

    python -m tests.support.download_child <endpoint> <repo_id> <filename>

with ``GLASSBOX_HOME`` (and HF_HOME) in the environment. It queues the file
(unless the saved queue already has it), starts the DownloadManager and prints
``started`` and later ``done <state>``; the test kills it (SIGKILL) part-way.
"""

from __future__ import annotations

import sys
import time


def main(argv: list[str]) -> int:
    endpoint, repo_id, filename = argv[1:4]
    from huggingface_hub import constants

    constants.ENDPOINT = endpoint
    constants.HUGGINGFACE_CO_URL_TEMPLATE = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    constants.HF_HUB_DISABLE_TELEMETRY = True

    from app.core.models.downloads import DownloadManager
    from app.core.models.hub import HubClient
    from app.paths import default_paths

    paths = default_paths().ensure()
    manager = DownloadManager(paths, use_login_token=False, retry_base=0.05)
    if not manager.items():
        files = HubClient(endpoint=endpoint, use_login_token=False).repo_files(repo_id).files
        file = next(f for f in files if f.filename == filename)
        manager.add(file)
    manager.start()
    print("started", flush=True)
    download_id = manager.items()[0].id
    status = manager.wait(download_id, timeout=120)
    print("done", status.state.value, flush=True)
    manager.shutdown()
    time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

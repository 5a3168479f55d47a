"""Child process for the concurrent first-start test (tests/unit/test_conversations_concurrent_open.py).

Usage: ``python concurrent_open.py ROOT NAME TRIES PEERS``

For each try ``i`` in ``range(TRIES)``: writes ``ROOT/i/ready-NAME``, waits until
``PEERS`` ready files are there (a file barrier, so the peers open within about
a millisecond of each other), opens ``ROOT/i/conversations.sqlite3`` (a new,
missing file), starts one conversation titled NAME and closes the store.
Prints one JSON line: a list of ``{"try": i, "notice": str | None, "error": str | None}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.core.conversations import ConversationStore


def main() -> None:
    root, name, tries, peers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    results: list[dict[str, object]] = []
    for i in range(tries):
        folder = root / str(i)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"ready-{name}").touch()
        deadline = time.monotonic() + 30
        while len(list(folder.glob("ready-*"))) < peers and time.monotonic() < deadline:
            time.sleep(0.0002)
        notice = error = None
        try:
            with ConversationStore(folder / "conversations.sqlite3") as store:
                notice = store.notice
                store.create_conversation(title=name)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        results.append({"try": i, "notice": notice, "error": error})
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()

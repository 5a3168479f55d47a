"""Two Glassbox processes starting at once on a new data folder share one history file.

Before the open lock (app/core/conversations/openlock.py) one of the two failed on
"table conversations already exists" (the window then fell back to a separate
file), or took the other's half-created file for an empty or foreign one (a
spurious notice, the file set aside) in most of 20 tries.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from app.core.conversations.openlock import lock_path, open_lock

CHILD = Path(__file__).resolve().parents[1] / "support" / "concurrent_open.py"
TRIES = 30


def test_two_processes_creating_the_history_at_once_share_it_every_time(tmp_path: Path) -> None:
    names = ("first", "second")
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), str(tmp_path), name, str(TRIES), str(len(names))],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    outputs = [child.communicate(timeout=300)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0]
    results = [r for out in outputs for r in json.loads(out)]
    assert len(results) == 2 * TRIES
    problems = [r for r in results if r["error"] is not None or r["notice"] is not None]
    assert problems == []
    for i in range(TRIES):
        folder = tmp_path / str(i)
        # One history, nothing set aside, both processes' conversations in it.
        files = {p.name for p in folder.glob("conversations*")} - {
            "conversations.sqlite3-wal",
            "conversations.sqlite3-shm",
        }
        assert files == {"conversations.sqlite3", "conversations.sqlite3.lock"}
        with closing(sqlite3.connect(folder / "conversations.sqlite3")) as conn:
            titles = sorted(row[0] for row in conn.execute("SELECT title FROM conversations"))
            assert titles == sorted(names)
            assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1


def test_open_lock_waits_for_the_holder_and_gives_up_after_its_timeout(tmp_path: Path) -> None:
    db = tmp_path / "conversations.sqlite3"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; sys.path.insert(0, sys.argv[2]);"
            "from app.core.conversations.openlock import open_lock\n"
            "with open_lock(Path(sys.argv[1]), 5):\n print('held', flush=True); sys.stdin.readline()",
            str(db),
            str(Path(__file__).resolve().parents[2]),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        try:
            with open_lock(db, 0.3):
                raise AssertionError("the lock was taken while another process held it")
        except OSError as exc:
            assert "kept the conversation history locked for 0.3 s" in str(exc)
            assert str(lock_path(db)) in str(exc)
    finally:
        holder.communicate("\n", timeout=30)
    assert holder.returncode == 0
    with open_lock(db, 0.3):  # released by the holder: free again at once
        pass

"""Case C2 on real files: a 0-byte, cut-off, garbage or page-damaged history
opens, is set aside with a notice, and everything readable is kept; killing a
writer mid-reply loses at most the last second of that reply."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from app.core.chat.context import Role
from app.core.conversations import UNREADABLE_TEXT, ConversationStore
from app.core.conversations import salvage as conv_salvage
from app.core.conversations.openlock import lock_path
from app.paths import default_paths

REPO = Path(__file__).resolve().parents[2]
WRITER = REPO / "tests" / "support" / "conversation_writer.py"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return default_paths({"GLASSBOX_HOME": str(tmp_path)}).conversations_db


def integrity(path: Path) -> str:
    with closing(sqlite3.connect(str(path))) as c:
        return c.execute("PRAGMA integrity_check").fetchone()[0]


def populate(
    path: Path, conversations: int = 6, messages_each: int = 60, title_padding: str = ""
) -> dict[int, dict[int, str]]:
    """A closed (checkpointed) history; returns {conversation id: {message id: text}}."""
    saved: dict[int, dict[int, str]] = {}
    with ConversationStore(path) as s:
        for c in range(conversations):
            cid = s.create_conversation(
                system_prompt=f"system {c}", title=f"CONV-{c:04d}-TITLE {title_padding}" if title_padding else None
            )
            saved[cid] = {}
            parent = None
            for k in range(messages_each):
                text = f"MSG-{c:03d}-{k:04d}-BODY " + "words of the message " * 12
                parent = s.add_message(cid, parent, Role.USER if k % 2 == 0 else Role.ASSISTANT, text)
                saved[cid][parent] = text
    assert not Path(f"{path}-wal").exists()  # all in the main file
    return saved


def page_size(data: bytes) -> int:
    size = int.from_bytes(data[16:18], "big")
    return 65536 if size == 1 else size


def pages_with(data: bytes, marker: bytes) -> list[int]:
    ps = page_size(data)
    return [i for i in range(len(data) // ps) if marker in data[i * ps : (i + 1) * ps]]


def asides(path: Path) -> list[Path]:
    return sorted(p for p in path.parent.glob(path.name + ".damaged-*") if not p.name.endswith(("-wal", "-shm")))


def all_messages(store: ConversationStore) -> dict[int, str]:
    out = {}
    for conv in store.list_conversations(include_deleted=True):
        out.update({m.id: m.content for m in store.messages(conv.id)})
    return out


# --------------------------------------------------------------------------- C2: damaged files


def test_zero_byte_file_is_replaced_by_a_fresh_history(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"")
    with ConversationStore(db_path) as s:
        assert s.notice is not None and "empty (0 bytes)" in s.notice and str(db_path) in s.notice
        assert s.list_conversations() == []
        cid = s.create_conversation()
        s.add_message(cid, None, "user", "works again")
    with ConversationStore(db_path) as s:
        assert s.notice is None
        assert [m.content for m in s.active_path(cid)] == ["works again"]
    assert integrity(db_path) == "ok"


def test_garbage_file_is_set_aside_and_a_fresh_history_started(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    garbage = os.urandom(40_000)
    db_path.write_bytes(garbage)
    Path(f"{db_path}-wal").write_bytes(b"stale wal " * 100)
    Path(f"{db_path}-shm").write_bytes(b"\0" * 1000)
    with ConversationStore(db_path) as s:
        assert s.list_conversations() == []
        [aside] = asides(db_path)
        assert aside.read_bytes() == garbage
        assert Path(f"{aside}-wal").read_bytes() == b"stale wal " * 100 and Path(f"{aside}-shm").exists()
        assert s.notice is not None
        for part in ("was damaged", "file is not a database", str(aside), "no conversations could be recovered"):
            assert part in s.notice, part
        assert s.recovery is not None and s.recovery.damaged_path == aside and s.recovery.conversations == 0
        s.add_message(s.create_conversation(), None, "user", "fresh")
    assert integrity(db_path) == "ok"
    # damaged again in the same second: the first copy set aside is not overwritten
    db_path.write_bytes(os.urandom(40_000))
    with ConversationStore(db_path) as s:
        assert s.notice is not None
    assert len(asides(db_path)) == 2 and aside.read_bytes() == garbage


def test_cut_off_file_keeps_every_readable_conversation(db_path: Path) -> None:
    saved = populate(db_path)
    data = db_path.read_bytes()
    cut = data[: len(data) // 2 + 1000]  # cut mid-page
    db_path.write_bytes(cut)
    with ConversationStore(db_path) as s:
        assert s.notice is not None and "damaged" in s.notice
        [aside] = asides(db_path)
        assert aside.read_bytes() == cut and str(aside) in s.notice
        convs = s.list_conversations()
        assert {c.id for c in convs} == set(saved)  # the small conversations table was in the first half
        assert f"{len(convs)} conversations" in s.notice
        assert {c.system_prompt for c in convs} == {f"system {i}" for i in range(6)}
        got = all_messages(s)
        expected = {mid: text for msgs in saved.values() for mid, text in msgs.items()}
        assert 0.25 * len(expected) < len(got) < len(expected)
        for mid, text in got.items():  # nothing recovered is garbled
            assert text == expected[mid]
        assert f"({len(got)} messages)" in s.notice
        for conv in convs:  # every conversation opens and shows a thread
            path = s.active_path(conv.id)
            assert all(m.content == expected[m.id] for m in path)
    assert integrity(db_path) == "ok"


def test_damaged_message_page_loses_only_the_rows_on_it(db_path: Path) -> None:
    saved = populate(db_path)
    data = bytearray(db_path.read_bytes())
    ps = page_size(data)
    [page] = pages_with(data, b"MSG-003-0030-BODY")
    original_page = bytes(data[page * ps : (page + 1) * ps])
    on_page = {mid for msgs in saved.values() for mid, text in msgs.items() if text[:17].encode() in original_page}
    assert on_page
    data[page * ps : (page + 1) * ps] = os.urandom(ps)
    db_path.write_bytes(bytes(data))
    # The damage is real: SQLite's own check fails.
    with closing(sqlite3.connect(str(db_path))) as c, pytest.raises(sqlite3.DatabaseError):
        ok = c.execute("PRAGMA quick_check").fetchall()
        assert ok != [("ok",)]
        raise sqlite3.DatabaseError(str(ok))
    with ConversationStore(db_path) as s:
        assert s.notice is not None and asides(db_path)
        expected = {mid: text for msgs in saved.values() for mid, text in msgs.items()}
        got = all_messages(s)
        assert set(got) == set(expected) - on_page
        assert all(got[mid] == expected[mid] for mid in got)
        assert {c.id for c in s.list_conversations()} == set(saved)
        # the thread across the hole: messages after it still show (as their own branch)
        assert s.recovery is not None and s.recovery.detached_messages >= 1
        assert "now start branches" in s.notice or "now starts a branch" in s.notice
        assert "could not be read" in s.notice
    assert integrity(db_path) == "ok"


def test_messages_of_a_lost_conversation_row_are_kept(db_path: Path) -> None:
    saved = populate(db_path, conversations=40, messages_each=4, title_padding="t" * 400)
    data = bytearray(db_path.read_bytes())
    ps = page_size(data)
    [page] = pages_with(data, b"CONV-0020-TITLE")
    lost_convs = {cid for cid in saved if f"CONV-{cid - 1:04d}-TITLE".encode() in data[page * ps : (page + 1) * ps]}
    assert lost_convs and len(lost_convs) < len(saved)
    data[page * ps : (page + 1) * ps] = b"\xff" * ps
    db_path.write_bytes(bytes(data))
    with ConversationStore(db_path) as s:
        convs = {c.id: c for c in s.list_conversations()}
        assert set(convs) == set(saved)  # same ids, none dropped
        for cid in lost_convs:
            assert convs[cid].title == "Recovered conversation"
            assert {m.id: m.content for m in s.messages(cid)} == saved[cid]
        for cid in set(saved) - lost_convs:
            assert convs[cid].title.startswith(f"CONV-{cid - 1:04d}-TITLE")
            assert [m.id for m in s.active_path(cid)] == list(saved[cid])
        assert s.notice is not None and "Recovered conversation" in s.notice


def test_message_whose_text_is_on_a_damaged_overflow_page_is_kept_without_it(db_path: Path) -> None:
    long_text = "LONGTEXT-START " + "".join(f"chunk{i:05d} " for i in range(3000))  # spills over many pages
    with ConversationStore(db_path) as s:
        cid = s.create_conversation()
        u = s.add_message(cid, None, "user", "Write something long")
        a = s.add_message(cid, u, "assistant", long_text)
        after = s.add_message(cid, a, "user", "Thanks")
    data = bytearray(db_path.read_bytes())
    ps = page_size(data)
    [page] = pages_with(data, b"chunk01500 ")  # an overflow page of the long reply
    data[page * ps : (page + 1) * ps] = b"\xee" * ps  # its next-page pointer is now out of range
    db_path.write_bytes(bytes(data))
    with ConversationStore(db_path) as s:
        assert s.notice is not None and "1 message lost its text" in s.notice
        msgs = {m.id: m for m in s.messages(cid)}
        assert set(msgs) == {u, a, after}  # the reply is still there, its place in the thread too
        assert msgs[u].content == "Write something long" and msgs[after].content == "Thanks"
        assert msgs[a].content == UNREADABLE_TEXT and not msgs[a].complete
        assert [m.id for m in s.active_path(cid)] == [u, a, after]
        assert s.recovery is not None and s.recovery.text_lost == 1


def test_healthy_sqlite_file_of_another_program_is_set_aside(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with closing(sqlite3.connect(str(db_path))) as c:
        c.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
        c.execute("INSERT INTO photos (name) VALUES ('cat.jpg')")
        c.commit()
    with ConversationStore(db_path) as s:
        assert s.notice is not None and "not one Glassbox wrote" in s.notice
        [aside] = asides(db_path)
        with closing(sqlite3.connect(str(aside))) as c:
            assert c.execute("SELECT name FROM photos").fetchall() == [("cat.jpg",)]
        assert s.list_conversations() == []


def test_damaged_file_that_cannot_be_moved_aside_is_left_exactly_as_it_was(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_path.parent.mkdir(parents=True)
    garbage, wal = os.urandom(20_000), b"wal bytes " * 50
    db_path.write_bytes(garbage)
    Path(f"{db_path}-wal").write_bytes(wal)
    real_replace = os.replace

    def replace(src, dst):  # the main file is held open by another program (Windows)
        if Path(src) == db_path:
            raise PermissionError(13, "The process cannot access the file", str(src))
        real_replace(src, dst)

    monkeypatch.setattr(conv_salvage.os, "replace", replace)
    with pytest.raises(OSError, match=r"damaged .* could not replace it"):
        ConversationStore(db_path)
    monkeypatch.undo()
    assert db_path.read_bytes() == garbage and Path(f"{db_path}-wal").read_bytes() == wal  # -wal moved back
    # Beside them only the (empty) open lock of app/core/conversations/openlock.py.
    assert sorted(p.name for p in db_path.parent.iterdir()) == sorted(
        [db_path.name, f"{db_path.name}-wal", lock_path(db_path).name]
    )
    assert lock_path(db_path).read_bytes() == b""


def test_locked_file_is_an_error_not_damage(db_path: Path) -> None:
    populate(db_path, conversations=1, messages_each=2)
    with closing(sqlite3.connect(str(db_path), timeout=0.1)) as other:
        other.execute("PRAGMA locking_mode = EXCLUSIVE")
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(OSError, match="cannot open its conversation history"):
            ConversationStore(db_path, busy_timeout=0.2)
        other.execute("ROLLBACK")
    assert asides(db_path) == []


# --------------------------------------------------------------------------- killed mid-save

_CHUNK = re.compile(r"<(\d+)@(\d+\.\d+)>")
# Long enough that a throttle slower than 1 s would leave text older than the bound below.
STREAM_FOR_S = 2.0


@pytest.mark.parametrize("interval", [1.0, 0.0], ids=["throttled", "every-update"])
def test_killing_the_writer_mid_reply_loses_at_most_the_last_second(db_path: Path, interval: float) -> None:
    db_path.parent.mkdir(parents=True)
    with subprocess.Popen(
        [sys.executable, str(WRITER), str(db_path), str(interval)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        line = child.stdout.readline()
        if not line:
            child.wait(timeout=30)
            pytest.fail(f"writer died: {child.stderr.read()}")
        info = json.loads(line)
        time.sleep(STREAM_FOR_S)
        killed_at = time.time()
        child.kill()  # SIGKILL on POSIX: no cleanup, no flush
        child.wait(timeout=30)
    assert child.returncode != 0

    assert integrity(db_path) == "ok"
    with ConversationStore(db_path) as s:
        assert s.notice is None
        for mid, text in info["saved"].items():
            assert s.get_message(int(mid)).content == text
        reply = s.get_message(info["streaming"])
    assert not reply.complete and reply.content
    chunks = _CHUNK.findall(reply.content)
    # an unbroken prefix of what was streamed: chunks 0..n-1, nothing torn
    assert "".join(f"<{i}@{t}>" for i, t in chunks) == reply.content
    assert [int(i) for i, _ in chunks] == list(range(len(chunks)))
    last_written = float(chunks[-1][1])
    age = killed_at - last_written
    assert age <= 1.0 + 0.45, f"the saved reply was {age:.2f} s old when the writer was killed"


def test_a_long_message_cut_off_in_its_overflow_pages_is_marked_unreadable_not_padded(db_path: Path) -> None:
    """A text longer than a page continues on overflow pages; when the file ends inside the last one,
    SQLite reads zeros for the rest of it. The recovered message says its text was lost instead of showing it cut and
    padded with NUL characters."""
    with ConversationStore(db_path) as s:
        cid = s.create_conversation(system_prompt="long")
        q = s.add_message(cid, None, Role.USER, "A question before the long answer.")
        long_text = "LONG-BEGIN " + "a long line of the answer, " * 2000 + "LONG-END"
        a = s.add_message(cid, q, Role.ASSISTANT, long_text)
    data = db_path.read_bytes()
    ps = page_size(data)
    [begin] = pages_with(data, b"LONG-BEGIN")
    [end] = pages_with(data, b"LONG-END")
    assert end > begin + 1  # the text spans overflow pages
    db_path.write_bytes(data[: end * ps + 200])  # cut early in its last overflow page
    with ConversationStore(db_path) as s:
        assert s.notice is not None and "damaged" in s.notice
        msgs = {m.id: m for m in s.messages(cid)}
        assert msgs[q].content == "A question before the long answer."
        assert msgs[a].content == UNREADABLE_TEXT and "\x00" not in msgs[a].content

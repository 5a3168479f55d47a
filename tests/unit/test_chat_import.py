"""Chats imported from other apps (issue 23 §5): ChatGPT, Claude, Open WebUI and LM Studio
exports built to each documented shape (tests/support/chat_exports.py), read into a preview and
written by ConversationStore.import_chats on a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
import zipfile
from pathlib import Path

import pytest

from app.core.chat.context import Role
from app.core.conversations import ConversationStore
from app.core.conversations.importers import (
    ImportFormat,
    SkipReason,
    detect_format,
    read_import_file,
    read_import_files,
)
from app.core.conversations.importers import write as import_write
from tests.support.chat_exports import (
    ARABIC,
    CHATGPT_EXPECTED,
    CJK,
    CLAUDE_EXPECTED,
    EMOJI,
    LMSTUDIO_EXPECTED,
    OPENWEBUI_EXPECTED,
    T0,
    chatgpt_export,
    claude_export,
    lmstudio_conversation,
    openwebui_export,
    write_json,
    write_zip,
)


@pytest.fixture
def store(tmp_path: Path):
    with ConversationStore(tmp_path / "history.sqlite3") as s:
        yield s


def _rows(store: ConversationStore) -> tuple[int, int]:
    """(conversations, messages) in the file."""
    conn = sqlite3.connect(store.path)
    try:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("conversations", "messages"))  # type: ignore[return-value]
    finally:
        conn.close()


def _by_title(store: ConversationStore) -> dict[str, int]:
    return {c.title: c.id for c in store.list_conversations()}


# ------------------------------------------------------------------------------ every format


@pytest.mark.parametrize(
    ("name", "build", "fmt", "expected"),
    [
        ("conversations.json", chatgpt_export, ImportFormat.CHATGPT, CHATGPT_EXPECTED),
        ("claude conversations.json", claude_export, ImportFormat.CLAUDE, CLAUDE_EXPECTED),
        ("chat-export-1744577590.json", openwebui_export, ImportFormat.OPEN_WEBUI, OPENWEBUI_EXPECTED),
        ("1730000000000.conversation.json", lmstudio_conversation, ImportFormat.LM_STUDIO, LMSTUDIO_EXPECTED),
    ],
)
def test_each_format_previews_its_chats_messages_branches_and_what_it_leaves_out(
    tmp_path: Path, store: ConversationStore, name, build, fmt, expected
) -> None:
    path = write_json(tmp_path / name, build())
    f = read_import_file(path)
    assert f.format is fmt
    assert (f.chats, f.messages, f.branches, {r.value: n for r, n in f.skipped.items()}) == expected
    assert _rows(store) == (0, 0)  # a preview writes nothing
    ids = store.import_chats(read_import_files([path]))
    assert len(ids) == expected[0]
    assert _rows(store) == (expected[0], expected[1])


def test_a_chatgpt_edit_and_a_regeneration_become_branches_with_the_shown_one_selected(
    tmp_path: Path, store: ConversationStore
) -> None:
    ids = store.import_chats(read_import_files([write_json(tmp_path / "conversations.json", chatgpt_export())]))
    cid = _by_title(store)["Edited question"]
    assert cid in ids
    conv = store.get_conversation(cid)
    assert (conv.created_at, conv.updated_at, conv.title_is_custom) == (T0, T0 + 30, True)
    path = store.active_path(cid)
    # current_node: the regenerated reply on the edited question's branch.
    assert [(m.role, m.content) for m in path] == [
        (Role.USER, f"What is 2+3? {EMOJI} {ARABIC} {CJK}"),
        (Role.ASSISTANT, f"Five. {ARABIC}"),
    ]
    assert [m.created_at for m in path] == [T0 + 20, T0 + 30]
    assert path[1].meta.model_name == "gpt-4o-mini"
    assert store.siblings(path[0].id).label == "2/2"  # the edit: the original question is branch 1
    assert store.siblings(path[1].id).label == "2/2"  # the regeneration
    # The original question's branch keeps its own reply.
    original = store.siblings(path[0].id).previous_id
    assert original is not None
    back = store.select_branch(original)
    assert [(m.content, m.meta.model_name) for m in back] == [("What is 2+2?", ""), ("4", "gpt-4o")]


def test_chatgpt_tool_calls_reasoning_and_images_are_left_out_and_the_reply_joined(
    tmp_path: Path, store: ConversationStore
) -> None:
    f = read_import_file(write_json(tmp_path / "conversations.json", chatgpt_export()))
    assert f.skipped == {SkipReason.IMAGE: 1, SkipReason.REASONING: 1, SkipReason.TOOL: 2, SkipReason.EMPTY_CHAT: 1}
    store.import_chats(read_import_files([f.path]))
    path = store.active_path(_by_title(store)["Tools and pictures"])
    # The text before the tool call and the answer after it are one reply: roles take turns.
    assert [(m.role, m.content) for m in path] == [
        (Role.USER, "What is this?"),
        (Role.ASSISTANT, "Let me check.\n\nIt is a cat."),
    ]


def test_claude_linear_and_branched_exports(tmp_path: Path, store: ConversationStore) -> None:
    store.import_chats(read_import_files([write_json(tmp_path / "conversations.json", claude_export())]))
    titles = _by_title(store)
    linear = store.active_path(titles["Linear chat"])
    assert [(m.role, m.content) for m in linear] == [
        (Role.USER, f"Summarise this. {CJK}\n\n[notes.txt]\nline one"),
        (Role.ASSISTANT, f"Here is the summary.\n\n{EMOJI}"),
    ]
    assert linear[0].created_at == pytest.approx(1_714_557_600.0)  # 2024-05-01T10:00:00Z
    tree = store.active_path(titles["Edited on Claude"])
    assert [m.content for m in tree] == [f"New question {ARABIC}", "New answer"]  # current_leaf_message_uuid
    assert store.siblings(tree[0].id).label == "2/2"
    assert [m.content for m in store.select_branch(store.siblings(tree[0].id).ids[0])] == ["Old question", "Old answer"]


def test_open_webui_history_tree_current_id_and_system_prompt(tmp_path: Path, store: ConversationStore) -> None:
    (cid,) = store.import_chats(read_import_files([write_json(tmp_path / "chats.json", openwebui_export())]))
    conv = store.get_conversation(cid)
    assert (conv.title, conv.system_prompt, conv.created_at, conv.updated_at) == (
        "Web chat",
        "Be brief.",
        1_744_577_557.0,
        1_744_577_590.0,
    )
    path = store.active_path(cid)
    assert [m.content for m in path] == [f"Hello {ARABIC}", f"Second answer {CJK}"]
    assert path[1].meta.model_name == "Llama 3 8B"
    assert store.siblings(path[1].id).label == "2/2"


def test_a_bare_open_webui_chat_object_is_read_too(tmp_path: Path) -> None:
    chat = openwebui_export()[0]["chat"]
    f = read_import_file(write_json(tmp_path / "chat.json", chat))
    assert (f.format, f.chats, f.messages, f.branches) == (ImportFormat.OPEN_WEBUI, 1, 3, 1)
    assert f.conversations[0].created_at == pytest.approx(1_744_577_557.127)  # chat.timestamp, ms


def test_lm_studio_versions_become_siblings_and_the_selected_one_carries_the_chat(
    tmp_path: Path, store: ConversationStore
) -> None:
    (cid,) = store.import_chats(
        read_import_files([write_json(tmp_path / "1.conversation.json", lmstudio_conversation())])
    )
    conv = store.get_conversation(cid)
    assert (conv.title, conv.system_prompt, conv.created_at) == ("Studio chat", "You are terse.", 1_730_000_000.0)
    path = store.active_path(cid)
    assert [m.content for m in path] == [f"Hi {EMOJI}", f"Hi there {CJK}", "Bye", "Goodbye."]
    assert path[1].meta.model_name == "qwen2.5-7b-instruct"
    assert store.siblings(path[1].id).label == "2/2"
    assert [m.content for m in store.select_branch(store.siblings(path[1].id).ids[0])] == [f"Hi {EMOJI}", "Hello!"]


# ------------------------------------------------------------------------------ zip, several files


def test_the_chatgpt_zip_as_downloaded_reads_like_its_conversations_json(
    tmp_path: Path, store: ConversationStore
) -> None:
    plain = read_import_file(write_json(tmp_path / "conversations.json", chatgpt_export()))
    zipped = read_import_file(write_zip(tmp_path / "chatgpt-export.zip", chatgpt_export()))
    assert zipped.format is ImportFormat.CHATGPT
    assert zipped.conversations == plain.conversations and zipped.skipped == plain.skipped
    # Claude's zip holds conversations.json too (here in a folder); the shape tells them apart.
    claude = read_import_file(write_zip(tmp_path / "data-2025.zip", claude_export(), "data-2025/conversations.json"))
    assert (claude.format, claude.chats) == (ImportFormat.CLAUDE, 2)


def test_several_files_of_several_apps_import_in_one_go(tmp_path: Path, store: ConversationStore) -> None:
    preview = read_import_files(
        [
            write_zip(tmp_path / "chatgpt.zip", chatgpt_export()),
            write_json(tmp_path / "claude.json", claude_export()),
            write_json(tmp_path / "owui.json", openwebui_export()),
            write_json(tmp_path / "a.conversation.json", lmstudio_conversation()),
        ]
    )
    assert [f.format for f in preview.files] == [
        ImportFormat.CHATGPT,
        ImportFormat.CLAUDE,
        ImportFormat.OPEN_WEBUI,
        ImportFormat.LM_STUDIO,
    ]
    assert (preview.chats, preview.messages, preview.branches) == (6, 21, 5)
    assert preview.skipped == {
        SkipReason.IMAGE: 4,
        SkipReason.TOOL: 4,
        SkipReason.REASONING: 3,
        SkipReason.EMPTY_CHAT: 1,
    }
    assert len(store.import_chats(preview)) == 6
    assert _rows(store) == (6, 21)


def test_a_glassbox_export_comes_back_through_the_same_import(tmp_path: Path, store: ConversationStore) -> None:
    cid = store.create_conversation(title="Mine")
    store.add_message(cid, None, Role.USER, CJK)
    out = tmp_path / "mine.json"
    store.export_json(cid, out)
    preview = read_import_files([out, write_json(tmp_path / "owui.json", openwebui_export())])
    assert [f.format for f in preview.files] == [ImportFormat.GLASSBOX, ImportFormat.OPEN_WEBUI]
    assert not preview.only_glassbox and (preview.chats, preview.messages) == (2, 4)
    new_ids = store.import_chats(preview)
    assert store.get_conversation(new_ids[0]).title == "Mine (imported)"
    assert [m.content for m in store.active_path(new_ids[0])] == [CJK]


# ------------------------------------------------------------------------------ damaged files


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("cut.json", json.dumps(chatgpt_export())[:-40], "not valid JSON"),
        ("empty.json", "", "the file is empty"),
        ("latin1.json", "caf\xe9".encode("latin-1"), "not UTF-8"),
        ("other.json", json.dumps({"hello": "world"}), "not a chat export Glassbox knows"),
        ("none.json", "[]", "holds no conversations"),
    ],
)
def test_unreadable_files_are_refused_naming_the_file(
    tmp_path: Path, store: ConversationStore, name: str, content: str | bytes, problem: str
) -> None:
    bad = tmp_path / name
    bad.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(ValueError) as err:
        read_import_file(bad)
    assert str(err.value).startswith(f"{bad}: cannot import: ") and problem in str(err.value)


def test_a_cut_off_file_says_where_and_that_it_looks_cut_off(tmp_path: Path) -> None:
    bad = tmp_path / "conversations.json"
    bad.write_text(json.dumps(chatgpt_export(), indent=1)[:-100], encoding="utf-8")
    with pytest.raises(ValueError, match=r"\(line \d+, column \d+\); the file looks cut off"):
        read_import_file(bad)


def _break_chatgpt(d):
    d[0]["mapping"]["u1"]["message"]["content"]["parts"] = "What is 2+2?"


def _break_chatgpt_mapping(d):
    d[1]["mapping"] = list(d[1]["mapping"].values())


def _break_claude(d):
    d[1]["chat_messages"][2]["created_at"] = "yesterday"


def _break_owui(d):
    d[0]["chat"]["history"]["messages"]["a1"]["content"] = 42


def _break_lms(d):
    d["messages"][1]["versions"] = {"0": "x"}


@pytest.mark.parametrize(
    ("build", "mutate", "problem"),
    [
        (
            chatgpt_export,
            _break_chatgpt,
            "conversation 1 ('Edited question'): mapping['u1'].message.content.parts is text, expected a list",
        ),
        (
            chatgpt_export,
            _break_chatgpt_mapping,
            "conversation 2 ('Tools and pictures'): mapping is a list, expected an object",
        ),
        (claude_export, _break_claude, "chat_messages[2].created_at is 'yesterday', expected a time"),
        (openwebui_export, _break_owui, "chat.history.messages['a1'].content is a number (42), expected text"),
        (lmstudio_conversation, _break_lms, "messages[1].versions is an object, expected a list"),
    ],
)
def test_wrong_types_refuse_the_whole_import_and_write_nothing(
    tmp_path: Path, store: ConversationStore, build, mutate, problem: str
) -> None:
    good = write_json(tmp_path / "good.json", openwebui_export())
    data = build()
    mutate(data)
    bad = write_json(tmp_path / "damaged.json", data)
    with pytest.raises(ValueError) as err:
        read_import_files([good, bad])  # the good file first: still nothing is written
    assert str(err.value).startswith(f"{bad}: cannot import: ")
    assert problem in str(err.value)
    assert _rows(store) == (0, 0)


def test_a_damaged_zip_or_one_without_conversations_json_is_refused(tmp_path: Path) -> None:
    whole = write_zip(tmp_path / "whole.zip", chatgpt_export()).read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut\.zip: cannot import: the zip is damaged or cut off \(a download"):
        read_import_file(cut)
    empty = tmp_path / "conversations.json"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"conversations\.json: cannot import: the file is empty$"):
        read_import_file(empty)
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("readme.txt", "hi")
    with pytest.raises(ValueError, match=r"other\.zip: cannot import: the zip holds no conversations\.json"):
        read_import_file(other)


def test_a_failed_write_leaves_nothing_half_imported(
    tmp_path: Path, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    preview = read_import_files([write_json(tmp_path / "conversations.json", chatgpt_export())])
    real = import_write.insert_foreign
    calls = []

    def second_fails(conn, conv):
        calls.append(conv.title)
        if len(calls) == 2:
            raise sqlite3.OperationalError("database or disk is full")
        return real(conn, conv)

    monkeypatch.setattr("app.core.conversations.store.insert_foreign", second_fails)
    with pytest.raises(sqlite3.OperationalError):
        store.import_chats(preview)
    assert calls == ["Edited question", "Tools and pictures"]
    assert _rows(store) == (0, 0)


# ------------------------------------------------------------------------------ detection, tree rules


def test_the_format_is_told_by_shape_not_by_name() -> None:
    assert detect_format(chatgpt_export()) is ImportFormat.CHATGPT
    assert detect_format({"conversations": chatgpt_export()}) is ImportFormat.CHATGPT
    assert detect_format(claude_export()) is ImportFormat.CLAUDE
    assert detect_format(openwebui_export()) is ImportFormat.OPEN_WEBUI
    assert detect_format(lmstudio_conversation()) is ImportFormat.LM_STUDIO
    assert detect_format({"format": "glassbox.conversation", "version": 1}) is ImportFormat.GLASSBOX
    with pytest.raises(ValueError, match="not a chat export Glassbox knows"):
        detect_format([{"role": "user", "content": "hi"}])


def test_an_untitled_chat_is_titled_from_its_first_message_and_a_loop_is_counted(tmp_path: Path) -> None:
    data = chatgpt_export()[:1]
    data[0]["title"] = None
    # Two nodes that are each other's parent: no walk from the root reaches them.
    data[0]["mapping"]["x"] = {
        "id": "x",
        "message": data[0]["mapping"]["a1"]["message"],
        "parent": "y",
        "children": ["y"],
    }
    data[0]["mapping"]["y"] = {
        "id": "y",
        "message": data[0]["mapping"]["a1"]["message"],
        "parent": "x",
        "children": ["x"],
    }
    f = read_import_file(write_json(tmp_path / "conversations.json", data))
    (conv,) = f.conversations
    assert (conv.title, conv.title_is_custom) == ("What is 2+2?", False)
    assert f.skipped[SkipReason.UNREACHABLE] == 2 and len(conv.messages) == 5


def test_importing_a_newer_export_again_adds_only_the_new_chats(tmp_path: Path, store: ConversationStore) -> None:
    first = write_json(tmp_path / "old.json", chatgpt_export())
    store.import_chats(read_import_files([first]).without(store.fingerprints()))
    assert _rows(store) == (2, 7)
    newer = chatgpt_export()
    # The account's newer export: the same two chats, one of them continued, and a new one.
    newer[1]["mapping"]["ans"]["children"] = ["more"]
    newer[1]["mapping"]["more"] = {
        "id": "more",
        "parent": "ans",
        "children": [],
        "message": {
            "author": {"role": "user"},
            "create_time": T0 + 300,
            "content": {"content_type": "text", "parts": ["And a dog?"]},
        },
    }
    newer.append({**newer[0], "title": "Brand new", "create_time": T0 + 400})
    again = read_import_files([write_json(tmp_path / "new.json", newer)]).without(store.fingerprints())
    # The unchanged chat is recognised; the continued one comes in again whole (it has more messages).
    assert [c.title for c in again.files[0].conversations] == ["Tools and pictures", "Brand new"]
    assert again.skipped[SkipReason.ALREADY_IMPORTED] == 1
    store.import_chats(again)
    assert _rows(store) == (4, 7 + 3 + 5)


def test_a_message_of_only_tool_calls_or_an_image_is_counted_once_not_also_as_empty(tmp_path: Path) -> None:
    data = claude_export()[:1]
    msgs = data[0]["chat_messages"]
    msgs.append({**msgs[1], "uuid": "a2", "content": [{"type": "tool_use", "name": "search"}, {"type": "tool_result"}]})
    msgs.append({**msgs[0], "uuid": "h2", "content": [{"type": "image", "source": {}}], "attachments": [], "files": []})
    msgs.append({**msgs[0], "uuid": "h3", "content": [{"type": "text", "text": "  "}], "attachments": [], "files": []})
    f = read_import_file(write_json(tmp_path / "conversations.json", data))
    assert f.skipped == {SkipReason.IMAGE: 2, SkipReason.REASONING: 1, SkipReason.TOOL: 4, SkipReason.EMPTY: 1}
    assert f.messages == 2


def test_overlapping_files_of_one_import_bring_each_chat_once(tmp_path: Path, store: ConversationStore) -> None:
    # The same ChatGPT export chosen twice over: its conversations.json and the .zip it came in.
    preview = read_import_files(
        [write_json(tmp_path / "conversations.json", chatgpt_export()), write_zip(tmp_path / "e.zip", chatgpt_export())]
    ).without(store.fingerprints())
    single = read_import_file(write_json(tmp_path / "one.json", chatgpt_export()))
    assert (preview.chats, preview.messages) == (single.chats, single.messages)
    assert preview.skipped[SkipReason.DUPLICATE] == single.chats
    # What was left out of the second copy's chats is not counted twice (a chat with no text has
    # no fingerprint: each file's is counted).
    others = {SkipReason.DUPLICATE, SkipReason.EMPTY_CHAT}
    assert {r: n for r, n in preview.skipped.items() if r not in others} == {
        r: n for r, n in single.skipped.items() if r not in others
    }
    store.import_chats(preview)
    assert _rows(store) == (single.chats, single.messages)


def test_left_out_on_a_reimport_counts_only_what_the_import_would_bring(
    tmp_path: Path, store: ConversationStore
) -> None:
    path = write_json(tmp_path / "claude.json", claude_export())
    store.import_chats(read_import_files([path]).without(store.fingerprints()))
    again = read_import_files([path]).without(store.fingerprints())
    assert again.chats == 0
    assert again.skipped == {SkipReason.ALREADY_IMPORTED: 2}


def test_open_webui_reasoning_blocks_are_taken_out_and_counted(tmp_path: Path) -> None:
    data = openwebui_export()
    msgs = data[0]["chat"]["history"]["messages"]
    thought = (
        '<details type="reasoning" done="true" duration="3">\n<summary>Thought for 3 seconds</summary>\n'
        "> The user greets me.\n> <b>Say hi</b>\n</details>\n"
    )
    msgs["a2"]["content"] = thought + msgs["a2"]["content"]
    msgs["a1"]["content"] = thought  # thinking only: left out, counted once (not also as empty)
    f = read_import_file(write_json(tmp_path / "chats.json", data))
    texts = [m.content for m in f.conversations[0].messages]
    assert texts == [f"Hello {ARABIC}", f"Second answer {CJK}"]
    assert f.skipped[SkipReason.REASONING] == 2 and SkipReason.EMPTY not in f.skipped


def test_open_webui_tool_call_blocks_are_taken_out_and_counted_as_tool_calls(tmp_path: Path) -> None:
    data = openwebui_export()
    msgs = data[0]["chat"]["history"]["messages"]
    call = (
        '<details type="tool_calls" done="true" id="call_1" name="get_weather" '
        'arguments="{&quot;city&quot;: &quot;Paris&quot;}" result="&quot;12 C&quot;" files="" embeds="">\n'
        "<summary>Tool Executed</summary>\n</details>\n"
    )
    code = '<details type="code_interpreter" done="true" output="4">\n<summary>Analyzed</summary>\n```py\n2+2\n```\n</details>\n'
    msgs["a2"]["content"] = call + msgs["a2"]["content"]
    msgs["a1"]["content"] = call + code  # only tool blocks: left out, counted twice (not also as empty)
    f = read_import_file(write_json(tmp_path / "chats.json", data))
    texts = [m.content for m in f.conversations[0].messages]
    assert texts == [f"Hello {ARABIC}", f"Second answer {CJK}"]
    assert all("<details" not in t for t in texts)
    assert f.skipped[SkipReason.TOOL] == 3 and SkipReason.EMPTY not in f.skipped

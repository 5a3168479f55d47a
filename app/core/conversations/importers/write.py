"""Write one chat read from another app's export into the history (inside the caller's transaction).

Each chat becomes a new conversation: its title (the source's, else made from the first message),
times and system prompt; its messages with their roles, times and tree (siblings are branches);
a reply's model name, when the source gives one, in its meta (``MessageMeta.model_name``). The
source's selected branch is the selected one; the others' ``selected_seq`` stay 0, so moving to
one of them shows its newest messages.
"""

from __future__ import annotations

import json
import sqlite3

from app.core.chat.context import Role
from app.core.conversations.base import descend, lastrowid, set_leaf
from app.core.conversations.importers.foreign import ForeignConversation
from app.core.conversations.model import MessageMeta
from app.core.sampling.params import SamplerSettings


def insert_foreign(conn: sqlite3.Connection, conv: ForeignConversation) -> int:
    """Insert ``conv`` as a new conversation.

    Args:
        conn: the history, in a write transaction.
        conv: from a parser (parents before children).

    Returns:
        The new conversation's id.
    """
    cur = conn.execute(
        "INSERT INTO conversations (created_at, updated_at, title_custom, title, model_path, system_prompt, "
        "sampler_json, stop_strings_json) VALUES (?, ?, ?, ?, '', ?, ?, '[]')",
        (
            conv.created_at,
            conv.updated_at,
            int(conv.title_is_custom),
            conv.title,
            conv.system_prompt,
            json.dumps(SamplerSettings().to_dict()),
        ),
    )
    cid = lastrowid(cur)
    ids: dict[str, int] = {}
    plain = json.dumps(MessageMeta().to_dict())
    for m in conv.messages:
        meta = json.dumps(MessageMeta(model_name=m.model).to_dict()) if m.model and m.role is Role.ASSISTANT else plain
        cur = conn.execute(
            "INSERT INTO messages (conversation_id, parent_id, role, created_at, complete, selected_seq, content, "
            "meta_json) VALUES (?, ?, ?, ?, 1, 0, ?, ?)",
            (cid, ids[m.parent] if m.parent is not None else None, m.role.value, m.created_at, m.content, meta),
        )
        ids[m.key] = lastrowid(cur)
    leaf = ids.get(conv.leaf) if conv.leaf is not None else None
    set_leaf(conn, cid, descend(conn, cid, leaf))
    return cid

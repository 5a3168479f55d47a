"""Child process for the kill test (tests/unit/test_conversations_damage.py).

Usage: ``python conversation_writer.py DB_PATH STREAM_INTERVAL``

Saves a few finished conversations, prints one JSON line
``{"saved": {message_id: content}, "streaming": message_id}`` and then streams
a reply into ``streaming`` with :meth:`ConversationStore.update_streaming` in a
tight loop until it is killed. Each chunk of the reply is ``<i@wall-time>``,
so the parent can tell how old the last saved text is and that it is an
unbroken prefix of what was written.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.core.conversations import ConversationStore


def main() -> None:
    db, interval = sys.argv[1], float(sys.argv[2])
    store = ConversationStore(db, stream_interval=interval)
    saved: dict[int, str] = {}
    for c in range(3):
        cid = store.create_conversation(system_prompt=f"system prompt {c}")
        parent = None
        for k in range(4):
            text = f"conversation {c} message {k} " + "lorem ipsum dolor " * 30
            parent = store.add_message(cid, parent, "user" if k % 2 == 0 else "assistant", text)
            saved[parent] = text
    cid = store.create_conversation()
    question = "Tell me a very long story."
    user = store.add_message(cid, None, "user", question)
    saved[user] = question
    reply = store.add_message(cid, user, "assistant", "", complete=False)
    print(json.dumps({"saved": saved, "streaming": reply}), flush=True)
    content = ""
    i = 0
    while True:  # until SIGKILL
        content += f"<{i}@{time.time():.4f}>"
        i += 1
        store.update_streaming(reply, content)
        time.sleep(0.001)  # about as fast as a small model on a fast CPU


if __name__ == "__main__":
    main()

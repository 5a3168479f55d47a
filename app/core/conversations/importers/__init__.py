"""Chats imported from other apps: ChatGPT, Claude, Open WebUI and LM Studio exports.

Read a file (or several) completely with :func:`read_import_files`: the result, an
:class:`ImportPreview`, says how many chats, messages and branches each file adds and what was
left out and why (:class:`SkipReason`), and nothing is written yet. Then
``ConversationStore.import_chats(preview)`` writes them all in one transaction.

Modules: :mod:`.detect` (which app a file comes from; .json or .zip), :mod:`.chatgpt`,
:mod:`.claude`, :mod:`.openwebui`, :mod:`.lmstudio` (one per format, each naming the shape it
reads and its source), :mod:`.foreign` (the values and the tree rules they share),
:mod:`.preview` (reading files), :mod:`.write` (writing one chat).
"""

from __future__ import annotations

from app.core.conversations.importers.detect import ImportFormat, detect_format
from app.core.conversations.importers.foreign import ForeignConversation, ForeignMessage, SkipReason
from app.core.conversations.importers.preview import ImportPreview, ParsedFile, read_import_file, read_import_files

__all__ = [
    "ForeignConversation",
    "ForeignMessage",
    "ImportFormat",
    "ImportPreview",
    "ParsedFile",
    "SkipReason",
    "detect_format",
    "read_import_file",
    "read_import_files",
]

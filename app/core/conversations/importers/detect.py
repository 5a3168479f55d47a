"""Which app a chat export comes from, and its JSON read from a file or a .zip.

:func:`load_json` reads a ``.json`` file, or from a ``.zip`` the ``conversations.json`` in it
(ChatGPT's and Claude's downloads both hold one, at the top or in a folder). :func:`detect_format`
decides the format from the JSON's shape alone (both apps name the file the same):

====================  =====================================================================
format                shape
====================  =====================================================================
Glassbox              ``{"format": "glassbox.conversation", ...}`` (:mod:`..exchange`)
ChatGPT               a list of conversations with ``mapping`` (:mod:`.chatgpt`)
Claude                a list of conversations with ``chat_messages`` (:mod:`.claude`)
Open WebUI            a list of rows with ``chat``, or one chat with ``history`` (:mod:`.openwebui`)
LM Studio             one object whose ``messages`` have ``versions`` (:mod:`.lmstudio`)
====================  =====================================================================
"""

from __future__ import annotations

import enum
import json
import zipfile
from pathlib import Path

from app.core.conversations.exchange import EXPORT_FORMAT
from app.core.conversations.importers import chatgpt, claude, lmstudio, openwebui

# The most a conversations.json inside a zip may hold, uncompressed (a zip bomb is refused).
MAX_ZIP_MEMBER_BYTES = 2 * 1024**3
ZIP_MEMBER = "conversations.json"
_ZIP_MAGIC = b"PK\x03\x04"  # a zip's local file header (PKWARE APPNOTE.TXT 4.3.7)


class ImportFormat(str, enum.Enum):
    """Where a chat export comes from."""

    GLASSBOX = "glassbox"
    CHATGPT = "chatgpt"
    CLAUDE = "claude"
    OPEN_WEBUI = "openwebui"
    LM_STUDIO = "lmstudio"

    @property
    def label(self) -> str:
        """The app's name, as people know it."""
        return _LABELS[self]


_LABELS = {
    ImportFormat.GLASSBOX: "Glassbox",
    ImportFormat.CHATGPT: "ChatGPT",
    ImportFormat.CLAUDE: "Claude",
    ImportFormat.OPEN_WEBUI: "Open WebUI",
    ImportFormat.LM_STUDIO: "LM Studio",
}


def detect_format(data: object) -> ImportFormat:
    """The format of an export's JSON (table in the module docstring).

    Raises:
        ValueError: no known shape, or a list with no conversation in it.
    """
    if isinstance(data, dict) and data.get("format") == EXPORT_FORMAT:
        return ImportFormat.GLASSBOX
    for fmt, module in (
        (ImportFormat.CHATGPT, chatgpt),
        (ImportFormat.CLAUDE, claude),
        (ImportFormat.OPEN_WEBUI, openwebui),
        (ImportFormat.LM_STUDIO, lmstudio),
    ):
        if module.looks_like(data):
            return fmt
    if isinstance(data, list) and not data:
        raise ValueError("it holds no conversations (an empty list)")
    raise ValueError(
        "it is not a chat export Glassbox knows: expected ChatGPT's or Claude's conversations.json, "
        "an Open WebUI chat export, an LM Studio conversation file or a Glassbox JSON export"
    )


def load_json(path: Path) -> object:
    """The JSON of an export file: the file itself, or a .zip's ``conversations.json``.

    Raises:
        OSError: the file cannot be read.
        ValueError: empty, not UTF-8, not JSON (the message gives the line and column), a
            damaged or cut-off zip, or a zip without ``conversations.json``.
    """
    if zipfile.is_zipfile(path):
        raw = _zip_member(path)
        where = f"{ZIP_MEMBER} in the zip"
    else:
        raw = path.read_bytes()
        where = "the file"
        if raw.startswith(_ZIP_MAGIC):  # a zip's first entry, but no directory at its end
            raise ValueError("the zip is damaged or cut off (a download that did not finish?)")
    if not raw.strip():
        raise ValueError(f"{where} is empty")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        tail = text[exc.pos :].rstrip()
        cut = not tail or (exc.msg.startswith("Unterminated string") and '"' not in tail[1:])
        raise ValueError(
            f"{where} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            + ("; the file looks cut off (a download or a copy that did not finish?)" if cut else "")
        ) from None


def _zip_member(path: Path) -> bytes:
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == ZIP_MEMBER]
            if not names:
                raise ValueError(f"the zip holds no {ZIP_MEMBER} (ChatGPT's and Claude's exports have one)")
            info = z.getinfo(min(names, key=lambda n: n.count("/")))
            if info.file_size > MAX_ZIP_MEMBER_BYTES:
                raise ValueError(
                    f"{info.filename} in the zip is {info.file_size / 1024**3:.1f} GiB; the most read is 2 GiB"
                )
            return z.read(info)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise ValueError(f"the zip is damaged ({exc})") from None

"""Export a chat to a file and import one back, asking for the file with the shared dialogs."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtWidgets import QWidget

from app.core.conversations import ConversationStore
from app.ui.common import dialogs
from app.ui.common.severity import Severity

JSON_FILTER = "Glassbox chat (*.json)"


class ExportFormat(str, enum.Enum):
    """How a chat is exported: Markdown (the active path) or JSON (every branch, importable)."""

    MARKDOWN = "markdown"
    JSON = "json"

    @property
    def suffix(self) -> str:
        return ".md" if self is ExportFormat.MARKDOWN else ".json"

    @property
    def file_filter(self) -> str:
        return "Markdown (*.md)" if self is ExportFormat.MARKDOWN else JSON_FILTER


@dataclass(frozen=True)
class Outcome:
    """What happened, for the banner; ``conv_id`` is the imported chat's id; ``path`` the file
    the person chose (its folder is where the next dialog of the kind opens)."""

    severity: Severity
    text: str
    conv_id: int | None = None
    path: str = ""


def export_conversation(
    parent: QWidget | None, store: ConversationStore, conv_id: int, fmt: ExportFormat, start: Path | None = None
) -> Outcome | None:
    """Ask where to write chat ``conv_id`` (the dialog opens in ``start``, default: home) and
    write it; None when the person cancelled."""
    fmt = ExportFormat(fmt)
    title = store.get_conversation(conv_id).title
    safe = re.sub(r"[^\w\- ]+", "", title).strip() or "chat"
    path = dialogs.choose_save_path(
        parent, "Export chat", (start or Path.home()) / f"{safe}{fmt.suffix}", fmt.file_filter
    )
    if not path:
        return None
    try:
        if fmt is ExportFormat.MARKDOWN:
            store.export_markdown(conv_id, path)
        else:
            store.export_json(conv_id, path)
    except OSError as exc:
        return Outcome(Severity.ERROR, f"Could not write {path}: {exc.strerror or exc}", path=path)
    return Outcome(Severity.INFO, f"Exported “{title}” to {path}.", path=path)


def import_conversation(parent: QWidget | None, store: ConversationStore, start: Path | None = None) -> Outcome | None:
    """Ask for a JSON export (the dialog opens in ``start``, default: home) and import it as a
    new chat; None when the person cancelled."""
    path = dialogs.choose_open_path(parent, "Import a chat", start or Path.home(), JSON_FILTER)
    if not path:
        return None
    try:
        conv_id = store.import_json(path)
    except (ValueError, OSError) as exc:
        return Outcome(Severity.ERROR, str(exc), path=path)
    title = store.get_conversation(conv_id).title
    return Outcome(Severity.INFO, f"Imported “{title}” from {Path(path).name}.", conv_id, path)

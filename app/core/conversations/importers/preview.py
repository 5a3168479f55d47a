"""Read export files completely into an :class:`ImportPreview`: what an import would write.

Nothing is written here. Every file is read and checked first (:func:`read_import_files`); one
bad file refuses them all with a message naming it and what is wrong, so the import that
follows (``ConversationStore.import_chats``) writes all of them in one transaction or nothing.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.core.conversations.exchange import ImportedConversation, ImportedMessage, validate_export
from app.core.conversations.importers import chatgpt, claude, lmstudio, openwebui
from app.core.conversations.importers.detect import ImportFormat, detect_format, load_json
from app.core.conversations.importers.foreign import ForeignConversation, SkipReason

_PARSERS = {
    ImportFormat.CHATGPT: chatgpt.parse,
    ImportFormat.CLAUDE: claude.parse,
    ImportFormat.OPEN_WEBUI: openwebui.parse,
    ImportFormat.LM_STUDIO: lmstudio.parse,
}


@dataclass(frozen=True)
class ParsedFile:
    """One export file, read and checked.

    Attributes:
        path: the file.
        format: where it comes from.
        conversations: its chats in Glassbox's shape (every format but Glassbox's own).
        exports: a Glassbox export's chat with its messages (:mod:`..exchange`), else empty.
        skipped: what was left out, by reason.
    """

    path: Path
    format: ImportFormat
    conversations: tuple[ForeignConversation, ...] = ()
    exports: tuple[tuple[ImportedConversation, list[ImportedMessage]], ...] = ()
    skipped: Mapping[SkipReason, int] = field(default_factory=dict)

    @property
    def chats(self) -> int:
        """How many chats it adds."""
        return len(self.conversations) + len(self.exports)

    @property
    def messages(self) -> int:
        """How many messages it adds."""
        return sum(len(c.messages) for c in self.conversations) + sum(len(m) for _, m in self.exports)

    @property
    def branches(self) -> int:
        """How many of its messages start a branch beside an earlier sibling."""
        own = 0
        for _, msgs in self.exports:
            per_parent = Counter(m.parent_id for m in msgs)
            own += sum(n - 1 for n in per_parent.values())
        return sum(c.branches for c in self.conversations) + own


@dataclass(frozen=True)
class ImportPreview:
    """Every file of one import, read and checked; the totals are what the import adds."""

    files: tuple[ParsedFile, ...]

    @property
    def chats(self) -> int:
        return sum(f.chats for f in self.files)

    @property
    def messages(self) -> int:
        return sum(f.messages for f in self.files)

    @property
    def branches(self) -> int:
        return sum(f.branches for f in self.files)

    @property
    def skipped(self) -> dict[SkipReason, int]:
        """What was left out across the files, by reason (reasons with none left out)."""
        total: Counter[SkipReason] = Counter()
        for f in self.files:
            total.update(f.skipped)
        return {r: total[r] for r in SkipReason if total[r]}

    def without(self, fingerprints: Collection[tuple[str, int, int]]) -> ImportPreview:
        """This import less the chats from other apps already in the history (same
        :attr:`~.foreign.ForeignConversation.fingerprint`: importing a newer export of the same
        account adds only what is new), counted as :attr:`SkipReason.ALREADY_IMPORTED`, and less
        a chat met a second time in this import (overlapping files: a ``conversations.json`` and
        the .zip it came in), counted as :attr:`SkipReason.DUPLICATE`. What was left out of a chat
        that does not come in is no longer counted (``Left out`` is what the import would bring).

        Args:
            fingerprints: the history's, from ``ConversationStore.fingerprints``.
        """
        seen: set[tuple[str, int, int]] = set()
        files = []
        for f in self.files:
            keep: list[ForeignConversation] = []
            skipped: Counter[SkipReason] = Counter(f.skipped)
            for c in f.conversations:
                fp = c.fingerprint
                if fp in fingerprints or fp in seen:
                    skipped[SkipReason.ALREADY_IMPORTED if fp in fingerprints else SkipReason.DUPLICATE] += 1
                    skipped.subtract(dict(c.left_out))
                else:
                    seen.add(fp)
                    keep.append(c)
            if len(keep) != len(f.conversations):
                f = replace(f, conversations=tuple(keep), skipped={r: n for r, n in skipped.items() if n > 0})
            files.append(f)
        return ImportPreview(tuple(files))

    @property
    def only_glassbox(self) -> bool:
        """Every file is a Glassbox export (read back as it was written: nothing to preview)."""
        return all(f.format is ImportFormat.GLASSBOX for f in self.files)


def read_import_file(path: os.PathLike[str] | str) -> ParsedFile:
    """Read and check one export file completely.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is damaged or not an export Glassbox knows; the message starts with the
            file's path and says what is wrong and where.
    """
    p = Path(path)
    try:
        data = load_json(p)
        fmt = detect_format(data)
        if fmt is ImportFormat.GLASSBOX:
            return ParsedFile(p, fmt, exports=(validate_export(data),))
        skipped: Counter[SkipReason] = Counter()
        convs = _PARSERS[fmt](data, skipped)
    except ValueError as exc:
        raise ValueError(f"{p}: cannot import: {exc}") from None
    return ParsedFile(p, fmt, tuple(convs), skipped={r: n for r, n in skipped.items() if n})


def read_import_files(paths: Iterable[os.PathLike[str] | str]) -> ImportPreview:
    """Read and check every file (:func:`read_import_file`); the first bad one raises.

    Raises:
        OSError: a file cannot be read (the message names it).
        ValueError: a file is damaged or unknown (the message names it).
    """
    return ImportPreview(tuple(read_import_file(p) for p in paths))

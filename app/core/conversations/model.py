"""Conversation values: what the store hands out and takes in.

:class:`Message`, :class:`Conversation`, :class:`MessageMeta` (how a reply was
made), :class:`Siblings` (the "< 2/3 >" arrows), :class:`SearchHit`,
:class:`RecoveryReport`, the automatic title (:func:`make_title`), and the
coercions that turn stored values (SQLite cells, JSON) into typed ones without
raising. No SQL here.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.core.chat import ChatMessage, GenerationStats, LoadSettings, Role, StopReason
from app.core.sampling import SamplerSettings

DEFAULT_TITLE = "New chat"
TITLE_MAX_CHARS = 60


@dataclass(frozen=True)
class MessageMeta:
    """How a reply was made: enough to make it again.

    To reproduce a reply, load ``model_path`` with ``load``, use ``system_prompt``
    and the active path up to the reply's parent as the prompt, and sample with
    :meth:`reproduction_sampler` (the settings with the seed that was used).

    Attributes:
        model_path: the GGUF file, absolute path.
        model_name: display name (``general.name``), e.g. ``SmolLM2``.
        quant: quantization, e.g. ``Q4_K_M``.
        sampler: the sampler settings snapshotted for the request.
        seed: the seed the sampler actually used (also in ``stats.seed``).
        load: how the model was loaded (n_ctx, n_batch, context policy...).
        system_prompt: the system prompt in effect for this reply.
        stats: the engine's measurements (tokens, TTFT, tok/s, stop reason).
        engine: engine build, e.g. ``llama-cpp-python 0.3.36``.
        edited: the person edited this text after it was generated.
    """

    model_path: str = ""
    model_name: str = ""
    quant: str = ""
    sampler: SamplerSettings | None = None
    seed: int | None = None
    load: LoadSettings | None = None
    system_prompt: str | None = None
    stats: GenerationStats | None = None
    engine: str = ""
    edited: bool = False

    @property
    def seed_used(self) -> int | None:
        """The seed of this reply: :attr:`seed`, else the one in :attr:`stats`, else None."""
        if self.seed is not None:
            return self.seed
        return self.stats.seed if self.stats is not None else None

    def reproduction_sampler(self) -> SamplerSettings | None:
        """The sampler settings with the seed fixed to the one used; None if unknown."""
        if self.sampler is None:
            return None
        return replace(self.sampler, seed=self.seed_used)

    def stats_line(self) -> str:
        """One line for people, e.g. ``SmolLM2 · Q4_1 · 42 tokens · 98.3 tok/s · TTFT 0.12 s``.

        Parts that are unknown are left out; the stop reason is added when it
        is not the normal end of turn. Empty for a message with no meta.
        """
        parts: list[str] = []
        name = self.model_name or (Path(self.model_path).stem if self.model_path else "")
        if name:
            parts.append(name)
        if self.quant:
            parts.append(self.quant)
        s = self.stats
        if s is not None:
            parts.append(f"{s.generated_tokens} tokens")
            if s.decode_tok_s > 0:
                parts.append(f"{s.decode_tok_s:.1f} tok/s")
            if s.ttft_s > 0:
                parts.append(f"TTFT {s.ttft_s:.2f} s")
            if s.stop_reason is not StopReason.EOS:
                parts.append(s.stop_reason.label)
        if self.seed_used is not None and (s is not None or self.sampler is not None):
            parts.append(f"seed {self.seed_used}")
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (settings and stats through their own ``to_dict``)."""
        return {
            "model_path": self.model_path,
            "model_name": self.model_name,
            "quant": self.quant,
            "sampler": self.sampler.to_dict() if self.sampler is not None else None,
            "seed": self.seed,
            "load": self.load.to_dict() if self.load is not None else None,
            "system_prompt": self.system_prompt,
            "stats": self.stats.to_dict() if self.stats is not None else None,
            "engine": self.engine,
            "edited": self.edited,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> MessageMeta:
        """Build from stored values; wrong types fall back to defaults, unknown keys are ignored."""
        if not isinstance(data, dict):
            return cls()

        def text(key: str) -> str:
            v = data.get(key)
            return v if isinstance(v, str) else ""

        def sub(key: str) -> dict[str, Any] | None:
            v = data.get(key)
            return v if isinstance(v, dict) else None

        seed = data.get("seed")
        system_prompt = data.get("system_prompt")
        stats = sub("stats")
        return cls(
            model_path=text("model_path"),
            model_name=text("model_name"),
            quant=text("quant"),
            sampler=SamplerSettings.from_dict(sub("sampler")) if sub("sampler") is not None else None,
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            load=LoadSettings.from_dict(sub("load")) if sub("load") is not None else None,
            system_prompt=system_prompt if isinstance(system_prompt, str) else None,
            stats=_stats_from_dict(stats) if stats is not None else None,
            engine=text("engine"),
            edited=data.get("edited") is True,
        )


def _stats_from_dict(data: dict[str, Any]) -> GenerationStats:
    """GenerationStats from stored values, each coerced to its field's type (bad values: default).

    ``stop_reason`` text is parsed by :meth:`StopReason.parse` (unknown text reads as ``eos``).
    """
    base = GenerationStats()
    values: dict[str, Any] = {}
    for name in GenerationStats.__dataclass_fields__:
        if name not in data:
            continue
        default, v = getattr(base, name), data[name]
        if isinstance(default, str):
            if isinstance(v, str):
                values[name] = v
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            values[name] = type(default)(v)
    return replace(base, **values)


@dataclass(frozen=True)
class Message:
    """One stored message.

    Attributes:
        id: unique in the store.
        conversation_id: the conversation it belongs to.
        parent_id: the message it answers or follows; None for a first message.
        role: who wrote it; a stored role Glassbox does not know reads as ``Role.USER``.
        content: the text (while a reply streams, the latest text given to the store).
        created_at: seconds since the epoch.
        complete: False while streaming or when the reply was cut off
            (stopped, max_tokens, context full, engine error).
        meta: how it was made (assistant replies).
    """

    id: int
    conversation_id: int
    parent_id: int | None
    role: Role
    content: str
    created_at: float
    complete: bool
    meta: MessageMeta

    def to_chat(self) -> ChatMessage:
        """The message as the chat template sees it (role and visible text)."""
        return ChatMessage(self.role, self.content)


@dataclass(frozen=True)
class Conversation:
    """One conversation's settings and place in the list.

    Attributes:
        id: unique in the store.
        title: shown in the list; made from the first message unless renamed.
        title_is_custom: the person renamed it (automatic titles no longer apply).
        created_at, updated_at: seconds since the epoch; the list is newest ``updated_at`` first.
        deleted_at: when it was deleted (it can be restored until purged), else None.
        system_prompt: the system message for new replies.
        model_path: the model last used in it.
        sampler: sampler settings for new replies.
        current_leaf_id: the last message of the selected branch (None when empty).
    """

    id: int
    title: str
    title_is_custom: bool
    created_at: float
    updated_at: float
    deleted_at: float | None
    system_prompt: str
    model_path: str
    sampler: SamplerSettings
    current_leaf_id: int | None


@dataclass(frozen=True)
class Siblings:
    """A message and its alternatives (same parent), oldest first, for "< 2/3 >" arrows.

    Attributes:
        ids: sibling message ids in creation order (includes the message itself).
        index: 0-based position of the message asked about.
    """

    ids: tuple[int, ...]
    index: int

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def position(self) -> int:
        """1-based position, as shown to people."""
        return self.index + 1

    @property
    def previous_id(self) -> int | None:
        return self.ids[self.index - 1] if self.index > 0 else None

    @property
    def next_id(self) -> int | None:
        return self.ids[self.index + 1] if self.index + 1 < len(self.ids) else None

    @property
    def label(self) -> str:
        """``"2/3"``."""
        return f"{self.position}/{self.count}"


@dataclass(frozen=True)
class SearchHit:
    """A message that matches a search.

    Attributes:
        conversation_id, message_id: where the match is.
        conversation_title: the conversation's title.
        role: the message's role.
        snippet: the matching part of the message (whitespace collapsed, ``…`` where cut).
        highlights: ``(start, end)`` character offsets of the matched words in ``snippet``.
    """

    conversation_id: int
    message_id: int
    conversation_title: str
    role: Role
    snippet: str
    highlights: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class RecoveryReport:
    """What happened when a damaged history was opened.

    Attributes:
        problem: what was wrong, in SQLite's words.
        damaged_path: where the damaged file was moved (with its ``-wal``/``-shm``, if any).
        conversations: conversations recovered (including placeholders).
        messages: messages recovered.
        unreadable_rows: row ids whose lookup failed: an upper bound on the
            rows lost (ids of rows deleted earlier on can be among them).
        placeholder_conversations: conversations re-created to hold messages whose
            conversation row was lost.
        detached_messages: messages whose parent was lost; they start a branch of their own.
        text_lost: messages kept without their text (it could not be read).
        errors: what went wrong while reading the damaged file, for the log.
    """

    problem: str
    damaged_path: Path
    conversations: int = 0
    messages: int = 0
    unreadable_rows: int = 0
    placeholder_conversations: int = 0
    detached_messages: int = 0
    text_lost: int = 0
    errors: tuple[str, ...] = ()


def make_title(text: str, limit: int = TITLE_MAX_CHARS) -> str:
    """A list title from a message: whitespace collapsed, cut on a word boundary.

    Args:
        text: usually the first user message.
        limit: most characters, the ``…`` included.

    Returns:
        The title, or :data:`DEFAULT_TITLE` for blank text.
    """
    flat = " ".join(text.split())
    if not flat:
        return DEFAULT_TITLE
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-–—") + "…"


# --------------------------------------------------------------------------- stored values


def json_dict(raw: object) -> dict[str, Any]:
    """The JSON object in a stored text cell; ``{}`` for anything else (not JSON, not an object)."""
    try:
        data = json.loads(raw) if isinstance(raw, (str, bytes)) else None
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def as_int(v: object) -> int | None:
    """A stored whole number (bool and integral float accepted), else None."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def as_float(v: object, default: float | None) -> float | None:
    """A stored finite number as float, else ``default``."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return default


def as_text(v: object) -> str:
    """Stored text (bytes decoded as UTF-8, bad bytes replaced), else ``""``."""
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return ""

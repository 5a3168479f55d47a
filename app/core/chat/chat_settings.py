"""What applies to one chat's replies, and the rule for new chats.

A chat's replies are made with its own :class:`ChatSettings`: the sampler settings, the system
prompt and the extra stop strings, stored with the chat (``Conversation.chat_settings``) and with
each reply (``MessageMeta``). A new chat starts with the defaults (``Settings.new_chat``).

The rule (:func:`after_edit`), in one place:

- opening a chat shows its settings and changes no default;
- a sampler or stop strings edit applies to the chat shown and becomes the default for new
  chats, but only what the person changed (:func:`carried`): the other values of an old chat
  stay that chat's own;
- an output constraint (JSON, a schema, a grammar) is the chat's own: never a default;
- a system prompt edit applies to the chat shown only (or to the new chat about to start); it
  becomes the default only when the person asks for it (``Use for new chats too``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from app.core.constraint.model import OutputConstraint
from app.core.sampling.params import SamplerSettings


@dataclass(frozen=True)
class ChatSettings:
    """What applies to one chat's replies.

    Attributes:
        sampler: the sampler settings of its replies.
        system_prompt: its system message ("" for none).
        stop_strings: extra stop strings of its replies (the chat template's end of turn is
            the engine's own), in the order typed.
        constraint: the output constraint of its replies (issue 23 §1): the chat's own, never
            carried to new chats (a new chat starts with none).
    """

    sampler: SamplerSettings = field(default_factory=SamplerSettings)
    system_prompt: str = ""
    stop_strings: tuple[str, ...] = ()
    constraint: OutputConstraint = field(default_factory=OutputConstraint)


def carried(defaults: SamplerSettings, before: SamplerSettings, after: SamplerSettings) -> SamplerSettings:
    """``defaults`` with the values the person changed from ``before`` to ``after`` (field by field)."""
    changed = {
        f.name: getattr(after, f.name) for f in fields(after) if getattr(after, f.name) != getattr(before, f.name)
    }
    return replace(defaults, **changed) if changed else defaults


def after_edit(defaults: ChatSettings, before: ChatSettings, after: ChatSettings) -> ChatSettings:
    """The defaults for new chats after the person edited a chat's settings from ``before`` to ``after``
    (the module docstring's rule: the sampler values and stop strings changed are carried, the system
    prompt is not)."""
    stops = after.stop_strings if after.stop_strings != before.stop_strings else defaults.stop_strings
    return replace(defaults, sampler=carried(defaults.sampler, before.sampler, after.sampler), stop_strings=stops)


def typed_stop_string(s: str) -> str:
    """A stop string as the person types it (a newline as ``\\n``)."""
    return s.replace("\n", "\\n")


def clean_stop_strings(values: object) -> tuple[str, ...]:
    """Stop strings from stored values (a JSON list): the non-empty strings, in order, no duplicates."""
    if not isinstance(values, (list, tuple)):
        return ()
    return tuple(dict.fromkeys(v for v in values if isinstance(v, str) and v))

"""What a message's widget shows, from a stored message or the reply in flight (plain Python, no Qt).

:class:`MessageLook` is everything a :class:`~app.ui.chat.message.MessageWidget` shows that depends
on the message rather than on the person's clicks: the title, the branch ‹ n/m ›, the badge, the
footer (the reply's figures), the provenance (the Details text), which actions are offered, and why
Continue is off. :func:`stored_look` makes it for a stored message, :func:`writing_look` for the
reply being written, :func:`ended_look` for a reply that just ended; the widget shows one with
:meth:`~app.ui.chat.message.MessageWidget.present`. Tested without Qt (tests/unit/test_chat_presenter.py).
"""

from __future__ import annotations

import contextlib
import enum
import json
from dataclasses import dataclass
from pathlib import Path

from app.core.chat.context import ContextPolicy, GenerationStats, Role, StopReason
from app.core.conversations import Message, MessageMeta, Siblings
from app.ui.common.stats_format import reply_details, reply_footer, stats_footer


class BadgeKind(str, enum.Enum):
    """The look of a message's badge (the stylesheet's ``kind`` property)."""

    NONE = ""
    LIVE = "live"  # thinking…, prefill…, stopping…
    WARN = "warn"  # stopped, context full, max_tokens reached
    ERROR = "error"  # cut off, engine stopped


@dataclass(frozen=True)
class Badge:
    """A small label next to a message's title (empty text: none)."""

    text: str = ""
    kind: BadgeKind = BadgeKind.NONE


NO_BADGE = Badge()
THINKING = Badge("thinking…", BadgeKind.LIVE)  # sent, nothing back yet
PREFILL = Badge("prefill…", BadgeKind.LIVE)  # the engine evaluates the prompt
WRITING = Badge("writing…", BadgeKind.LIVE)  # shown again while tokens arrive (another chat was shown)
STOPPING = Badge("stopping…", BadgeKind.LIVE)
CUT_OFF = Badge("cut off", BadgeKind.ERROR)  # the reply failed after some text
ENGINE_STOPPED = Badge("engine stopped", BadgeKind.ERROR)
NOT_SENT = Badge("not sent", BadgeKind.ERROR)
ENGINE_STOPPED_FOOTER = "The engine stopped during this reply; the text above is kept."

# How a reply that ended before its end of turn is marked (by the engine's stop reason).
CUT_BADGES: dict[StopReason, Badge] = {
    StopReason.CANCELLED: Badge("stopped", BadgeKind.WARN),
    StopReason.CONTEXT_FULL: Badge("context full", BadgeKind.WARN),
    StopReason.MAX_TOKENS: Badge("max_tokens reached", BadgeKind.WARN),
    StopReason.ERROR: CUT_OFF,
}


def stopped_badge(stats: GenerationStats) -> Badge:
    """The badge of a reply that ended with ``stats`` (none for its end of turn or a stop string)."""
    return CUT_BADGES.get(StopReason(stats.stop_reason), NO_BADGE)


@dataclass(frozen=True)
class ContinueRule:
    """What decides whether Continue can work for a reply cut off by a full context.

    Attributes:
        context_policy: the context policy in the settings (rolling drops old turns: Continue works).
        loaded_n_ctx: the loaded model's n_ctx, tokens (0: no model loaded).
    """

    context_policy: ContextPolicy = ContextPolicy.STOP
    loaded_n_ctx: int = 0

    def why_not(self, meta: MessageMeta) -> str:
        """Why Continue cannot work for a reply with ``meta`` ("" when it can): the context was full,
        and neither a larger n_ctx is loaded nor the context policy drops old turns."""
        st = meta.stats
        if st is None or StopReason(st.stop_reason) is not StopReason.CONTEXT_FULL:
            return ""
        if ContextPolicy(self.context_policy) is ContextPolicy.ROLLING or self.loaded_n_ctx > st.n_ctx:
            return ""
        return (
            f"The context is full ({st.n_ctx:,} tokens, n_ctx): raise n_ctx in the Model panel and reload, "
            'or choose "Drop oldest turns and go on" as the context policy, to continue this reply.'
        )


@dataclass(frozen=True)
class MessageLook:
    """What a message's widget shows (see the module docstring).

    Attributes:
        text: the message's text (Markdown for a reply).
        title: the header's name ("" : "You" or "Assistant").
        branch: ``(position, count)`` among its versions, 1-based.
        badge: the badge next to the title.
        footer: the line under a reply (its figures, or what went wrong); "" for none.
        how_made: the reply's provenance, the Details text ("" : no Details).
        can_show_tokens: the reply kept its alternatives (the Tokens button).
        can_continue: Continue is offered (a reply cut off).
        why_no_continue: Continue is offered but cannot work now: why (its tooltip, the button off).
        can_reply: a question left without an answer offers Reply.
        streaming: the reply is being written (Edit, Regenerate and Delete held back).
    """

    text: str
    title: str = ""
    branch: tuple[int, int] = (1, 1)
    badge: Badge = NO_BADGE
    footer: str = ""
    how_made: str = ""
    can_show_tokens: bool = False
    can_continue: bool = False
    why_no_continue: str = ""
    can_reply: bool = False
    streaming: bool = False


def title_of(m: Message) -> str:
    """A message's header name: a reply's model, "Tool result · add" for a tool's result (MCP tools in the
    chat), "" for a question (the widget says "You")."""
    if m.role is Role.USER:
        return tool_result_title(m.content)
    if m.role is not Role.ASSISTANT:
        return ""
    return m.meta.model_name or (Path(m.meta.model_path).stem if m.meta.model_path else "Assistant")


def tool_result_title(text: str) -> str:
    """ "Tool result · <tool>" when ``text`` is a tool's result as the chat stores it
    (:func:`app.core.tools.history.tool_result_text`, one per line), else ""."""
    if not text.startswith('{"tool_response"'):
        return ""
    try:
        name = json.loads(text.split("\n", 1)[0])["tool_response"]["name"]
    except (ValueError, KeyError, TypeError):
        return ""
    return f"Tool result · {name}" if isinstance(name, str) and name else "Tool result"


def tool_result_readable(text: str) -> str | None:
    """A tool's result as the chat shows it (review 24 #6): the ``content`` of each ``tool_response``
    line of ``text`` as text (JSON content indented by 2), each headed ``<name>:`` when there are
    several; None when ``text`` is not (only) tool results. What goes to the model stays ``text``."""
    if not text.startswith('{"tool_response"'):
        return None
    parts: list[tuple[str, str]] = []
    for line in text.split("\n"):
        try:
            response = json.loads(line)["tool_response"]
            name, content = response.get("name", ""), response["content"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if not isinstance(content, str):
            content = json.dumps(content, indent=2, ensure_ascii=False)
        elif content.lstrip()[:1] in ("{", "["):
            with contextlib.suppress(ValueError):  # not JSON after all: as written
                content = json.dumps(json.loads(content), indent=2, ensure_ascii=False)
        parts.append((str(name), content))
    if len(parts) == 1:
        return parts[0][1]
    return "\n\n".join(f"{name or 'tool'}:\n{content}" for name, content in parts)


def stored_look(
    m: Message, siblings: Siblings, *, has_alternatives: bool, rule: ContinueRule, unanswered: bool = False
) -> MessageLook:
    """How stored message ``m`` shows. ``unanswered``: it is the chat's last message, a question whose
    reply was deleted or never came (it offers Reply)."""
    branch = (siblings.position, siblings.count)
    if m.role is not Role.ASSISTANT:
        return MessageLook(m.content, title_of(m), branch, can_reply=unanswered and m.role is Role.USER)
    meta = m.meta
    badge, cut = NO_BADGE, not m.complete
    if cut:
        reason = StopReason(meta.stats.stop_reason) if meta.stats is not None else StopReason.ERROR
        badge = CUT_BADGES.get(reason, Badge("cut off", BadgeKind.WARN))
    return MessageLook(
        m.content,
        title_of(m),
        branch,
        badge,
        footer=stats_footer(meta) if meta.stats is not None else "",
        how_made=reply_details(meta),
        can_show_tokens=has_alternatives,
        can_continue=cut,
        why_no_continue=rule.why_not(meta) if cut else "",
    )


def writing_look(base: MessageLook, text: str, wrote: bool) -> MessageLook:
    """The reply being written, from its stored look ``base``: ``text`` so far; ``wrote``: tokens came
    in this turn (else it is still thinking)."""
    return MessageLook(
        text,
        base.title,
        base.branch,
        WRITING if wrote else THINKING,
        how_made=base.how_made,
        streaming=True,
    )


def ended_look(
    base: MessageLook,
    text: str,
    badge: Badge,
    stats: GenerationStats | None,
    meta: MessageMeta | None,
    rule: ContinueRule,
) -> MessageLook:
    """A reply that just ended: ``text``, marked with ``badge``; ``stats`` as the engine reported them
    (None: it failed or the engine went away), ``meta`` as stored (None: it could not be saved; the
    provenance in ``base`` stays). The footer gives the stored figures, else the engine's, else
    nothing. Continue is offered when it was cut off with some text."""
    if meta is not None and meta.stats is not None:
        footer = stats_footer(meta)
    elif stats is not None:
        footer = reply_footer(stats)
    else:
        footer = ""
    return MessageLook(
        text,
        base.title,
        base.branch,
        badge,
        footer=footer,
        how_made=reply_details(meta) if meta is not None else base.how_made,
        can_show_tokens=base.can_show_tokens,
        can_continue=bool(badge.text) and bool(text),
        why_no_continue=rule.why_not(meta) if meta is not None else "",
    )

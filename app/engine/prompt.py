"""From a conversation to prompt tokens: the chat template, tokenization, fitting n_ctx.

The model's chat template (GGUF metadata, Jinja2 as transformers and
llama-cpp-python render it), the person's override of it for this model
(compiled the same way; errors name the template's line), or, for models
without one, a plain transcript;
tokenized with special tokens parsed and BOS added when the tokenizer wants
it. A prompt that does not fit n_ctx is refused with both numbers (policy
STOP) or loses its oldest turns (policy ROLLING). Tools offered with a request
(:meth:`PromptBuilder.tools_offered`) go to the template's ``tools`` as llama.cpp's
common/chat.cpp passes them, or into the system message for a template without them.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.core.chat.context import ROLLING_RESERVE_FRACTION, ChatMessage, ContextPolicy, Role
from app.core.chat.overflow import overflow_message
from app.core.conversations.turns import repeated_roles
from app.core.protocol import FailureKind
from app.core.tools.history import template_messages
from app.core.tools.spec import ToolSpec
from app.core.tools.template import template_supports_tools, tools_system_prompt
from app.engine.errors import EngineError
from app.engine.kv_reuse import CachedTurn, splice_messages, splice_prompt
from app.engine.vocab import Vocab

# Override templates kept compiled (the one in use and a few being edited and previewed).
COMPILED_TEMPLATES_KEPT = 4


class PlainTranscript:
    """Prompt format for models without a chat template (base models).

    ``System\\n\\nUser: ...\\nAssistant: ...``; generation stops at a new "User:" line.

    A reply is generated after ``Assistant:`` and its text usually starts with the
    space the model sampled; a past reply is rendered as ``Assistant:`` + that text,
    so the transcript says exactly what the model saw itself write (and the KV cache's
    tokens for it are reused, :mod:`app.engine.kv_reuse`). A reply that does not start
    with white space (written or edited by the person) gets the one space.
    """

    stop = ("\nUser:",)

    def render(self, messages: Sequence[ChatMessage], continue_last: bool) -> str:
        parts: list[str] = []
        for m in messages:
            if m.role == "system":
                if m.content.strip():
                    parts.append(m.content.strip() + "\n\n")
            elif m.role == "user":
                parts.append(f"User: {m.content}\n")
            else:
                sep = "" if m.content[:1].isspace() else " "
                parts.append(f"Assistant:{sep}{m.content}\n")
        if continue_last and messages and messages[-1].role == "assistant":
            parts[-1] = parts[-1][:-1]  # keep going inside the last assistant line
        else:
            parts.append("Assistant:")
        return "".join(parts)


def template_refusal(messages: Sequence[ChatMessage], exc: Exception) -> str:
    """The person's words for a chat template that raised on ``messages``.

    When user and assistant messages do not take turns (which strict templates such as
    Gemma 3's refuse), the text names the first place, counting messages from 1 without
    the system prompt, e.g. "two user messages in a row (messages 3 and 4)", and the fix.
    """
    said = f"The model's chat template rejected this conversation: {exc}"
    turns = [m.role for m in messages if m.role is not Role.SYSTEM]
    repeated = repeated_roles(turns)
    if not repeated:
        return said
    where = repeated[0].describe()
    more = f" ({len(repeated) - 1} more place(s) like it)" if len(repeated) > 1 else ""
    end = " " if said.endswith(".") else ". "  # the template's own words may end a sentence ("...")
    return (
        f"{said}{end}This model's template needs user and assistant messages to take turns, and this "
        f"conversation has {where}{more}. Merge the two messages, or delete the earlier one, and send again."
    )


def template_line(exc: BaseException) -> int | None:
    """The line of the Jinja2 template where ``exc`` arose (1-based), or None when unknown.

    A syntax error carries it (``TemplateSyntaxError.lineno``); an exception while rendering
    has a traceback frame in the compiled template (jinja2 names it ``<template>``).
    """
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return exc.lineno
    lines = [fr.lineno for fr in traceback.extract_tb(exc.__traceback__) if fr.filename == "<template>"]
    return lines[-1] if lines and lines[-1] is not None else None


def describe_template_error(exc: BaseException, stage: str) -> str:
    """The person's words for a chat template that failed to ``stage`` ("compile", "render"),
    naming the line, e.g. ``The chat template does not compile: line 3: unexpected end of template``."""
    line = template_line(exc)
    what = exc.message if isinstance(exc, jinja2.TemplateSyntaxError) and exc.message else str(exc)
    kind = "" if isinstance(exc, (jinja2.TemplateSyntaxError, ValueError)) else f"{type(exc).__name__}: "
    where = f"line {line}: " if line is not None else ""
    return f"The chat template does not {stage}: {where}{kind}{what}"


def compile_template(source: str, eos_text: str, bos_text: str) -> Any:
    """A chat template compiled as llama-cpp-python compiles the GGUF's (``Jinja2ChatFormatter``).

    Raises:
        EngineError: ``template`` for a template jinja2 cannot compile (the line named).
    """
    try:
        return Jinja2ChatFormatter(template=source, eos_token=eos_text, bos_token=bos_text)
    except Exception as exc:  # TemplateSyntaxError, or an extension's error
        raise EngineError(FailureKind.TEMPLATE, describe_template_error(exc, "compile")) from None


@dataclass
class PromptTiming:
    """Where the time of building one prompt went, nanoseconds (reset per turn by the session)."""

    render_ns: int = 0
    tokenize_ns: int = 0


@dataclass(frozen=True)
class FittedPrompt:
    """A prompt that fits n_ctx.

    Attributes:
        tokens: the prompt's token ids (BOS included when the tokenizer adds one).
        text: the rendered prompt.
        dropped: oldest messages left out to make it fit.
        messages: the messages the prompt holds (without the dropped ones).
    """

    tokens: list[int]
    text: str
    dropped: int
    messages: list[ChatMessage]


class PromptBuilder:
    """Renders and tokenizes conversations for one loaded model.

    Args:
        llm: the ``llama_cpp.Llama`` (its tokenizer).
        vocab: the model's vocabulary (BOS rules).
        formatter: the compiled chat template (a ``Jinja2ChatFormatter``), or None for
            a :class:`PlainTranscript`.
        template_stop: stop strings the template implies (its EOS text).
        n_ctx: the context llama.cpp allocated, tokens.
        trained_ctx: the model's trained context length, tokens (named in overflow advice).
        bos_text, eos_text: the texts of BOS and EOS (given to an override's template).

    Attributes:
        cached_turn: what the KV cache holds after the last turn (set by the session);
            prompts that start with it reuse its tokens (:mod:`app.engine.kv_reuse`).
        timing: time spent rendering and tokenizing since it was last reset.
        override: the person's template source in use (:meth:`use_template`), or None.
    """

    def __init__(
        self,
        llm: Any,
        vocab: Vocab,
        formatter: Any | None,
        template_stop: tuple[str, ...],
        n_ctx: int,
        trained_ctx: int,
        bos_text: str = "",
        eos_text: str = "",
    ) -> None:
        self._llm = llm
        self._vocab = vocab
        self._gguf_formatter = formatter
        self._gguf_stop = template_stop
        self._formatter = formatter
        self._plain = PlainTranscript()
        self._template_stop = template_stop
        self._bos_text = bos_text
        self._eos_text = eos_text
        self._compiled: dict[str, Any] = {}  # overrides compiled, by their source (the last few)
        self.override: str | None = None
        self.n_ctx = n_ctx
        self._trained_ctx = trained_ctx
        self.cached_turn: CachedTurn | None = None
        self.timing = PromptTiming()
        self._tools: tuple[ToolSpec, ...] = ()
        self._tools_forced = False

    def use_template(self, source: str | None) -> None:
        """Render with ``source`` (the person's template for this model) from now on; None: the GGUF's.

        Raises:
            EngineError: ``template`` when ``source`` does not compile (nothing changes then).
        """
        if source is None:
            self._formatter, self._template_stop, self.override = self._gguf_formatter, self._gguf_stop, None
            return
        formatter = self._compiled.get(source)
        if formatter is None:
            formatter = compile_template(source, self._eos_text, self._bos_text)
            if len(self._compiled) >= COMPILED_TEMPLATES_KEPT:
                self._compiled.pop(next(iter(self._compiled)))
            self._compiled[source] = formatter
        self._formatter = formatter
        self._template_stop = (self._eos_text,) if self._eos_text else ()
        self.override = source

    @contextlib.contextmanager
    def template_for_now(self, source: str | None) -> Iterator[None]:
        """Render with ``source`` (None: the GGUF's) inside the block only; the template in use for
        replies is back after it (compiled already: restoring cannot fail).

        Raises:
            EngineError: ``template`` when ``source`` does not compile (nothing changes then).
        """
        before = self.override
        self.use_template(source)
        try:
            yield
        finally:
            self.use_template(before)

    @contextlib.contextmanager
    def tools_offered(self, tools: tuple[ToolSpec, ...], forced: bool) -> Iterator[None]:
        """Render with ``tools`` offered to the model inside the block only (a request's ``tools``).

        A template whose Jinja source reads ``tools`` gets them as OpenAI's tool objects (what
        llama.cpp's common/chat.cpp passes); otherwise, when ``forced`` (the reply is constrained
        to a call), they are described in the system message; otherwise rendering fails (below).

        Raises (from :meth:`render` inside the block):
            EngineError: ``template`` when ``tools`` are offered, not ``forced``, and the template
                (or the plain transcript of a model without one) has no place for them.
        """
        self._tools, self._tools_forced = tools, forced
        try:
            yield
        finally:
            self._tools, self._tools_forced = (), False

    def _with_tools(self, messages: list[ChatMessage]) -> tuple[list[ChatMessage], dict[str, Any]]:
        """``messages`` and the template's extra variables with the offered tools (see :meth:`tools_offered`)."""
        if not self._tools:
            return messages, {}
        if self._template_reads_tools:
            return messages, {"tools": [t.openai() for t in self._tools]}
        if not self._tools_forced:
            why = (
                "This model's chat template does not offer tools (its Jinja source never reads 'tools')"
                if self._formatter is not None
                else "This model has no chat template (Glassbox writes a plain transcript), so nothing offers it tools"
            )
            raise EngineError(
                FailureKind.TEMPLATE,
                f'{why}: with tool_choice "auto" the model would not know them. '
                'Send tool_choice "required" or '
                '{"type": "function", "function": {"name": ...}}: the reply is then constrained to a call of '
                "one of your tools, whatever the template. Or use a model whose chat template supports tools.",
            )
        described = tools_system_prompt(self._tools)
        if messages and messages[0].role is Role.SYSTEM:
            first = messages[0]
            return [ChatMessage(Role.SYSTEM, f"{first.content.rstrip()}\n\n{described}"), *messages[1:]], {}
        return [ChatMessage(Role.SYSTEM, described), *messages], {}

    @property
    def _template_reads_tools(self) -> bool:
        """The template in use reads ``tools`` (:func:`~app.core.tools.template.template_supports_tools`)."""
        return template_supports_tools(getattr(self._formatter, "template", None))

    @property
    def has_template(self) -> bool:
        """A chat template is in use (the GGUF's or an override), not the plain transcript."""
        return self._formatter is not None

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """Stop strings of the prompt format (template EOS text, or the plain transcript's "User:" line)."""
        return self._template_stop + (self._plain.stop if self._formatter is None else ())

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """Token ids of ``text`` (no BOS added; ``special``: parse special-token texts)."""
        t = time.perf_counter_ns()
        toks: list[int] = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        self.timing.tokenize_ns += time.perf_counter_ns() - t
        return toks

    def prompt_tokens(self, text: str) -> list[int]:
        """The tokens of a whole prompt ``text``: special-token texts parsed, BOS first when the
        tokenizer adds one and the text does not already start with it."""
        toks = self.tokenize(text, special=True)
        bos = self._vocab.bos
        if self._vocab.add_bos and bos >= 0 and (not toks or toks[0] != bos):
            toks.insert(0, bos)
        return toks

    def render(self, messages: Sequence[ChatMessage], continue_last: bool = False) -> str:
        """The prompt text for ``messages`` with the model's chat template.

        Raises:
            EngineError: ``template`` when the template rejects the conversation.
        """
        t = time.perf_counter_ns()
        try:
            return self._render(messages, continue_last)
        finally:
            self.timing.render_ns += time.perf_counter_ns() - t

    def _render(self, messages: Sequence[ChatMessage], continue_last: bool) -> str:
        msgs, extra = self._with_tools(list(messages))
        if self._formatter is None:
            return self._plain.render(msgs, continue_last)
        tail = ""
        if continue_last and msgs and msgs[-1].role == "assistant":
            tail = msgs.pop().content
        # A template that offers tools shows calls and results its own way (app.core.tools.history).
        as_dicts = (
            template_messages(msgs)
            if self._template_reads_tools
            else [{"role": m.role, "content": m.content} for m in msgs]
        )
        try:
            out: str = self._formatter(messages=as_dicts, **extra).prompt
        except Exception as exc:  # jinja2 raise_exception(...) or a template bug
            if self.override is None:
                raise EngineError(FailureKind.TEMPLATE, template_refusal(messages, exc)) from None
            if isinstance(exc, ValueError):  # the person's template refused the conversation (raise_exception)
                line = template_line(exc)
                where = f" (line {line} of your chat template)" if line is not None else ""
                raise EngineError(FailureKind.TEMPLATE, template_refusal(messages, exc) + where) from None
            raise EngineError(FailureKind.TEMPLATE, describe_template_error(exc, "render")) from None
        return out + tail

    def tokens_for(self, messages: Sequence[ChatMessage], continue_last: bool) -> tuple[list[int], str]:
        """The prompt's tokens (BOS first when the tokenizer adds it) and its text.

        Replies that carry their sampled tokens (:attr:`ChatMessage.tokens`) are those tokens
        as far as they spell the reply (:func:`~app.engine.kv_reuse.splice_messages`); otherwise,
        when the text continues :attr:`cached_turn`, the tokens the KV cache holds are reused as
        far as their text matches (sampled reply tokens included).
        """
        text = self.render(messages, continue_last)
        with_replies = splice_messages(messages, text, self._vocab, self.tokenize, self.prompt_tokens)
        if with_replies is not None:
            return with_replies, text
        if self.cached_turn is not None:
            spliced = splice_prompt(self.cached_turn, text, self._vocab, self.tokenize)
            if spliced is not None:
                return spliced, text
        return self.prompt_tokens(text), text

    def fit(self, messages: list[ChatMessage], continue_last: bool, policy: ContextPolicy) -> FittedPrompt:
        """The prompt for ``messages``, fitted into n_ctx by ``policy``.

        Raises:
            EngineError: ``context_overflow`` when it does not fit (STOP policy, or ROLLING
                with nothing left to drop), naming both token counts and what to do;
                ``template`` from :meth:`render`.
        """
        toks, text = self.tokens_for(messages, continue_last)
        if len(toks) < self.n_ctx:
            return FittedPrompt(toks, text, 0, list(messages))
        n_full = len(toks)
        if policy == ContextPolicy.ROLLING:
            budget = int(self.n_ctx * (1 - ROLLING_RESERVE_FRACTION))
            kept, dropped = self.drop_oldest(messages, budget, continue_last)
            if kept is not None:
                toks, text = self.tokens_for(kept, continue_last)
                return FittedPrompt(toks, text, dropped, kept)
        last_len = len(self.tokens_for([m for m in messages if m.role == "system"] + messages[-1:], continue_last)[0])
        raise EngineError(
            FailureKind.CONTEXT_OVERFLOW, overflow_message(n_full, last_len, self.n_ctx, self._trained_ctx)
        )

    def fit_raw(self, text: str) -> FittedPrompt:
        """A prompt text used as it is (no chat template): special-token texts parsed, BOS added
        when the tokenizer wants it.

        Raises:
            EngineError: ``context_overflow`` when it does not fit n_ctx (nothing can be dropped).
        """
        toks = self.prompt_tokens(text)
        if len(toks) >= self.n_ctx:
            raise EngineError(
                FailureKind.CONTEXT_OVERFLOW,
                f"The prompt is {len(toks)} tokens but the context holds {self.n_ctx} (n_ctx).",
            )
        return FittedPrompt(toks, text, 0, [])

    def drop_oldest(
        self, messages: list[ChatMessage], budget: int, continue_last: bool
    ) -> tuple[list[ChatMessage] | None, int]:
        """Drop the oldest non-system messages until the prompt fits in ``budget`` tokens.

        Returns:
            ``(kept messages, how many were dropped)``; kept is None when even the
            last message (with the system prompt) exceeds ``budget``.
        """
        system = [m for m in messages[:1] if m.role == "system"]
        rest = messages[len(system) :]
        dropped = 0
        while len(rest) > 1:
            # Drop a whole exchange when possible so roles keep alternating.
            n = 2 if len(rest) > 2 and rest[0].role == "user" and rest[1].role == "assistant" else 1
            rest = rest[n:]
            dropped += n
            if len(self.tokens_for(system + rest, continue_last)[0]) <= budget:
                return system + rest, dropped
        return None, dropped

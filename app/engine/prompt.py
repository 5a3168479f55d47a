"""From a conversation to prompt tokens: the chat template, tokenization, fitting n_ctx.

The model's chat template (GGUF metadata, Jinja2 as transformers and
llama-cpp-python render it) or, for models without one, a plain transcript;
tokenized with special tokens parsed and BOS added when the tokenizer wants
it. A prompt that does not fit n_ctx is refused with both numbers (policy
STOP) or loses its oldest turns (policy ROLLING).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.core.chat import ChatMessage, ContextPolicy, Role
from app.core.conversations.turns import repeated_roles
from app.core.protocol import FailureKind
from app.engine.errors import EngineError
from app.engine.kv_reuse import CachedTurn, splice_prompt
from app.engine.vocab import Vocab

# Tokens kept free for the reply when the rolling policy trims the prompt.
ROLLING_RESERVE_FRACTION = 0.25


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

    Attributes:
        cached_turn: what the KV cache holds after the last turn (set by the session);
            prompts that start with it reuse its tokens (:mod:`app.engine.kv_reuse`).
    """

    def __init__(
        self,
        llm: Any,
        vocab: Vocab,
        formatter: Any | None,
        template_stop: tuple[str, ...],
        n_ctx: int,
        trained_ctx: int,
    ) -> None:
        self._llm = llm
        self._vocab = vocab
        self._formatter = formatter
        self._plain = PlainTranscript()
        self._template_stop = template_stop
        self.n_ctx = n_ctx
        self._trained_ctx = trained_ctx
        self.cached_turn: CachedTurn | None = None

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """Stop strings of the prompt format (template EOS text, or the plain transcript's "User:" line)."""
        return self._template_stop + (self._plain.stop if self._formatter is None else ())

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """Token ids of ``text`` (no BOS added; ``special``: parse special-token texts)."""
        toks: list[int] = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        return toks

    def render(self, messages: Sequence[ChatMessage], continue_last: bool = False) -> str:
        """The prompt text for ``messages`` with the model's chat template.

        Raises:
            EngineError: ``template`` when the template rejects the conversation.
        """
        if self._formatter is None:
            return self._plain.render(messages, continue_last)
        msgs = list(messages)
        tail = ""
        if continue_last and msgs and msgs[-1].role == "assistant":
            tail = msgs.pop().content
        try:
            out: str = self._formatter(messages=[{"role": m.role, "content": m.content} for m in msgs]).prompt
        except Exception as exc:  # jinja2 raise_exception(...) or a template bug
            raise EngineError(FailureKind.TEMPLATE, template_refusal(messages, exc)) from None
        return out + tail

    def tokens_for(self, messages: Sequence[ChatMessage], continue_last: bool) -> tuple[list[int], str]:
        """The prompt's tokens (BOS first when the tokenizer adds it) and its text.

        When the text continues :attr:`cached_turn`, the tokens the KV cache holds are
        reused as far as their text matches (sampled reply tokens included).
        """
        text = self.render(messages, continue_last)
        if self.cached_turn is not None:
            spliced = splice_prompt(self.cached_turn, text, self._vocab, self.tokenize)
            if spliced is not None:
                return spliced, text
        toks = self.tokenize(text, special=True)
        bos = self._vocab.bos
        if self._vocab.add_bos and bos >= 0 and (not toks or toks[0] != bos):
            toks.insert(0, bos)
        return toks, text

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
        if last_len >= self.n_ctx:
            advice = (
                f"Your message alone takes {last_len} tokens. Raise n_ctx in the Model panel "
                f"(this model was trained for {self._trained_ctx} tokens), "
                "or shorten the message."
            )
        else:
            advice = (
                f"Raise n_ctx in the Model panel (this model was trained for "
                f"{self._trained_ctx} tokens), or set the context policy to "
                '"Drop oldest turns and go on" so the oldest messages are left out.'
            )
        raise EngineError(
            FailureKind.CONTEXT_OVERFLOW,
            f"The conversation is {n_full} tokens but the context holds {self.n_ctx} (n_ctx). {advice}",
        )

    def fit_raw(self, text: str) -> FittedPrompt:
        """A prompt text used as it is (no chat template): special-token texts parsed, BOS added
        when the tokenizer wants it.

        Raises:
            EngineError: ``context_overflow`` when it does not fit n_ctx (nothing can be dropped).
        """
        toks = self.tokenize(text, special=True)
        bos = self._vocab.bos
        if self._vocab.add_bos and bos >= 0 and (not toks or toks[0] != bos):
            toks.insert(0, bos)
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

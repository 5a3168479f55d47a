"""RenderPrompt and CountPrompt: what a conversation renders to and how many tokens it makes, without running it."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.chat_template import SAMPLE_CONVERSATION
from app.engine.errors import EngineError
from app.engine.loader import LoadedModel


def render_prompt(m: LoadedModel, req: P.RenderPrompt) -> P.PromptRendered:
    """The prompt ``req.messages`` (or the sample conversation) renders to, and its tokens.

    With ``req.chat_template`` this validates an override: it must compile, render the
    conversation without an exception and produce text. The template in use for
    replies is left as it was.

    Raises:
        EngineError: ``template`` (a syntax error or an exception, its line named; or no text).
    """
    b = m.prompt
    sample = not req.messages
    messages = SAMPLE_CONVERSATION if sample else req.messages
    with b.template_for_now(req.chat_template):
        text = b.render(messages, req.continue_last)
        plain = not b.has_template
    if not text.strip():
        raise EngineError(
            P.FailureKind.TEMPLATE,
            "The chat template renders no text for "
            + ("a conversation with system, user and assistant turns." if sample else "this conversation."),
        )
    toks = b.prompt_tokens(text)
    vocab = m.vocab
    pieces = tuple(P.PromptPiece(t, vocab.display(t), vocab.is_special(t)) for t in toks[: P.MAX_RENDERED_PIECES])
    if req.chat_template is not None:
        source, template = P.TemplateSource.OVERRIDE, req.chat_template
    elif plain:
        source, template = P.TemplateSource.PLAIN, None
    else:
        source, template = P.TemplateSource.GGUF, m.info.chat_template
    return P.PromptRendered(
        request_id=req.request_id,
        text=text,
        pieces=pieces,
        n_tokens=len(toks),
        source=source,
        template=template,
        gguf_template=m.info.chat_template or None,
        sample=sample,
    )


def count_prompt(m: LoadedModel, req: P.CountPrompt) -> P.PromptCounted:
    """How many tokens ``req.messages`` make as a prompt (rendered as a reply would render them),
    how many the last message's text makes alone, and, over n_ctx, what fitting by ``req.policy``
    does to it (:meth:`PromptBuilder.fit`, the same call a reply makes).

    Raises:
        EngineError: ``template`` (the template rejects the conversation).
    """
    b = m.prompt
    with b.template_for_now(req.chat_template):
        n_tokens = len(b.prompt_tokens(b.render(req.messages)))
        dropped, fitted = 0, n_tokens
        if n_tokens >= b.n_ctx:
            try:
                fit = b.fit(list(req.messages), False, req.policy)
                dropped, fitted = fit.dropped, len(fit.tokens)
            except EngineError as exc:
                if exc.kind is not P.FailureKind.CONTEXT_OVERFLOW:
                    raise
                dropped, fitted = -1, 0
    last = b.tokenize(req.messages[-1].content, special=False) if req.messages else []
    return P.PromptCounted(req.request_id, n_tokens, len(last), m.n_ctx, dropped, fitted)

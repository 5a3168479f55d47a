"""The template and the tokens the model sees (RenderPrompt), the per-model chat template
override (Generate.chat_template), and the engine's timestamps for the turn's timeline, on
real SmolLM2 and Gemma 3 270M (whose test GGUF has no chat template)."""

from __future__ import annotations

import pytest

from app.core import protocol as P
from app.core.chat.chat_template import SAMPLE_CONVERSATION
from tests.support.engine import SYSTEM, start_engine

# Gemma 3's format, as its instruction-tuned models' template writes it (system folded into the first user turn).
GEMMA_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
{%- set first = messages[0]['content'] + '\\n\\n' -%}
{%- set loop_messages = messages[1:] -%}
{%- else -%}
{%- set first = '' -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{ '<start_of_turn>' + role + '\\n' + (first if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<start_of_turn>model\\n' }}
{%- endif -%}"""

CHAT = (SYSTEM, ("user", "What is the capital of France?"))


@pytest.fixture(scope="module")
def gemma_engine(gemma):
    eng = start_engine(gemma, n_ctx=1024)
    yield eng
    eng.host.stop()


def test_the_rendered_prompt_is_what_the_reply_evaluates_with_special_tokens_marked(engine) -> None:
    engine.host.request(P.ResetContext(engine.host.next_id()))
    shown = engine.render(CHAT)
    assert isinstance(shown, P.PromptRendered), shown
    assert shown.source is P.TemplateSource.GGUF and shown.template == engine.loaded.chat_template
    assert shown.text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")
    assert shown.text.endswith("<|im_start|>assistant\n") and not shown.sample
    # Token boundaries: the pieces spell the text; <|im_start|> and <|im_end|> are special tokens.
    assert "".join(p.text for p in shown.pieces) == shown.text and shown.n_tokens == len(shown.pieces)
    specials = {p.text for p in shown.pieces if p.special}
    assert specials == {"<|im_start|>", "<|im_end|>"}
    assert not any(p.special for p in shown.pieces if p.text.strip() in ("system", "user", "France"))
    # Exactly the tokens a reply to the same chat evaluates (nothing in the KV cache: all of them).
    events: list = []
    fin = engine.generate(CHAT, events=events, max_tokens=2, temperature=0.0)
    assert isinstance(fin, P.Finished)
    prep = next(e for e in events if isinstance(e, P.PromptPrepared))
    assert prep.cached_tokens == 0 and prep.prompt_text == shown.text
    assert [t for t, _ in prep.new_tokens] == [p.token_id for p in shown.pieces]


def test_the_sample_conversation_renders_every_role(engine) -> None:
    shown = engine.render(())
    assert isinstance(shown, P.PromptRendered) and shown.sample
    for m in SAMPLE_CONVERSATION:
        assert f"<|im_start|>{m.role}\n{m.content}<|im_end|>" in shown.text


BROKEN = [
    ("{% for m in messages %}\n{{ m.content }}\n{% endfor %}\n{{ 'x' | nosuchfilter }}", "does not compile: line 4: "),
    ("{% for m in messages %}\n{{ m.content }}\n{% endfor %}\n{{ 1 / 0 }}", "does not render: line 4: "),
    ("{% for m in messages %}\n{{ m.content.nope() }}\n{% endfor %}", "does not render: line 2: "),
]


@pytest.mark.parametrize(("template", "said"), [*BROKEN, ("{% for m in messages %}{% endfor %}   ", "renders no text")])
def test_a_broken_override_is_refused_with_its_line_and_changes_nothing(engine, template, said) -> None:
    failed = engine.render((), template)
    assert isinstance(failed, P.Failed) and failed.kind is P.FailureKind.TEMPLATE
    assert said in failed.message, failed.message
    # And the model's own template is still the one in use.
    again = engine.render(CHAT)
    assert isinstance(again, P.PromptRendered) and again.source is P.TemplateSource.GGUF
    assert again.text.startswith("<|im_start|>system")


@pytest.mark.parametrize(("template", "said"), BROKEN)
def test_a_reply_with_a_broken_override_fails_before_anything_is_evaluated(engine, template, said) -> None:
    events: list = []
    refused = engine.generate(CHAT, events=events, chat_template=template, max_tokens=2)
    assert isinstance(refused, P.Failed) and refused.kind is P.FailureKind.TEMPLATE
    assert said in refused.message and not events


def test_a_gemma_override_renders_its_turns_and_the_reply_uses_it(gemma_engine) -> None:
    eng = gemma_engine
    assert eng.loaded.chat_template is None  # the test GGUF has none: a plain transcript without an override
    plain = eng.render(CHAT)
    assert isinstance(plain, P.PromptRendered) and plain.source is P.TemplateSource.PLAIN
    assert "User: What is the capital of France?" in plain.text and "<start_of_turn>" not in plain.text
    shown = eng.render(CHAT, GEMMA_TEMPLATE)
    assert isinstance(shown, P.PromptRendered) and shown.source is P.TemplateSource.OVERRIDE
    assert shown.text == (
        "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nWhat is the capital of France?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    specials = [p.text for p in shown.pieces if p.special]
    assert specials == ["<bos>", "<start_of_turn>", "<end_of_turn>", "<start_of_turn>"]
    # A reply with the override: its prompt is that text, its tokens the special tokens (one BOS).
    events: list = []
    fin = eng.generate(CHAT, events=events, chat_template=GEMMA_TEMPLATE, max_tokens=6, temperature=0.0)
    assert isinstance(fin, P.Finished), getattr(fin, "message", fin)
    prep = next(e for e in events if isinstance(e, P.PromptPrepared))
    assert prep.prompt_text == shown.text and prep.prompt_tokens == shown.n_tokens
    assert [t for t, _ in prep.new_tokens[-(len(shown.pieces) - prep.cached_tokens) :]] == [
        p.token_id for p in shown.pieces[prep.cached_tokens :]
    ]
    assert [text for _, text in prep.new_tokens].count("<bos>") <= 1
    # Without the override the same chat goes back to the plain transcript.
    events.clear()
    fin = eng.generate(CHAT, events=events, max_tokens=2, temperature=0.0)
    prep = next(e for e in events if isinstance(e, P.PromptPrepared))
    assert isinstance(fin, P.Finished) and prep.prompt_text == plain.text


def test_the_engine_stamps_every_phase_of_the_turn(fresh_engine) -> None:
    eng = fresh_engine(n_ctx=2048, n_batch=64)
    events: list = []
    long_question = "Tell me about the history of Paris. " * 20
    fin = eng.generate([SYSTEM, ("user", long_question)], events=events, max_tokens=12, temperature=0.0)
    assert isinstance(fin, P.Finished)
    prep = next(e for e in events if isinstance(e, P.PromptPrepared))
    assert prep.template_s > 0 and prep.tokenize_s > 0 and prep.reuse_s > 0
    assert prep.template_s + prep.tokenize_s + prep.reuse_s <= prep.elapsed_s
    slices = [e for e in events if isinstance(e, P.PrefillProgress) and e.slice_tokens]
    # n_batch 64: slices end on multiples of 64, and the last token alone.
    assert sum(s.slice_tokens for s in slices) == prep.to_evaluate == fin.stats.evaluated_tokens
    assert len(slices) >= prep.to_evaluate // 64 and slices[-1].slice_tokens == 1
    ends = [s.elapsed_s for s in slices]
    assert ends == sorted(ends) and ends[0] > prep.elapsed_s
    tokens = [e for e in events if isinstance(e, P.TokenEvent)]  # EngineHost hands batches out token by token
    assert tokens[0].t_s > ends[-1] and fin.elapsed_s >= tokens[-1].t_s
    assert tokens[0].t_s == pytest.approx(fin.stats.ttft_s, abs=1e-6)


def test_the_composer_count_is_the_prompt_a_reply_evaluates_and_the_message_alone(engine) -> None:
    from app.core.chat.context import ChatMessage

    msgs = tuple(ChatMessage(*m) for m in CHAT)
    counted = engine.host.request(P.CountPrompt(engine.host.next_id(), msgs))
    assert isinstance(counted, P.PromptCounted), counted
    shown = engine.render(CHAT)
    assert counted.n_tokens == shown.n_tokens  # the whole prompt: template framing, generation prompt
    assert counted.n_ctx == engine.loaded.n_ctx
    # The message alone, as the tokenizer splits it: "What is the capital of France?" is 7 tokens in
    # SmolLM2's BPE (What, ·is, ·the, ·capital, ·of, ·France, ?).
    assert counted.last_tokens == 7
    # A longer draft: one more token per " word" (a word SmolLM2 has whole), the prompt as much more.
    longer = (*msgs[:-1], ChatMessage("user", CHAT[-1][1] + " Paris Paris Paris"))
    more = engine.host.request(P.CountPrompt(engine.host.next_id(), longer))
    assert more.last_tokens == 10 and more.n_tokens == counted.n_tokens + 3
    # An override that does not compile is refused (kind template), and the next count is the GGUF's again.
    bad = engine.host.request(P.CountPrompt(engine.host.next_id(), msgs, "{% for %}"))
    assert isinstance(bad, P.Failed) and bad.kind is P.FailureKind.TEMPLATE
    again = engine.host.request(P.CountPrompt(engine.host.next_id(), msgs))
    assert again.n_tokens == counted.n_tokens


def test_over_n_ctx_the_count_drops_what_a_reply_drops_or_says_it_would_be_refused(smollm2) -> None:
    from app.core.chat.context import ChatMessage, ContextPolicy
    from app.core.sampling.params import SamplerSettings

    eng = start_engine(smollm2, n_ctx=512)
    try:
        long = " ".join(f"word{i}" for i in range(60))  # about 150 tokens
        msgs = (
            ChatMessage("system", "You are a helpful assistant."),
            ChatMessage("user", long),
            ChatMessage("assistant", long),
            ChatMessage("user", long),
            ChatMessage("assistant", long),
            ChatMessage("user", "And now?"),
        )
        rid = eng.host.next_id
        stop = eng.host.request(P.CountPrompt(rid(), msgs, None, ContextPolicy.STOP))
        assert stop.n_tokens >= stop.n_ctx == 512 and stop.dropped_messages == -1 and stop.fitted_tokens == 0
        rolling = eng.host.request(P.CountPrompt(rid(), msgs, None, ContextPolicy.ROLLING))
        assert rolling.n_tokens == stop.n_tokens and rolling.dropped_messages >= 2
        assert 0 < rolling.fitted_tokens <= 512 * 3 // 4  # the policy keeps a quarter of n_ctx for the reply
        # Exactly what Send does with the same chat and policy.
        events: list = []
        eng.host.request(P.ResetContext(rid()))
        fin = eng.host.request(
            P.Generate(
                rid(), msgs, SamplerSettings(temperature=0.0, max_tokens=1), context_policy=ContextPolicy.ROLLING
            ),
            timeout=120,
            on_event=events.append,
        )
        assert isinstance(fin, P.Finished), fin
        prep = next(e for e in events if isinstance(e, P.PromptPrepared))
        assert prep.dropped_messages == rolling.dropped_messages and prep.prompt_tokens == rolling.fitted_tokens
        # A message too long on its own is refused under either policy.
        huge = (msgs[0], ChatMessage("user", long * 4))
        for policy in ContextPolicy:
            alone = eng.host.request(P.CountPrompt(rid(), huge, None, policy))
            assert alone.dropped_messages == -1, policy
    finally:
        eng.host.stop()

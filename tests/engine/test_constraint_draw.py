"""A constrained greedy draw's shortcut (the best candidates tried one by one against the grammar) against
the whole chain (the grammar over the whole vocabulary first): the same tokens, step after step, on real
SmolLM2 and Gemma 3 logits, with a logit bias and penalties in the chain (:class:`CheckedDraw`)."""

from __future__ import annotations

import json

import llama_cpp
import pytest

from app.core.sampling.params import SamplerSettings
from app.engine.constraint.sampler import CheckedDraw, grammar_sampler
from app.engine.funnel import make_chain
from app.engine.vocab import Vocab

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 10}, "n": {"type": "integer"}},
    "required": ["name", "n"],
}
PROMPT = "Write a JSON object describing a cat:"


@pytest.mark.parametrize("model", ["smollm2", "gemma"])
def test_the_greedy_shortcut_draws_what_the_whole_chain_draws(request, model):
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    llm = llama_cpp.Llama(model_path=str(request.getfixturevalue(model)), n_ctx=256, n_threads=1, verbose=False)
    try:
        vocab = Vocab(llm.model)
        gbnf = json_schema_to_gbnf(json.dumps(SCHEMA))
        tokens = llm.tokenize(PROMPT.encode(), add_bos=True)
        llm.eval(tokens)
        n_ctx = llm.n_ctx()
        # repeat penalty and a bias against the raw model's first choices make the stages matter
        s = SamplerSettings(temperature=0.0, repeat_penalty=1.3, repeat_last_n=64, logit_bias=((13, -5.0),))
        fast_chain = make_chain(s, 0, tokens, vocab, n_ctx, grammar_sampler(vocab.ptr, gbnf, None))
        full_chain = make_chain(s, 0, tokens, vocab, n_ctx, grammar_sampler(vocab.ptr, gbnf, None))
        fast, full = CheckedDraw(vocab.n_tokens, greedy=True), CheckedDraw(vocab.n_tokens)
        out = []
        for _ in range(40):
            a, b = fast(fast_chain, llm.ctx, -1), full(full_chain, llm.ctx, -1)
            assert a == b, (out, a, b)
            out.append(a)
            if vocab.is_eog(a):
                break
            llm.eval([a])
        text = "".join(vocab.text(t, special=False) for t in out if not vocab.is_eog(t))
        # most draws took the shortcut (the first "{" and the end token may rank below the best 64)
        assert fast.shortcuts >= len(out) // 2 and full.shortcuts == 0, (fast.shortcuts, len(out))
        assert text.lstrip().startswith("{")
        llama_cpp.llama_sampler_free(fast_chain)
        llama_cpp.llama_sampler_free(full_chain)
    finally:
        llm.close()

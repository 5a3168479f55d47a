"""The generic path: llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``).

It has no /props, /tokenize or ``timings``: the connection test says so, the reply still equals the
server's own answer, the token count is the server's (per-token logprobs or ``usage``, never chunks),
and what it does not report is listed as such.
"""

from __future__ import annotations

import time

import openai
import pytest

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.remote import RemoteEndpoint, ServerKind
from app.core.sampling.params import SamplerSettings
from app.remote.probe import probe
from tests.remote.support import GREEDY, chat, connect, openai_messages, request

QUESTION = "What is the capital of France? Answer in one sentence."


def test_the_connection_test_says_what_a_generic_server_does_not_report(llama_cpp_python_server) -> None:
    facts = probe(RemoteEndpoint(llama_cpp_python_server.base_url))
    assert facts.kind is ServerKind.OPENAI_COMPATIBLE
    assert facts.models == ("smollm2",) and facts.model == "smollm2"
    assert facts.n_ctx == 0 and not facts.can_tokenize and facts.chat_template is None


def test_a_greedy_reply_equals_the_servers_own_and_counts_come_from_the_server(llama_cpp_python_server) -> None:
    ep = RemoteEndpoint(llama_cpp_python_server.base_url)
    host, loaded = connect(ep)
    try:
        assert loaded.remote is not None and loaded.n_ctx == 0
        out = request(host, chat(QUESTION))
    finally:
        host.stop()
    fin = out.terminal
    assert isinstance(fin, P.Finished), fin
    client = openai.OpenAI(base_url=llama_cpp_python_server.base_url, api_key="none")
    direct = client.chat.completions.create(
        model="smollm2", messages=openai_messages(QUESTION), temperature=0, max_tokens=GREEDY.max_tokens, seed=42,
        extra_body={"repeat_penalty": 1.0, "top_k": GREEDY.top_k, "min_p": GREEDY.min_p},
    )  # fmt: skip
    assert fin.text == direct.choices[0].message.content
    assert fin.text.strip()
    s = fin.stats
    assert s.generated_tokens == direct.usage.completion_tokens
    assert len(out.tokens) == s.generated_tokens  # one TokenEvent per token (its logprobs entry), not per chunk
    assert "".join(t.text for t in out.tokens) == fin.text
    assert s.decode_s > 0 and s.ttft_s > 0 and s.decode_tok_s > 0
    for name in ("prefill_s", "evaluated_tokens", "n_ctx", "kv_used_bytes", "llama_prefill_ms"):
        assert not s.reported(name), name
    assert s.stop_reason in (StopReason.EOS, StopReason.MAX_TOKENS)
    assert out.prompt.prompt_tokens == 0 and out.prompt.prompt_text == ""  # no /tokenize: not shown


@pytest.mark.timing
def test_stop_works_on_a_generic_server(llama_cpp_python_server) -> None:
    host, _loaded = connect(RemoteEndpoint(llama_cpp_python_server.base_url))
    long = SamplerSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=900, seed=1)  # within GENERIC_N_CTX
    try:
        out = request(host, chat("Count from 1 to 500, one number per line.", sampler=long), cancel_after_tokens=8)
    finally:
        host.stop()
    fin = out.terminal
    t_cancel = next(e[1] for e in out.events if isinstance(e, tuple))
    assert isinstance(fin, P.Finished), fin
    assert time.monotonic() - t_cancel < 1.0
    assert fin.stats.stop_reason is StopReason.CANCELLED
    assert fin.text == "".join(t.text for t in out.tokens)

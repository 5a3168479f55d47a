"""A real llama-server (built from llama-cpp-python's llama.cpp) as the engine, without the window.

The connection test's facts and failures, greedy replies equal to the server's own answer, figures
from the server's ``timings``, tokenization through ``/tokenize``, alternatives from ``logprobs``, Stop.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time

import openai
import pytest

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.remote import ConnectionFailure, RemoteEndpoint, ServerKind, api_base
from app.core.sampling.params import SamplerSettings
from app.remote.http import RemoteError
from app.remote.probe import probe
from tests.remote.support import GREEDY, chat, connect, openai_messages, request
from tests.support.servers import API_KEY, SERVER_N_CTX, free_port

QUESTION = "What is the capital of France? Answer in one sentence."


def endpoint(server, key: str = API_KEY, model: str = "") -> RemoteEndpoint:
    return RemoteEndpoint(server.base_url, key, model)


def test_the_connection_test_reads_what_llama_server_reports(llama_server, smollm2) -> None:
    facts = probe(endpoint(llama_server))
    assert facts.kind is ServerKind.LLAMA_SERVER
    assert facts.n_ctx == SERVER_N_CTX  # /props: the slot's n_ctx, as started with --ctx-size
    assert facts.can_tokenize
    assert facts.models and facts.model == facts.models[0]
    assert facts.model_path == str(smollm2)
    assert facts.chat_template is not None and "<|im_start|>" in facts.chat_template  # SmolLM2's ChatML
    assert facts.base_url == llama_server.base_url


@pytest.mark.parametrize(
    ("what", "kind", "words"),
    [
        ("wrong key", ConnectionFailure.UNAUTHORIZED, "refused the API key"),
        ("no key", ConnectionFailure.UNAUTHORIZED, "refused the API key"),
        ("wrong path", ConnectionFailure.WRONG_PATH, "/v1"),
        ("https to plain http", ConnectionFailure.TLS, "http://"),
        ("nothing listening", ConnectionFailure.UNREACHABLE, "Nothing answers"),
        ("model not served", ConnectionFailure.NO_MODEL, "does not serve"),
    ],
)
def test_each_connection_failure_gets_its_own_message(llama_server, what, kind, words) -> None:
    base = llama_server.base_url
    ep = {
        "wrong key": RemoteEndpoint(base, "not-the-key"),
        "no key": RemoteEndpoint(base, ""),
        "wrong path": RemoteEndpoint(api_base(f"127.0.0.1:{llama_server.port}/api/openai"), API_KEY),
        "https to plain http": RemoteEndpoint(base.replace("http://", "https://"), API_KEY),
        "nothing listening": RemoteEndpoint(f"http://127.0.0.1:{free_port()}/v1", API_KEY),
        "model not served": RemoteEndpoint(base, API_KEY, "llama-70b"),
    }[what]
    with pytest.raises(RemoteError) as err:
        probe(ep)
    assert err.value.kind is kind
    assert words in err.value.message
    assert API_KEY not in err.value.message


def test_a_server_that_is_not_openai_compatible_is_named(tmp_path) -> None:
    """A real web server (Python's http.server) with a page where the model list should be."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "models").write_text("<html><body>Welcome to my router</body></html>")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                probe(RemoteEndpoint(f"http://127.0.0.1:{port}/v1"))
            except RemoteError as exc:
                if exc.kind is ConnectionFailure.UNREACHABLE and time.monotonic() < deadline:
                    time.sleep(0.1)  # still starting
                    continue
                assert exc.kind is ConnectionFailure.NOT_OPENAI
                assert "not an OpenAI-compatible API" in exc.message
                break
            pytest.fail("a plain web page passed the connection test")
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_greedy_reply_equals_the_servers_own_with_figures_from_its_timings(llama_server) -> None:
    host, loaded = connect(endpoint(llama_server))
    try:
        assert loaded.remote is not None and loaded.n_ctx == SERVER_N_CTX
        out = request(host, chat(QUESTION, top_candidates=5))
    finally:
        host.stop()
    fin = out.terminal
    assert isinstance(fin, P.Finished), fin
    client = openai.OpenAI(base_url=llama_server.base_url, api_key=API_KEY)
    direct = client.chat.completions.create(
        model=loaded.remote.model, messages=openai_messages(QUESTION), temperature=0, max_tokens=GREEDY.max_tokens,
        seed=42, extra_body={"repeat_penalty": 1.0},
    )  # fmt: skip
    assert fin.text == direct.choices[0].message.content
    assert fin.text.strip()
    s = fin.stats
    # Token counts are the server's, not chunk counts: they equal its own usage for the same reply. As the
    # local engine's, they include the end-of-turn token, which is sampled but never streamed as text.
    assert s.generated_tokens == direct.usage.completion_tokens
    assert len(out.tokens) == s.generated_tokens - (1 if s.stop_reason is StopReason.EOS else 0)
    assert s.prompt_tokens == direct.usage.prompt_tokens
    assert s.llama_n_decode == s.generated_tokens
    assert s.evaluated_tokens + s.cached_tokens == s.prompt_tokens
    assert s.evaluated_tokens == s.llama_n_prefill and s.prefill_s == pytest.approx(s.llama_prefill_ms / 1000)
    assert s.prefill_s > 0 and s.decode_s > 0 and s.decode_tok_s > 0
    assert s.decode_s == pytest.approx(s.llama_decode_ms / 1000)
    assert s.ttft_s > 0 and s.n_ctx == SERVER_N_CTX
    assert s.reported("prefill_s") and s.reported("cached_tokens") and not s.reported("kv_used_bytes")
    assert s.stop_reason in (StopReason.EOS, StopReason.MAX_TOKENS)
    # The prompt's tokens come from /apply-template + /tokenize: the same count the server evaluated.
    assert out.prompt.prompt_tokens == s.prompt_tokens
    assert len(out.prompt.new_tokens) == s.prompt_tokens
    assert "<|im_start|>user" in out.prompt.prompt_text and QUESTION in out.prompt.prompt_text
    # Per-token alternatives from top_logprobs: greedy picks the top one; p is the server's probability.
    assert [t.piece for t in out.tokens if t.piece] and "".join(t.text for t in out.tokens) == fin.text
    for tok in out.tokens:
        assert tok.token_id >= 0 and tok.candidates and len(tok.candidates) <= 5
        top_id, _top_text, top_logprob = tok.candidates[0]
        assert top_id == tok.token_id
        assert tok.logsumexp == 0.0 and tok.p == pytest.approx(math.exp(top_logprob), rel=1e-4)
        assert sum(math.exp(c[2]) for c in tok.candidates) <= 1.0 + 1e-4
    times = [t.t_s for t in out.tokens]
    assert times == sorted(times) and times[0] == pytest.approx(s.ttft_s, abs=0.05)


def test_a_follow_up_turn_reuses_the_servers_kv_cache(llama_server) -> None:
    host, _loaded = connect(endpoint(llama_server))
    question = "Name three colours of the rainbow, please."  # not asked elsewhere in this module
    try:
        first = request(host, chat(question, request_id=2)).terminal
        assert isinstance(first, P.Finished)
        again = request(host, chat(question, request_id=3)).terminal
    finally:
        host.stop()
    assert isinstance(again, P.Finished)
    assert again.text == first.text
    assert again.stats.cached_tokens > 0  # the same prompt: llama-server's slot kept it (timings.cache_n)
    assert again.stats.evaluated_tokens < first.stats.evaluated_tokens


@pytest.mark.timing
def test_stop_cuts_the_stream_and_the_reply_ends_cancelled_within_a_second(llama_server) -> None:
    host, _loaded = connect(endpoint(llama_server))
    long = SamplerSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=1500, seed=1)
    try:
        out = request(host, chat("Count from 1 to 500, one number per line.", sampler=long), cancel_after_tokens=8)
        fin = out.terminal
        t_cancel = next(e[1] for e in out.events if isinstance(e, tuple))
        assert isinstance(fin, P.Finished), fin
        assert time.monotonic() - t_cancel < 1.0
        assert fin.stats.stop_reason is StopReason.CANCELLED
        assert 8 <= fin.stats.generated_tokens < 1500
        assert fin.text and fin.text == "".join(t.text for t in out.tokens)
        # The server is free again: the next reply runs to its end.
        after = request(host, chat(QUESTION, request_id=9)).terminal
    finally:
        host.stop()
    assert isinstance(after, P.Finished) and after.stats.stop_reason is not StopReason.CANCELLED


def test_a_request_while_the_server_is_gone_fails_with_the_reason(llama_server_bin, smollm2, tmp_path) -> None:
    """The server stops between the connection test and a reply: the reply fails, saying nothing answers."""
    port = free_port()
    proc = subprocess.Popen(
        [str(llama_server_bin), "-m", str(smollm2), "--host", "127.0.0.1", "--port", str(port), "-c", "512",
         "-t", "1", "-np", "1", "--no-webui"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        ep = RemoteEndpoint(f"http://127.0.0.1:{port}/v1")
        deadline = time.monotonic() + 60
        while True:
            try:
                probe(ep)
                break
            except RemoteError:
                assert time.monotonic() < deadline, "llama-server did not start"
                time.sleep(0.2)
        host, _loaded = connect(ep)
    finally:
        proc.terminate()
        proc.wait(10)
    try:
        out = request(host, chat(QUESTION))
    finally:
        host.stop()
    assert isinstance(out.terminal, P.Failed)
    assert out.terminal.kind is P.FailureKind.REMOTE
    assert "Nothing answers" in out.terminal.message

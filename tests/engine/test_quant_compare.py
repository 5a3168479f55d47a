"""Comparing two quantizations token by token (CompareModels) in a real engine process with no chat model loaded,
on the real SmolLM2 (and Gemma 3 for a refused pair); the chunking and the figures held against llama.cpp's own
llama-perplexity."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from app.core import protocol as P
from app.core.chat.context import ChatMessage
from app.engine.host import EngineHost
from tests.support.perplexity_tool import read_base, write_base

ROOT = Path(__file__).resolve().parents[2]
LICENSE = (ROOT / "LICENSE").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def host():
    """A bare engine process (no model loaded), as the comparison window starts one."""
    h = EngineHost()
    h.start()
    assert isinstance(h.recv(60), P.EngineReady)
    yield h
    h.stop()


def compare(host: EngineHost, a: Path, b: Path, text: str | None = None, messages=None, **kw):
    """Send CompareModels; returns (terminal event, ComparisonStarted or None, the ComparisonProgressed events)."""
    host.clear_cancel()
    seen: list[object] = []
    req = P.CompareModels(host.next_id(), str(a), str(b), text, messages, kw.pop("chat_template", None), **kw)
    end = host.request(req, timeout=120, on_event=seen.append)
    started = [e for e in seen if isinstance(e, P.ComparisonStarted)]
    progress = [e for e in seen if isinstance(e, P.ComparisonProgressed)]
    return end, (started[0] if started else None), progress


def test_a_file_against_itself_diverges_nowhere(host, smollm2) -> None:
    end, started, progress = compare(host, smollm2, smollm2, LICENSE[:600], n_ctx=32, n_batch=32, n_threads=1)
    assert isinstance(end, P.ComparisonFinished), getattr(end, "message", end)
    scored = [t for ev in progress for t in ev.tokens]
    s = end.summary
    assert started is not None and started.total == s.n_scored == len(scored) == progress[-1].done
    assert len(progress) == started.n_chunks == s.n_chunks >= 2
    assert max(t.kl for t in scored) < 1e-6 and s.kl_mean < 1e-6
    assert all(t.same_top1 for t in scored) and s.same_top1 == 1.0
    assert all(t.p_a == t.p_b and t.top_a == t.top_b for t in scored)
    assert s.ppl_ratio == pytest.approx(1.0) and s.rms_dp == 0.0
    assert s.a.ppl == s.b.ppl > 1
    # each scored token is the one at its index, its top 5 ranked, its text the strip's
    for t in scored:
        assert started.token_ids[t.index] == t.token_id and started.token_texts[t.index] == t.text
        assert [c.p for c in t.top_a] == sorted((c.p for c in t.top_a), reverse=True) and len(t.top_a) == 5
    # the figures measured in the run
    assert s.a.file_bytes == smollm2.stat().st_size and 0 < s.a.weights_bytes <= s.a.file_bytes
    assert s.a.prefill_tok_s > 0 and s.a.decode_tok_s > 0


def test_scored_positions_and_log_probs_are_llama_perplexity_s(host, smollm2, tmp_path) -> None:
    """llama-perplexity --kl-divergence-base on the same text: the same tokens cut into the same chunks, and at each
    scored position the same log-probability of the next token (within the base file's 16-bit rounding)."""
    text = LICENSE[:800]
    (tmp_path / "text.txt").write_text(text, encoding="utf-8")
    write_base(smollm2, tmp_path / "text.txt", tmp_path / "base.bin", n_ctx=32, threads=1)
    base = read_base(tmp_path / "base.bin")
    end, started, progress = compare(host, smollm2, smollm2, text, n_ctx=32, n_batch=32, n_threads=1, decode_tokens=0)
    assert isinstance(end, P.ComparisonFinished), getattr(end, "message", end)
    assert started is not None
    assert started.n_chunks == base.n_chunk >= 4
    assert started.token_ids[: base.n_ctx * base.n_chunk] == base.tokens
    assert started.scored == tuple((c * 32 + 17, c * 32 + 32) for c in range(base.n_chunk))
    scored = [t for ev in progress for t in ev.tokens]
    assert [t.index for t in scored] == [i for lo, hi in started.scored for i in range(lo, hi)]
    assert len(scored) == len(base.scored_logp)
    for t, logp in zip(scored, base.scored_logp, strict=True):
        if logp > -15:  # the base file clips log-probabilities 16 below each row's top
            assert math.log(t.p_a) == pytest.approx(logp, abs=2e-3), t


def test_smollm2_against_gemma_is_refused_naming_the_check(host, smollm2, gemma) -> None:
    end, started, _ = compare(host, smollm2, gemma, LICENSE[:600], n_ctx=32)
    assert isinstance(end, P.Failed) and end.kind is P.FailureKind.INCOMPATIBLE
    assert f"different tokenizers: {smollm2.name} uses byte-level BPE, {gemma.name} uses SentencePiece" in end.message
    assert started is None


def test_cancel_stops_between_chunks(host, smollm2) -> None:
    seen: list[P.ComparisonProgressed] = []

    def on_event(ev) -> None:
        if isinstance(ev, P.ComparisonProgressed):
            seen.append(ev)
            host.cancel()

    host.clear_cancel()
    req = P.CompareModels(host.next_id(), str(smollm2), str(smollm2), LICENSE, None, None, n_ctx=64, n_threads=1)
    end = host.request(req, timeout=120, on_event=on_event)
    assert isinstance(end, P.Failed) and end.kind is P.FailureKind.CANCELLED, end
    total = seen[0].total
    assert 1 <= len(seen) <= 3 and seen[-1].done < total  # ~39 chunks; at most a chunk or two in flight
    assert f"after {seen[-1].done:,} of {total:,} scored tokens" in end.message
    host.clear_cancel()


def test_a_chat_is_rendered_with_model_a_s_template_or_the_override(host, smollm2) -> None:
    chat = (ChatMessage("user", "What is the capital of France?"), ChatMessage("assistant", "Paris."))
    end, started, _ = compare(host, smollm2, smollm2, None, chat, n_ctx=512, n_threads=1, decode_tokens=0)
    assert isinstance(end, P.ComparisonFinished), getattr(end, "message", end)
    assert started is not None and started.n_chunks == 1 and started.n_ctx == len(started.token_ids) < 512
    s = end.summary  # the shorter chunk is said in the result: the n_ctx asked and the one run
    assert s.n_ctx_asked == 512 and s.n_ctx == started.n_ctx and s.shrunk
    assert "".join(started.token_texts).startswith("<|im_start|>system")  # SmolLM2's template adds its system prompt
    override = "{% for m in messages %}[{{ m.content }}]{% endfor %}"
    end, started, _ = compare(
        host, smollm2, smollm2, None, chat, n_ctx=512, n_threads=1, decode_tokens=0, chat_template=override
    )
    assert isinstance(end, P.ComparisonFinished)
    assert started is not None and "".join(started.token_texts) == "[What is the capital of France?][Paris.]"


def test_text_and_chat_together_are_refused(host, smollm2) -> None:
    end, _, _ = compare(host, smollm2, smollm2, "text", (ChatMessage("user", "hi"),))
    assert isinstance(end, P.Failed) and end.kind is P.FailureKind.BAD_SETTINGS
    end, _, _ = compare(host, smollm2, smollm2, "Hi", None)
    assert isinstance(end, P.Failed) and end.kind is P.FailureKind.BAD_SETTINGS
    assert "The passage is 1 token: too short to compare" in end.message  # SmolLM2 adds no BOS


def test_a_passage_shorter_than_n_ctx_is_refused_with_both_numbers(host, smollm2) -> None:
    """Not shrunk into one chunk of its own length (it was: "1 chunk of n_ctx 744" for n_ctx 32768)."""
    end, started, _ = compare(host, smollm2, smollm2, LICENSE[:600], n_ctx=4096, n_threads=1, decode_tokens=0)
    assert isinstance(end, P.Failed) and end.kind is P.FailureKind.BAD_SETTINGS, end
    assert started is None
    assert "fewer than n_ctx 4,096" in end.message and "2 × n_ctx, 8,192" in end.message
    n = int(end.message.split("The passage is ")[1].split(" tokens")[0])
    assert 100 < n < 4096 and f"Set n_ctx to {n:,} or less ({n // 2:,} gives two chunks" in end.message


def test_q2_k_diverges_from_q4_1_more_than_q8_0_does(host, smollm2, smollm2_q8_0, smollm2_q2_k) -> None:
    """The requantizations of the Q4_1 test model: Q2_K (most of it Q4_0 fallbacks) moves its distributions
    further from Q4_1's than Q8_0 does."""
    runs = {}
    for name, b in (("q8_0", smollm2_q8_0), ("q2_k", smollm2_q2_k)):
        end, _, _ = compare(host, smollm2, b, LICENSE[:600], n_ctx=32, n_threads=1, decode_tokens=0)
        assert isinstance(end, P.ComparisonFinished), getattr(end, "message", end)
        runs[name] = end.summary
    q8, q2 = runs["q8_0"], runs["q2_k"]
    assert 0 < q8.kl_mean < q2.kl_mean
    assert q2.same_top1 <= q8.same_top1
    assert q8.b.weights_bytes > q8.a.weights_bytes > q2.b.weights_bytes


def test_n_batch_below_n_ctx_scores_the_same_positions_slice_by_slice(host, smollm2) -> None:
    text = LICENSE[:600]
    whole, started, _ = compare(host, smollm2, smollm2, text, n_ctx=32, n_batch=32, n_threads=1, decode_tokens=0)
    sliced, _, progress = compare(host, smollm2, smollm2, text, n_ctx=32, n_batch=8, n_threads=1, decode_tokens=0)
    assert isinstance(whole, P.ComparisonFinished) and isinstance(sliced, P.ComparisonFinished)
    assert started is not None
    # positions 16..30 of each chunk have their logits read: slices (16, 24) and (24, 32) score, the first two not
    assert len(progress) == 2 * started.n_chunks
    assert [t.index for ev in progress for t in ev.tokens] == [i for lo, hi in started.scored for i in range(lo, hi)]
    assert sliced.summary.kl_max < 1e-6 and sliced.summary.n_scored == whole.summary.n_scored
    assert sliced.summary.a.ppl == pytest.approx(
        whole.summary.a.ppl, rel=1e-3
    )  # llama.cpp's batching moves it a little

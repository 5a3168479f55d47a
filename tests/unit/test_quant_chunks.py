"""llama-perplexity's chunking (app/core/quant/chunks.py), by perplexity.cpp's arithmetic worked out by hand:
n_chunk = n_tokens / n_ctx, first = n_ctx / 2, tokens first + 1 .. n_ctx - 1 of each chunk scored."""

from __future__ import annotations

import pytest

from app.core.quant.chunks import Chunk, batches, plan_chunks


def test_whole_chunks_of_n_ctx_the_tail_unused() -> None:
    chunks = plan_chunks(1300, 512)  # 1300 // 512 = 2 chunks; tokens 1024..1299 unused
    assert chunks == (Chunk(0, 512), Chunk(512, 512))
    assert [c.scored for c in chunks] == [(257, 512), (769, 1024)]
    assert [c.n_scored for c in chunks] == [255, 255]  # n_ctx - 1 - n_ctx / 2
    assert chunks[0].first == 256


def test_odd_n_ctx() -> None:
    (c,) = plan_chunks(7, 7)
    assert c.first == 3 and c.scored == (4, 7) and c.n_scored == 3


def test_a_text_shorter_than_n_ctx_is_one_chunk_of_its_length() -> None:
    assert plan_chunks(100, 512) == (Chunk(0, 100),)
    assert plan_chunks(100, 512)[0].scored == (51, 100)
    assert plan_chunks(3, 512)[0].n_scored == 1
    assert plan_chunks(2, 512) == ()


def test_n_ctx_too_small() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        plan_chunks(100, 2)


def test_batches_cut_a_chunk_every_n_batch_positions() -> None:
    assert batches(Chunk(512, 512), 512) == ((0, 512),)
    assert batches(Chunk(0, 512), 200) == ((0, 200), (200, 400), (400, 512))
    assert batches(Chunk(0, 100), 512) == ((0, 100),)


def test_a_passage_shorter_than_n_ctx_is_refused_with_the_numbers_and_what_to_do() -> None:
    from app.core.quant.chunks import plural, short_passage

    assert short_passage(744, 128) == "" and short_passage(128, 128) == ""
    said = short_passage(744, 32768)
    assert said.startswith("The passage is 744 tokens, fewer than n_ctx 32,768")
    assert "2 × n_ctx, 65,536" in said and "Set n_ctx to 744 or less (372 gives two chunks" in said
    assert "longer text" in said
    assert short_passage(1, 64) == "The passage is 1 token: too short to compare. Paste a longer text."
    assert (plural(1, "token"), plural(0, "chunk"), plural(1024, "token")) == ("1 token", "0 chunks", "1,024 tokens")

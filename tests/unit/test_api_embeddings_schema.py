"""``/v1/embeddings``' request checks (:mod:`app.server.embeddings`) and how inputs are grouped into
``llama_decode`` calls (:func:`app.engine.embeddings.batches`)."""

from __future__ import annotations

import pytest

from app.engine.embeddings import batches, max_input_tokens
from app.server.embeddings import MAX_INPUTS, EncodingFormat, parse_embeddings
from app.server.errors import ApiError


def test_every_input_shape_openai_takes():
    assert parse_embeddings({"input": "hi"}, 8).inputs == ("hi",)
    assert parse_embeddings({"input": ["a", "b"]}, 8).inputs == ("a", "b")
    assert parse_embeddings({"input": [1, 2, 3]}, 8).inputs == ((1, 2, 3),)
    assert parse_embeddings({"input": [[1, 2], [3]]}, 8).inputs == ((1, 2), (3,))
    req = parse_embeddings({"input": "hi", "encoding_format": "base64", "dimensions": 8, "user": "u"}, 8)
    assert req.encoding_format is EncodingFormat.BASE64
    assert parse_embeddings({"input": "x", "encoding_format": None}, 8).encoding_format is EncodingFormat.FLOAT


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({}, "input", "required"),
        ({"input": ""}, "input", "empty"),
        ({"input": []}, "input", "empty list"),
        ({"input": [[]]}, "input", "input[0] is empty"),
        ({"input": ["a", 3]}, "input", "token-id lists"),
        ({"input": [True, 2]}, "input", "token-id lists"),
        ({"input": ["a"] * (MAX_INPUTS + 1)}, "input", f"at most {MAX_INPUTS}"),
        ({"input": "a", "encoding_format": "int8"}, "encoding_format", "'float' or 'base64'"),
        ({"input": "a", "dimensions": 4}, "dimensions", "8-dimensional"),
        ({"input": "a", "dimensions": True}, "dimensions", "not supported"),
        ({"input": "a", "model": 3}, "model", "string"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(body, param, words):
    with pytest.raises(ApiError) as bad:
        parse_embeddings(body, 8)
    assert bad.value.status == 400 and bad.value.param == param and words in bad.value.message


def test_inputs_are_grouped_in_order_within_the_budget_a_long_one_alone():
    assert batches([3, 3, 3], 6) == [[0, 1], [2]]
    assert batches([2, 10, 2, 2], 6) == [[0], [1], [2, 3]]
    assert batches([1] * 5, 100, max_seqs=2) == [[0, 1], [2, 3], [4]]


def test_an_input_is_at_most_n_ctx_or_what_its_logits_allow():
    assert max_input_tokens(2048, 49152) == 2048  # SmolLM2: n_ctx
    assert max_input_tokens(32768, 262144) == 2048  # Gemma 3: 2 GiB of logits
    assert max_input_tokens(8192, 10**7) == 512  # never under one batch

"""``POST /v1/embeddings``: OpenAI's request checked, the engine's answer written as OpenAI's response.

Read: ``input`` (a string, a list of strings, a list of token ids, or a list of token-id lists;
at most :data:`MAX_INPUTS` inputs, none empty), ``encoding_format`` (``float``, the default, or
``base64``: each vector's float32 values, little-endian, base64-encoded, as OpenAI sends them and
the ``openai`` package asks for by default), ``dimensions`` (accepted only when it is the model's
own size: the vectors cannot be shortened), ``model`` (echoed as the loaded model's name) and
``user`` (ignored).

The vectors are the loaded model's, pooled by its pooling type (mean when the model declares none:
a chat model) and L2-normalized (:mod:`app.engine.embeddings`); ``usage`` counts the tokens
evaluated (BOS and EOS included). Glassbox adds ``glassbox``: the pooling, whether the model
declared it, ``n_embd`` and the engine's milliseconds.
"""

from __future__ import annotations

import base64
import enum
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core import protocol as P
from app.server.errors import bad_request

MAX_INPUTS = 2048  # OpenAI's limit on inputs per request


class EncodingFormat(str, enum.Enum):
    """How the vectors are written in the response."""

    FLOAT = "float"  # a JSON list of numbers
    BASE64 = "base64"  # float32 little-endian bytes, base64


@dataclass(frozen=True)
class EmbeddingRequest:
    """One checked ``/v1/embeddings`` request.

    Attributes:
        inputs: texts or token-id tuples, in order.
        encoding_format: how the vectors are written.
        model: the ``model`` the client named.
    """

    inputs: tuple[str | tuple[int, ...], ...]
    encoding_format: EncodingFormat
    model: str

    @property
    def summary(self) -> str:
        """The inputs for the Server panel's log: each text, or ``⟨N token ids⟩``, one per line."""
        return "\n".join(x if isinstance(x, str) else f"⟨{len(x)} token ids⟩" for x in self.inputs)


def _is_ids(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in v)


def _inputs(raw: object) -> tuple[str | tuple[int, ...], ...]:
    """``input`` as a tuple of texts and token-id tuples.

    Raises:
        ApiError: 400 (param ``input``): a wrong type, no input, an empty one, too many.
    """
    items: list[str | tuple[int, ...]]
    if isinstance(raw, str):
        items = [raw]
    elif isinstance(raw, list) and raw and _is_ids(raw):
        items = [tuple(raw)]
    elif isinstance(raw, list) and all(isinstance(x, str) or _is_ids(x) for x in raw):
        items = [x if isinstance(x, str) else tuple(x) for x in raw]
    else:
        raise bad_request(
            "'input' must be a string, a list of strings, a list of token ids, or a list of token-id lists.", "input"
        )
    if not items:
        raise bad_request("'input' is an empty list: send at least one text to embed.", "input")
    if len(items) > MAX_INPUTS:
        raise bad_request(f"'input' has {len(items)} items; at most {MAX_INPUTS} per request.", "input")
    for i, x in enumerate(items):
        if not x:
            raise bad_request(f"input[{i}] is empty: there is nothing to embed.", "input")
    return tuple(items)


def parse_embeddings(body: object, n_embd: int) -> EmbeddingRequest:
    """Check a ``/v1/embeddings`` body.

    Args:
        body: the decoded JSON.
        n_embd: the loaded model's vector size (``dimensions`` must equal it; 0: unknown, any refused).

    Raises:
        ApiError: 400 naming the field at fault.
    """
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    if "input" not in body:
        raise bad_request("'input' is required: the text (or texts) to embed.", "input")
    inputs = _inputs(body["input"])
    model = body.get("model", "")
    if not isinstance(model, str):
        raise bad_request("'model' must be a string.", "model")
    fmt = body.get("encoding_format") or EncodingFormat.FLOAT.value
    try:
        encoding = EncodingFormat(fmt)
    except ValueError:
        raise bad_request(f"'encoding_format' must be 'float' or 'base64', not {fmt!r}.", "encoding_format") from None
    dims = body.get("dimensions")
    if dims is not None and (isinstance(dims, bool) or dims != n_embd):
        raise bad_request(
            f"'dimensions' = {dims!r} is not supported: the loaded model gives {n_embd}-dimensional vectors and "
            "Glassbox does not shorten them. Leave 'dimensions' out (or send the model's own size).",
            "dimensions",
        )
    return EmbeddingRequest(inputs, encoding, model)


def embeddings_body(ev: P.Embedded, req: EmbeddingRequest, model_id: str) -> dict[str, Any]:
    """OpenAI's response for the engine's :class:`~app.core.protocol.Embedded`."""
    vectors = np.frombuffer(ev.vectors, dtype="<f4").reshape(len(ev.token_counts), ev.n_embd)
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": base64.b64encode(v.tobytes()).decode("ascii")
            if req.encoding_format is EncodingFormat.BASE64
            else v.tolist(),
        }
        for i, v in enumerate(vectors)
    ]
    tokens = sum(ev.token_counts)
    return {
        "object": "list",
        "data": data,
        "model": model_id,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "glassbox": {
            "pooling": ev.pooling.value,
            "pooling_from_model": ev.model_pooling,
            "n_embd": ev.n_embd,
            "engine_ms": ev.elapsed_s * 1000,
        },
    }

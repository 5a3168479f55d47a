"""The vocabulary check of app/engine/compat.py (llama.cpp's common_speculative_are_compatible) on vocab-only
loads: real SmolLM2 and Gemma 3, and tiny GGUFs that differ in one way each."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core import protocol as P
from app.core.quant.compatibility import CompatCheck
from app.engine.compat import check_files
from app.engine.errors import EngineError
from tests.support.models import write_tiny_model

MERGES = {"tokenizer.ggml.merges": ["t 0"]}  # llama.cpp's BPE vocabulary wants merges


def tiny(path: Path, n_vocab: int = 80, **extra) -> str:
    return str(write_tiny_model(path, n_vocab=n_vocab, extra={**MERGES, **extra}))


def test_a_file_is_compatible_with_itself(smollm2) -> None:
    assert check_files(str(smollm2), str(smollm2)) is None


def test_smollm2_against_gemma_is_refused_naming_the_tokenizers(smollm2, gemma) -> None:
    found = check_files(str(smollm2), str(gemma))
    assert found is not None
    assert found.check is CompatCheck.VOCAB_TYPE
    assert found.message == (
        f"different tokenizers: {smollm2.name} uses byte-level BPE, {gemma.name} uses SentencePiece (SPM)"
    )


def test_a_token_with_another_text_is_named(tmp_path) -> None:
    tokens = [f"t{i}" for i in range(80)]
    tokens[12] = "foo"
    found = check_files(tiny(tmp_path / "a.gguf"), tiny(tmp_path / "b.gguf", **{"tokenizer.ggml.tokens": tokens}))
    assert found is not None and found.check is CompatCheck.TOKEN_TEXT
    assert found.message == "different vocabulary: token 12 is 't12' in a.gguf and 'foo' in b.gguf"


def test_tokens_below_5_are_not_compared(tmp_path) -> None:
    tokens = [f"t{i}" for i in range(80)]
    tokens[4] = "other"  # llama.cpp compares from id 5 (control tokens differ between fine-tunes)
    assert (
        check_files(tiny(tmp_path / "a.gguf"), tiny(tmp_path / "b.gguf", **{"tokenizer.ggml.tokens": tokens})) is None
    )


def test_vocabulary_sizes_more_than_128_apart(tmp_path) -> None:
    a, near, far = tiny(tmp_path / "a.gguf"), tiny(tmp_path / "near.gguf", 208), tiny(tmp_path / "far.gguf", 209)
    assert check_files(a, near) is None  # 128 more tokens, the first 80 the same: llama.cpp accepts it
    found = check_files(a, far)
    assert found is not None and found.check is CompatCheck.VOCAB_SIZE
    assert "80 tokens in a.gguf, 209 in far.gguf" in found.message


def test_bos_added_by_one_only_or_another_bos(tmp_path) -> None:
    adds = tiny(tmp_path / "adds.gguf", **{"tokenizer.ggml.add_bos_token": True})
    plain = tiny(tmp_path / "plain.gguf", **{"tokenizer.ggml.add_bos_token": False})
    other = tiny(tmp_path / "other.gguf", **{"tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.bos_token_id": 3})
    found = check_files(adds, plain)
    assert found is not None and found.check is CompatCheck.BOS
    assert found.message == "different BOS: adds.gguf adds BOS, plain.gguf does not add BOS"
    found = check_files(adds, other)
    assert found is not None and found.check is CompatCheck.BOS
    assert found.message == "different BOS: token 1 in adds.gguf, token 3 in other.gguf"


def test_a_file_that_is_not_a_gguf_is_named(tmp_path, smollm2) -> None:
    bad = tmp_path / "notes.gguf"
    bad.write_text("not a model")
    with pytest.raises(EngineError) as err:
        check_files(str(smollm2), str(bad))
    assert err.value.kind is P.FailureKind.BAD_MODEL
    assert "notes.gguf" in err.value.message

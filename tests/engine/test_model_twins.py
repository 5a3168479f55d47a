"""The real test models' GGUF headers: read as the llama.cpp project's GGUFReader reads them, and
the same as their header twins say (tests/support/model_twins.py), on which tests/unit runs
with no model file."""

from __future__ import annotations

import gguf
import pytest

from app.core.gguf.gguf_info import read_gguf_info
from tests.support.model_twins import write_gemma_twin, write_smollm2_twin

TWINS = {"smollm2": write_smollm2_twin, "gemma": write_gemma_twin}


@pytest.mark.parametrize(
    "which",
    ["smollm2", pytest.param("gemma", marks=pytest.mark.timeout(120))],  # GGUFReader: 20-36 s on Gemma here
)
def test_fields_and_tensors_match_gguf_reader(which, request):
    path = request.getfixturevalue(which)
    ours = read_gguf_info(path)
    ref = gguf.GGUFReader(path)
    # Every scalar and short-array field, and the length of every long array.
    for key, field in ref.fields.items():
        if key.startswith("GGUF."):
            continue
        if field.types and field.types[0] == gguf.GGUFValueType.ARRAY:
            n = len(field.data)
            if n > 64:
                assert ours.array_lengths[key] == n, key
            else:
                assert ours.metadata[key] == field.contents(), key
        else:
            assert (
                ours.metadata[key] == pytest.approx(field.contents())
                if isinstance(field.contents(), float)
                else ours.metadata[key] == field.contents()
            ), key
    assert len(ours.tensors) == len(ref.tensors)
    for t_ours, t_ref in zip(ours.tensors, ref.tensors, strict=True):
        assert t_ours.name == t_ref.name
        assert t_ours.shape == tuple(int(x) for x in t_ref.shape)
        assert t_ours.type_name == t_ref.tensor_type.name
        assert t_ours.n_bytes == int(t_ref.n_bytes)
        assert ours.data_offset + t_ours.offset == int(t_ref.data_offset)


@pytest.mark.parametrize("which", ["smollm2", "gemma"])
def test_the_twin_says_what_the_real_file_says(which, request, tmp_path):
    real = read_gguf_info(request.getfixturevalue(which))
    twin_file = TWINS[which](tmp_path / f"{which}-twin.gguf")
    twin = read_gguf_info(twin_file.path)
    # Every metadata key in the same order; every scalar and short array equal; long arrays as long.
    assert list(twin.metadata) == list(real.metadata)
    assert twin.metadata == real.metadata and twin.array_lengths == real.array_lengths
    assert twin.token_texts == real.token_texts  # the special tokens the app reads
    assert twin.tensors == real.tensors  # names, shapes, types, sizes and offsets
    assert (twin.data_offset, twin.file_size, twin_file.size) == (real.data_offset, real.file_size, real.file_size)
    assert (twin.n_params, twin.tensor_bytes, twin.quant_type) == (real.n_params, real.tensor_bytes, real.quant_type)
    assert twin.swa_layers() == real.swa_layers() and twin.has_chat_template == real.has_chat_template

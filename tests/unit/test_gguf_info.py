"""GGUF header reading and validation (case E6), on the header twins of the real test models
(tests/support/model_twins.py; held against the llama.cpp project's GGUFReader on the real files
in tests/engine/test_model_twins.py)."""

from __future__ import annotations

import struct

import pytest

from app.core.gguf.gguf_info import GGUFError, read_gguf_info, split_part_paths


def test_smollm2_facts(smollm2_twin):
    info = read_gguf_info(smollm2_twin.path)
    assert info.architecture == "llama"
    assert info.quant_type == "Q4_1"
    assert info.n_params == 134_515_008
    assert info.context_length == 8192
    assert (info.n_layer, info.n_head, info.n_head_kv_layer(0), info.n_embd_head_k) == (30, 9, 3, 64)
    assert info.n_vocab == 49152 and info.has_chat_template
    assert info.token_texts[info.eos_token_id] == "<|im_end|>"
    assert not any(info.swa_layers())
    assert 5.5 < info.bits_per_weight < 6.0


def test_gemma3_sliding_window_layers(gemma_twin):
    info = read_gguf_info(gemma_twin.path)
    assert info.architecture == "gemma3" and info.quant_type == "Q4_K_M"
    assert info.sliding_window == 512 and info.n_vocab == 262144
    swa = info.swa_layers()
    # llama.cpp's gemma3 pattern (src/models/gemma3.cpp: n_pattern 6): every 6th layer is global.
    assert [i for i, s in enumerate(swa) if not s] == [5, 11, 17]
    assert not info.has_chat_template


@pytest.mark.timing
def test_reading_is_fast_even_with_a_large_vocabulary(gemma_twin):
    import time

    t = time.perf_counter()
    read_gguf_info(gemma_twin.path)
    assert time.perf_counter() - t < 2.0  # GGUFReader takes ~19 s on this file


# ------------------------------------------------------------------------------ E6
def test_e6_text_file_renamed_gguf(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_text("Hello world, I am a text file.\n")
    with pytest.raises(GGUFError) as e:
        read_gguf_info(p)
    assert "x.gguf" in str(e.value) and "not a GGUF model" in str(e.value) and "text file" in str(e.value)


def test_e6_empty_file(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"")
    with pytest.raises(GGUFError, match=r"x\.gguf: the file is empty \(0 bytes\)"):
        read_gguf_info(p)


def test_e6_real_gguf_cut_in_half(tmp_path, smollm2_twin):
    p = tmp_path / "half.gguf"
    size = smollm2_twin.path.stat().st_size
    with open(smollm2_twin.path, "rb") as f:
        p.write_bytes(f.read(size // 2))
    with pytest.raises(GGUFError) as e:
        read_gguf_info(p)
    msg = str(e.value)
    assert "half.gguf" in msg and "cut short" in msg and f"{size // 2:,} bytes" in msg and "download" in msg


def test_e6_gguf_cut_inside_its_header(tmp_path, smollm2_twin):
    p = tmp_path / "head.gguf"
    with open(smollm2_twin.path, "rb") as f:
        p.write_bytes(f.read(100_000))
    with pytest.raises(GGUFError, match="ends inside its header"):
        read_gguf_info(p)


@pytest.mark.parametrize("magic,fmt", [(b"lmgg", "GGML"), (b"tjgg", "GGJT"), (b"fmgg", "GGMF")])
def test_e6_old_ggml_bin(tmp_path, magic, fmt):
    p = tmp_path / "llama-7b.ggmlv3.q4_0.bin"
    p.write_bytes(magic + struct.pack("<I", 3) + bytes(1024))
    with pytest.raises(GGUFError) as e:
        read_gguf_info(p)
    assert p.name in str(e.value) and f"old {fmt} model file" in str(e.value) and "GGUF version" in str(e.value)


def test_e6_html_page_saved_as_gguf(tmp_path):
    p = tmp_path / "model.gguf"
    p.write_text("<!DOCTYPE html><html><body>Not found</body></html>")
    with pytest.raises(GGUFError, match="web page"):
        read_gguf_info(p)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(GGUFError, match="does not exist"):
        read_gguf_info(tmp_path / "nope.gguf")
    with pytest.raises(GGUFError, match="folder"):
        read_gguf_info(tmp_path)


def test_unsupported_version(tmp_path):
    p = tmp_path / "v1.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<I", 1) + bytes(64))
    with pytest.raises(GGUFError, match="version 1"):
        read_gguf_info(p)


def test_split_names():
    from pathlib import Path

    parts = split_part_paths(Path("/m/Qwen-7B-Q4_K_M-00001-of-00003.gguf"))
    assert [p.name for p in parts] == [f"Qwen-7B-Q4_K_M-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert split_part_paths(Path("/m/model.gguf")) == []


def test_a_damaged_length_in_a_whole_file_is_not_called_a_truncated_download(tmp_path, smollm2_twin):
    p = tmp_path / "mid.gguf"
    data = bytearray(smollm2_twin.path.read_bytes()[:3_000_000])
    # the length of the first metadata key's string (right after the 24-byte preamble)
    data[24:32] = (2**62).to_bytes(8, "little")
    p.write_bytes(bytes(data))
    with pytest.raises(GGUFError) as e:
        read_gguf_info(p)
    assert "header is damaged" in str(e.value) and "cut short" not in str(e.value)
    assert str(e.value).endswith(".")

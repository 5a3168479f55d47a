"""Issue 21 §2: the ``Quantize`` request on the real SmolLM2 (llama.cpp's ``llama_model_quantize``)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from app.core import protocol as P
from app.core.chat.context import LoadSettings
from app.core.gguf.gguf_info import format_bytes, read_gguf_info
from app.core.quant.plan import plan_quantization
from app.core.quant.types import QuantType
from app.engine.errors import EngineError
from app.engine.host import EngineHost
from app.engine.llama_log import LlamaLog
from app.engine.quant import quantize as quantize_module
from app.engine.quant.quantize import part_path
from tests.support.models import sha256_file
from tests.support.quantized import _whole, requantized


@pytest.fixture
def host():
    h = EngineHost()
    h.start()
    assert isinstance(h.recv(60), P.EngineReady)
    yield h
    h.stop()


def test_quantize_to_q8_0_writes_a_whole_q8_0_that_loads(host, smollm2, tmp_path):
    dest = tmp_path / "s.Q8_0.gguf"
    events: list = []
    answer = host.request(P.Quantize(host.next_id(), str(smollm2), str(dest), QuantType.Q8_0), on_event=events.append)
    assert isinstance(answer, P.Quantized), answer
    assert answer.requantized and answer.tensors == 272 and answer.bytes == dest.stat().st_size
    assert answer.fallback_tensors == 0  # 576-wide rows are whole Q8_0 blocks (32 weights)
    assert not part_path(dest).exists()
    progress = [e for e in events if isinstance(e, P.QuantizeProgress)]
    done = [p.tensors_done for p in progress]
    assert done[0] == 0 and done[-1] == 272 and done == sorted(done)
    assert {p.tensors_total for p in progress} == {272}
    assert progress[-1].bytes_written == answer.bytes
    # the plan's figure is the real size to the byte (the header as the source's, each tensor padded to 32),
    # and the progress uses it: the dry run's quant size is the plan's tensor bytes to its 0.01 MiB
    estimate = plan_quantization([read_gguf_info(smollm2)]).option(QuantType.Q8_0).expected_bytes
    assert estimate == answer.bytes and progress[0].expected_bytes == estimate
    info = read_gguf_info(dest)
    assert info.metadata["general.file_type"] == QuantType.Q8_0.ftype and info.quant_type == "Q8_0"
    assert {t.type_name for t in info.tensors if len(t.shape) >= 2} == {"Q8_0"}
    loaded = host.request(P.LoadModel(host.next_id(), str(dest), LoadSettings(n_ctx=256)))
    assert isinstance(loaded, P.ModelLoaded), loaded
    assert loaded.info.quant_type == "Q8_0"


def test_a_type_the_source_already_has_is_refused_with_the_reason(host, smollm2_q8_0, tmp_path):
    dest = tmp_path / "again.gguf"
    answer = host.request(P.Quantize(host.next_id(), str(smollm2_q8_0), str(dest), QuantType.Q8_0))
    assert isinstance(answer, P.Failed) and answer.kind is P.FailureKind.BAD_SETTINGS
    assert "already Q8_0" in answer.message and "Choose another type" in answer.message
    assert list(tmp_path.iterdir()) == []


def test_an_existing_destination_and_an_unwritable_folder_are_refused_by_name(host, smollm2, tmp_path):
    taken = tmp_path / "taken.gguf"
    taken.write_bytes(b"mine")
    answer = host.request(P.Quantize(host.next_id(), str(smollm2), str(taken), QuantType.Q4_0))
    assert isinstance(answer, P.Failed) and answer.kind is P.FailureKind.BAD_SETTINGS
    assert str(taken) in answer.message and "already exists" in answer.message
    assert taken.read_bytes() == b"mine"
    missing = tmp_path / "no-such-folder" / "x.gguf"
    answer = host.request(P.Quantize(host.next_id(), str(smollm2), str(missing), QuantType.Q4_0))
    assert isinstance(answer, P.Failed) and "does not exist" in answer.message and "no-such-folder" in answer.message
    # /proc is there but takes no files (it answers "No such file or directory", even to root): say so
    answer = host.request(P.Quantize(host.next_id(), str(smollm2), "/proc/x.gguf", QuantType.Q4_0))
    assert isinstance(answer, P.Failed) and answer.kind is P.FailureKind.BAD_SETTINGS
    assert (
        answer.message.startswith("The folder /proc is not writable") and "cannot be written in" not in answer.message
    )


def test_the_disk_space_refusal_gives_the_figure_the_dialog_lists(smollm2, tmp_path, monkeypatch):
    """One figure: the Q2_K the dialog lists at 84.1 MiB needs "about 84.1 MiB" (it listed 81.5 before the
    mix's rules were counted; llama.cpp's dry run, which the refusal follows, said 84.1)."""
    listed = format_bytes(plan_quantization([read_gguf_info(smollm2)]).option(QuantType.Q2_K).expected_bytes)
    assert listed == "84.1 MiB"
    monkeypatch.setattr(quantize_module.shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10**9, 10**9, 2**20))
    req = P.Quantize(1, str(smollm2), str(tmp_path / "s.Q2_K.gguf"), QuantType.Q2_K, n_threads=1)
    with pytest.raises(EngineError) as refused:
        quantize_module.quantize(req, emit=lambda _ev: None, llama_log=LlamaLog(), cancel=threading.Event())
    assert refused.value.kind is P.FailureKind.QUANTIZE
    assert f"needs about {listed} and" in refused.value.message and list(tmp_path.iterdir()) == []


def test_a_source_that_is_not_a_gguf_fails_as_bad_model(host, tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("not a model")
    answer = host.request(P.Quantize(host.next_id(), str(bad), str(tmp_path / "out.gguf"), QuantType.Q4_0))
    assert isinstance(answer, P.Failed) and answer.kind is P.FailureKind.BAD_MODEL and "notes.gguf" in answer.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.gguf"]


def test_a_killed_quantization_leaves_only_its_part_file(smollm2, tmp_path):
    """The quantizer has no abort: a cancel kills the process mid-write; only ``<dest>.part`` is left (the
    window removes it), never the destination."""
    host = EngineHost()
    host.start()
    try:
        assert isinstance(host.recv(60), P.EngineReady)
        dest = tmp_path / "s.Q8_0.gguf"
        host.send(P.Quantize(host.next_id(), str(smollm2), str(dest), QuantType.Q8_0, n_threads=1))
        while not isinstance(ev := host.recv(60), P.QuantizeProgress) or ev.tensors_done == 0:
            assert not isinstance(ev, P.TERMINAL_EVENTS), ev
        assert host.process is not None and host.process.pid is not None
        os.kill(host.process.pid, signal.SIGKILL)
        host.process.join(10)
    finally:
        host.stop()
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir()] in ([], ["s.Q8_0.gguf.part"])


def test_the_cache_remakes_a_damaged_requantization(smollm2, tmp_path):
    made = requantized(smollm2, QuantType.Q4_0, cache=tmp_path)
    record = made.with_name(made.name + ".json")
    assert _whole(made, record)
    first = sha256_file(made)
    with open(made, "r+b") as fh:  # one byte changed in the middle: damaged
        fh.seek(made.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert not _whole(made, record)
    again = requantized(smollm2, QuantType.Q4_0, cache=tmp_path)
    assert again == made and sha256_file(again) == first
    assert sorted(p.name for p in made.parent.iterdir() if not p.name.endswith(".lock")) == [
        made.name,
        record.name,
    ]


def test_the_session_fixtures_are_the_requantizations(smollm2_q8_0: Path, smollm2_q2_k: Path):
    q8, q2 = read_gguf_info(smollm2_q8_0), read_gguf_info(smollm2_q2_k)
    assert q8.metadata["general.file_type"] == QuantType.Q8_0.ftype
    assert q2.metadata["general.file_type"] == QuantType.Q2_K.ftype
    assert q2.tensor_types["Q4_0"][0] == 180  # the fallback of 576-wide rows

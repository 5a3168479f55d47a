"""The window's parts without a model: one owner per state, enums, the shared formatter,
the stacked bar, the banner, the repaint clock."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from PySide6.QtCore import QPoint

from app.core import protocol as P
from app.core.chat.context import ContextPolicy, GenerationStats, StopReason
from app.core.conversations import MessageMeta
from app.core.sampling.params import DEFAULTS
from app.ui.chat.message import BadgeKind, MessageAction, MessageWidget
from app.ui.chat.turn import LiveTurn, TurnPhase
from app.ui.common import palette
from app.ui.common import stats_format as fmt
from app.ui.common.repaint_clock import RepaintClock
from app.ui.common.severity import Severity
from app.ui.common.stacked_bar import BarMarker, BarSegment, StackedBar
from app.ui.engine.client import EngineState
from app.ui.window.banner import Banner
from app.ui.window.notices import Notices, NoticeTopic


def _window(qtbot):
    from PySide6.QtWidgets import QApplication

    from app.paths import default_paths
    from app.ui.theme import apply_theme
    from app.ui.window.compose import create_window

    apply_theme(QApplication.instance())
    win = create_window(default_paths().ensure())
    qtbot.addWidget(win)
    return win


def _close(win) -> None:
    win.close()
    win.conversations.close()


# ------------------------------------------------------------------ one formatter
def test_ttft_is_in_ms_below_one_second_then_in_seconds():
    assert fmt.ttft(0.0424) == "42 ms"
    assert fmt.ttft(0.9994) == "999 ms"
    assert fmt.ttft(1.0) == "1.00 s"
    assert fmt.ttft(12.345) == "12.35 s"


def test_speeds_have_one_decimal_and_counts_thousands_separators():
    assert fmt.tok_s(41.66) == "41.7 tok/s"
    assert fmt.tok_s(1234.0) == "1,234.0 tok/s"
    assert fmt.tokens(12345) == "12,345"


def test_the_footer_and_the_details_use_the_same_units():
    stats = GenerationStats(
        prompt_tokens=1500,
        cached_tokens=1200,
        evaluated_tokens=300,
        prefill_s=0.25,
        ttft_s=0.3,
        generated_tokens=2001,
        decode_s=40.0,
        seed=7,
        stop_reason=StopReason.MAX_TOKENS.value,
    )
    footer = fmt.reply_footer(stats)
    assert footer.split(" · ") == [
        "2,001 tokens",
        "50.0 tok/s",
        "TTFT 300 ms",
        "prefill 300 tok @ 1,200.0 tok/s",
        "1,200 reused",
        "seed 7",
        "max_tokens reached",
    ]
    from app.core.chat.context import LoadSettings

    meta = MessageMeta(
        model_path="/m/x.gguf",
        quant="Q4_1",
        sampler=DEFAULTS,
        load=LoadSettings(n_ctx=8192, context_policy=ContextPolicy.ROLLING.value),
        stats=stats,
    )
    details = fmt.reply_details(meta).splitlines()
    assert details[0] == "model: x.gguf (Q4_1)"
    assert details[1] == "n_ctx 8,192 · context policy rolling"
    assert "seed 7" in details
    order = ", ".join(st.value for st in DEFAULTS.order)
    assert f"sampler order: {order} (chain as it ran: penalties→top_k→top_p→min_p→temp→draw)" in details
    assert "prompt 1,500 tokens (1,200 reused) · generated 2,001" in details
    assert "TTFT 300 ms · prefill 1,200.0 tok/s · decode 50.0 tok/s" in details
    assert fmt.reply_details(MessageMeta()) == ""


# ------------------------------------------------------------------ stacked bar
def test_the_stacked_bar_places_segments_clips_them_and_gives_their_tooltips(qtbot):
    bar = StackedBar(14)
    qtbot.addWidget(bar)
    bar.resize(201, 14)  # 200 px inside the half-pixel outline
    a = BarSegment(50, palette.ACCENT, "fifty")
    b = BarSegment(100, palette.AMBER, "a hundred")
    c = BarSegment(500, palette.GREEN, "past the end")
    bar.set_segments([a, b, c], 200, [BarMarker(160, palette.TEXT, dashed=True)])
    assert bar.segment_at(10) is a and bar.segment_at(60) is b and bar.segment_at(160) is c
    assert bar.segment_at(150) is b and bar.segment_at(151) is c  # the track starts half a pixel in
    spans = bar._spans()
    assert spans[-1][1] <= bar.width()  # the last one is cut at the bar's end
    bar.set_segments([a], 0)
    assert bar.segment_at(10) is None  # no total: only the track
    img = bar.grab().toImage()
    assert img.pixelColor(QPoint(100, 7)).name() == palette.TRACK


def test_the_context_bar_keeps_its_parts_and_paints_them_in_the_legend_colours(qtbot):
    from app.ui.panels.stats import GENERATED_COLOR, PREFILL_COLOR, REUSED_COLOR, ContextBar

    bar = ContextBar()
    qtbot.addWidget(bar)
    bar.resize(301, 18)
    bar.set_parts(100, 50, 50, 300)
    assert bar.parts == (100, 50, 50) and bar.n_ctx == 300
    img = bar.grab().toImage()
    assert img.pixelColor(QPoint(50, 9)).name() == REUSED_COLOR
    assert img.pixelColor(QPoint(125, 9)).name() == PREFILL_COLOR
    assert img.pixelColor(QPoint(175, 9)).name() == GENERATED_COLOR
    assert img.pixelColor(QPoint(250, 9)).name() == palette.TRACK
    assert "100 tokens reused" in bar.segment_at(50).tooltip


# ------------------------------------------------------------------ banner
def test_banner_actions_are_public_and_its_text_stays_out_of_the_log(qtbot, caplog):
    banner = Banner()
    qtbot.addWidget(banner)
    notices = Notices(banner)
    pressed: list[str] = []
    with caplog.at_level(logging.INFO, logger="app.ui.window.notices"):
        notices.show(
            NoticeTopic.CHAT_MODEL,
            Severity.WARNING,
            "Deleted “My secret chat”.",
            [("Undo", lambda: pressed.append("undo")), ("Later", lambda: pressed.append("later"))],
        )
    assert [label for label, _ in banner.action_buttons()] == ["Undo", "Later"]
    banner.trigger("Later")
    assert pressed == ["later"]
    with pytest.raises(KeyError):
        banner.trigger("Nope")
    assert banner.property("kind") == "warning" and banner.severity is Severity.WARNING
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "secret" not in caplog.text and "chat-model" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="app.ui.window.notices"):
        notices.show(NoticeTopic.GENERAL, Severity.ERROR, "Deleted “My secret chat”.")
    assert any(r.levelno == logging.DEBUG and "secret" in r.getMessage() for r in caplog.records)
    assert banner.action_buttons() == []  # the old buttons are gone


def test_notices_clear_only_their_topic(qtbot):
    banner = Banner()
    qtbot.addWidget(banner)
    notices = Notices(banner)
    banner.show()
    notices.show(NoticeTopic.MODEL, Severity.ERROR, "bad file")
    notices.clear(NoticeTopic.ENGINE)
    assert banner.isVisible()
    notices.clear(NoticeTopic.MODEL)
    assert not banner.isVisible()


# ------------------------------------------------------------------ repaint clock
def test_the_repaint_clock_runs_text_panels_plot_and_flush_at_their_rates():
    turn = LiveTurn()
    turn.start()
    clock = RepaintClock(turn)
    text, panels, flush = [], [], []
    clock.text_due.connect(lambda: text.append(1))
    clock.panels_due.connect(panels.append)
    clock.flush_due.connect(lambda: flush.append(1))
    for _ in range(30):  # one second
        clock.tick()
    assert len(text) == 30 and len(flush) == 1
    assert len(panels) == 10 and panels.count(True) == 5
    turn.on_finished(GenerationStats())
    assert turn.phase is TurnPhase.DONE
    panels.clear()
    clock.tick()
    assert panels == [True]  # once done, the final figures and plot show at once


def test_the_repaint_clock_never_flushes_to_disk_on_a_panel_tick():
    turn = LiveTurn()
    turn.start()
    clock = RepaintClock(turn)
    log: list[tuple[int, str]] = []
    tick = [0]
    clock.text_due.connect(lambda: tick.__setitem__(0, tick[0] + 1))
    clock.panels_due.connect(lambda _plot: log.append((tick[0], "panels")))
    clock.flush_due.connect(lambda: log.append((tick[0], "flush")))
    for _ in range(90):  # three seconds
        clock.tick()
    flushes = {t for t, what in log if what == "flush"}
    panels = {t for t, what in log if what == "panels"}
    assert len(flushes) == 3 and len(panels) == 30
    assert not flushes & panels  # the fsync and the panel repaint fall on different ticks


def test_a_reply_start_freezes_the_objects_alive_so_collections_do_not_walk_them():
    import gc

    gc.unfreeze()
    turn = LiveTurn()
    clock = RepaintClock(turn)
    clock.tick()
    assert gc.get_freeze_count() == 0  # idle: nothing frozen
    kept = [[i] for i in range(10)]  # tracked by the collector
    turn.start()
    clock.tick()
    frozen = gc.get_freeze_count()
    assert frozen > len(kept)  # the reply's start froze what was alive
    clock.tick()
    assert gc.get_freeze_count() == frozen  # once per reply, not per tick
    gc.unfreeze()


# ------------------------------------------------------------------ enums
def test_turn_phases_are_an_enum_with_the_old_values():
    turn = LiveTurn()
    assert turn.phase is TurnPhase.IDLE
    turn.start()
    assert turn.phase is TurnPhase.PREFILL
    turn.on_token(P.TokenEvent(request_id=1, text="a", token_id=5, piece="a", index=0, t_s=0.1, n_past=3))
    assert turn.phase is TurnPhase.DECODE and turn.phase == "decode"
    turn.on_finished(None)
    assert turn.phase is TurnPhase.FAILED


def test_message_buttons_emit_message_actions(qtbot):
    w = MessageWidget("assistant", "Hi", message_id=7)
    qtbot.addWidget(w)
    got: list = []
    w.action_requested.connect(lambda *a: got.append(a))
    w.regen_btn.click()
    w.delete_btn.click()
    w.set_branch(1, 2)
    w.next_btn.click()
    assert got == [
        (MessageAction.REGENERATE, 7, None),
        (MessageAction.DELETE, 7, None),
        (MessageAction.BRANCH_STEP, 7, 1),
    ]
    w.set_badge("stopped", BadgeKind.WARN)
    assert w.badge.property("kind") == "warn" and w.badge.text() == "stopped"


# ------------------------------------------------------------------ one owner: the reply in flight
def test_shutting_down_mid_reply_ends_the_reply_once(qtbot, tiny_model):
    from app.core.chat.context import ChatMessage, LoadSettings
    from tests.support.fake_engine import Endless, FakeEngine

    client = FakeEngine()  # the real client on a scripted host
    with qtbot.waitSignal(client.model_loaded, timeout=5000):
        client.load_model(str(tiny_model), LoadSettings())
    client.script(Endless())
    states: list = []
    ended: list[int] = []
    client.state_changed.connect(states.append)
    client.generation_ended.connect(ended.append)
    with qtbot.waitSignal(client.token_received, timeout=5000):
        rid = client.generate((ChatMessage("user", "Count."),), DEFAULTS)
    client.load_model(str(tiny_model), LoadSettings())  # a load waits for the reply to end
    client.shutdown()
    assert ended == [rid] and not client.generating and client.model is None
    assert client.state is EngineState.DEAD and states == [
        EngineState.GENERATING,
        EngineState.LOADING,
        EngineState.DEAD,
    ]
    assert client.generate((ChatMessage("user", "Again?"),), DEFAULTS) is None  # nothing in flight, nothing sent
    client.shutdown()
    assert ended == [rid] and states[-1] is EngineState.DEAD and len(states) == 3


def test_send_stop_and_the_stop_action_follow_the_engine(qtbot):
    win = _window(qtbot)
    try:
        assert win.composer.button.text() == "Send" and not win.act_stop.isEnabled()
        win.engine.generation_started.emit(5)
        assert win.composer.button.text() == "Stop" and win.act_stop.isEnabled()
        win.engine.generation_ended.emit(5)
        assert win.composer.button.text() == "Send" and not win.act_stop.isEnabled()
    finally:
        _close(win)


# ------------------------------------------------------------------ one owner: the settings
def test_panel_edits_go_to_the_settings_controller_and_the_chat_reads_it(qtbot, tiny_model):
    from app.core.chat.context import LoadSettings
    from tests.support.scripted_host import _model_loaded

    win = _window(qtbot)
    try:
        win.model_panel.n_ctx.setValue(1024)  # no model yet: nothing to remember it for
        assert win.settings.model_load == () and win.loader.current_load == LoadSettings()
        path = str(tiny_model.resolve())
        model = _model_loaded(1, path, LoadSettings())
        win.engine.model = model  # the model the panel and the chat are for
        win.model_panel.n_ctx.setValue(3072)
        win.model_panel.policy.setCurrentIndex(win.model_panel.policy.findData(ContextPolicy.ROLLING.value))
        assert win.settings.load_for(path).n_ctx == LoadSettings().n_ctx  # not applied: not remembered
        assert win.settings.load_for(path).context_policy == ContextPolicy.ROLLING  # no reload needed: at once
        win.model_panel.reload_requested.emit(win.model_panel.load_settings())  # Apply
        assert win.settings.load_for(path).n_ctx == 3072
        assert win.settings.load_for("/m/other.gguf") == LoadSettings()
        panel = win.sampler_panel
        panel.set_settings(replace(panel.settings(), temperature=0.25), emit=True)
        assert win.settings.sampler.temperature == 0.25
        win.settings_ctl.update(sampler=replace(win.settings.sampler, top_k=7))
        assert panel.settings().top_k == 7  # the panel shows what the controller holds
        panel.stop_field.setText("END, \\n")
        assert win.chat_settings.current.stop_strings == ("END", "\n")
        sent: list = []
        win.engine._state = EngineState.READY
        win.engine.generate = lambda messages, sampler, **kw: (sent.append((sampler, kw)), None)[1]
        win.engine.model = model
        win.chat.send("Hello")
        sampler, kw = sent[-1]
        assert sampler.temperature == 0.25 and sampler.top_k == 7
        assert kw["context_policy"] == ContextPolicy.ROLLING and kw["stop_strings"] == ("END", "\n")
    finally:
        win.engine._state = EngineState.DEAD
        _close(win)


def test_llama_log_lines_take_their_severity_from_the_engine(qtbot):
    win = _window(qtbot)
    try:
        win.engine.log_line.emit(P.LogLine("error", "ggml: out of memory"))
        assert win.banner.severity is Severity.ERROR
        win.engine.log_line.emit(P.LogLine("warning", "n_ctx_per_seq < n_ctx_train"))
        assert win.banner.severity is Severity.WARNING
    finally:
        _close(win)


def test_a_cpu_only_build_says_how_to_get_a_gpu_in_a_checkout_and_not_in_the_bundle(qtbot, monkeypatch):
    import sys

    from app.core.chat.context import LoadSettings
    from app.ui.panels.model import ModelPanel

    panel = ModelPanel(LoadSettings())
    qtbot.addWidget(panel)
    panel.set_gpu_offload(False)
    assert "Rebuild llama-cpp-python" in panel.gpu_note.text()
    monkeypatch.setattr(sys, "frozen", True, raising=False)  # as in the PyInstaller bundle
    panel.set_gpu_offload(False)
    assert "CPU only" in panel.gpu_note.text() and "Rebuild" not in panel.gpu_note.text()
    panel.set_gpu_offload(True)
    assert panel.gpu_note.text() == ""


def test_a_long_model_name_in_a_reply_header_ends_in_an_ellipsis_not_a_cut(qtbot):
    name = "Qwen2.5-Coder-32B-Instruct-abliterated-GGUF · Q4_K_M · a very long file name"
    w = MessageWidget("assistant", "Hello.", title=name)
    qtbot.addWidget(w)
    w.resize(360, 200)
    w.show()
    qtbot.waitExposed(w)
    assert w.title.text() == name and w.title.toolTip() == name  # the whole name stays reachable
    shown = w.title.elided_text()
    assert shown.endswith("…") and len(shown) < len(name)
    assert w.title.fontMetrics().horizontalAdvance(shown) <= w.title.contentsRect().width()
    w.resize(1400, 200)
    qtbot.waitUntil(lambda: w.title.elided_text() == name)  # room again: the whole name


def test_the_decode_speed_series_extends_as_tokens_arrive_and_equals_a_whole_recount():
    import random

    from app.ui.chat.turn import RATE_WINDOW

    rng = random.Random(7)
    times = [0.2]
    for _ in range(299):
        times.append(times[-1] + rng.choice([0.0, 0.01, 0.02, 0.05]))  # equal times: no rate for that step
    turn = LiveTurn()
    turn.start()
    for k, t in enumerate(times):
        turn.on_token(P.TokenEvent(request_id=1, text="a", token_id=5, piece="a", index=k, t_s=t, n_past=3 + k))
        if k % 37 == 0:
            turn.rate_series()  # asked now and then while tokens arrive (the plot, 5 times a second)
    xs, ys = turn.rate_series()
    want = [
        (times[i], (i - max(0, i - RATE_WINDOW)) / (times[i] - times[max(0, i - RATE_WINDOW)]))
        for i in range(1, len(times))
        if times[i] > times[max(0, i - RATE_WINDOW)]
    ]
    assert xs == pytest.approx([w[0] for w in want]) and ys == pytest.approx([w[1] for w in want])
    turn.start()  # a new turn starts a new series
    assert turn.rate_series() == ([], [])


def test_an_internal_error_notice_reaches_the_banner(qtbot, window):
    """app/main.py wires app/diagnostics.py's notice to the banner: it must not raise (an unknown
    banner topic once made every internal error invisible)."""
    from app.ui.window.compose import internal_error_notice

    notice = internal_error_notice(window)
    notice("Something went wrong inside Glassbox (ValueError: boom). Details are in app.log.")
    assert "ValueError: boom" in window.banner.text.text() and window.banner.isVisibleTo(window)

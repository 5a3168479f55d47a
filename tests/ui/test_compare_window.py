"""The Compare window (issue 21 §1) on canned comparisons: a JobRunner on a scripted job host
(tests/support/comparisons.py), no model, no process. The real engine's run is
tests/ui_model/test_compare_real.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt

from app.core import protocol as P
from app.core.chat.context import ChatMessage, Role
from app.core.hardware import machine_load
from app.ui.common import dialogs
from app.ui.common.token_label import visible
from app.ui.quant.compare_entry import CompareLauncher
from app.ui.quant.compare_scale import KL_COLOURS, kl_colour, kl_level
from app.ui.quant.compare_window import CompareWindow, make_compare_window
from tests.support.comparisons import CannedComparison, canned_runner_factory, scored_ranges
from tests.support.window import close_window, make_window

WAIT = 5000


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):  # type: ignore[no-untyped-def]
    """A load average of 0: the tok/s shown do not depend on what else this machine runs during the test."""
    monkeypatch.setattr(machine_load.os, "getloadavg", lambda: (0.0, 0.0, 0.0))


def _window(qtbot, tmp_path: Path, canned: CannedComparison, chat=None) -> CompareWindow:  # type: ignore[no-untyped-def]
    a, b = tmp_path / "model-Q8_0.gguf", tmp_path / "model-Q4_K_M.gguf"
    for p in (a, b):
        p.write_bytes(b"GGUF")
    win = make_compare_window(
        entries=lambda: [],
        loaded=lambda: None,
        chat_source=lambda: chat,
        template_for=lambda path: "{{ tmpl }}" if path == str(a) else None,
        make_runner=canned_runner_factory(canned),
    )
    qtbot.addWidget(win)
    win.prepare()
    win.set_pair(a, b)
    win.resize(1366, 740)
    win.show()
    return win


def _run(qtbot, win: CompareWindow, text: str = "some text to compare") -> None:  # type: ignore[no-untyped-def]
    win.setup.passage.setPlainText(text)
    with qtbot.waitSignal(win.controller.ended, timeout=WAIT):
        win.setup.start.click()


def test_a_comparison_fills_the_strip_the_worst_list_and_the_summary(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    canned = CannedComparison(n_tokens=1024)
    win = _window(qtbot, tmp_path, canned)
    _run(qtbot, win)
    req = canned.requests[0]
    assert isinstance(req, P.CompareModels)
    assert (req.text, req.messages, req.n_ctx) == ("some text to compare", None, 512)
    run = win.controller.run
    ranges = scored_ranges(1024, 512)
    assert run.scored == ranges and len(run.token_texts) == 1024
    assert sorted(run.tokens) == [i for a, b in ranges for i in range(a, b)]
    # The worst list: highest KL first, as many rows as scored tokens (under 200 here: 2 x 255 = 510).
    shown = [float(win.worst.item(r, 2).text()) for r in range(win.worst.rowCount())]
    assert len(shown) == 200 and shown == sorted(shown, reverse=True) and shown[0] == pytest.approx(0.049)
    # The summary: every figure filled from the finished event.
    s = run.summary
    assert s is not None
    assert win.summary.values["kl_mean"].text().startswith(f"{s.kl_mean:.4g} ± ")
    assert win.summary.values["same_top1"].text() == f"{100 * s.same_top1:.2f} ± {100 * s.same_top1_err:.2f} %"
    assert win.summary.values["a.file_bytes"].text() == "95.4 MiB"  # 100,000,000 bytes
    assert win.summary.values["b.decode_tok_s"].text() == "80.0 tok/s"
    assert "scoreboard" in win.summary.headline.text()
    assert win.setup.start.isEnabled() and not win.setup.cancel.isEnabled()
    assert win.export_csv.isEnabled() and win.export_json.isEnabled()
    assert win.setup.progress.value() == win.setup.progress.maximum()


def test_hover_shows_both_top_fives_and_why_a_token_is_not_scored(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    win = _window(qtbot, tmp_path, CannedComparison(n_tokens=1100))
    _run(qtbot, win)
    strip = win.strip
    flip = 259  # scored (256 + 1 .. 511) and a multiple of 7: the two top-1 differ
    tip = strip.tooltip_for(flip)
    assert "KL divergence" in tip and "top-1 differs" in tip and "x259" in tip and "w259" in tip
    assert "model-Q8_0.gguf" in tip and "model-Q4_K_M.gguf" in tip and "surprisal" in tip
    assert "Δp" in tip and "−30.0 pp" in tip
    assert "same top-1" in strip.tooltip_for(260)
    unscored = strip.tooltip_for(3)
    assert "not scored" in unscored and "chunk 1" in unscored
    assert "chunk 2" in strip.tooltip_for(512 + 10)
    assert "after the last whole chunk" in strip.tooltip_for(1050)  # the tail that fills no chunk
    # Hit-testing: the token under a point of its rectangle is that token.
    r = strip.select(flip)
    assert r is not None and strip.token_at(r.center()) == flip
    assert strip.token_at(QPoint(-5, -5)) is None


def test_clicking_a_worst_token_scrolls_the_strip_to_it(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    win = _window(qtbot, tmp_path, CannedComparison(n_tokens=4096))
    _run(qtbot, win)
    bar = win.strip_area.verticalScrollBar()
    assert bar.maximum() > 0  # 4,096 tokens do not fit
    bar.setValue(0)
    last_row = win.worst.rowCount() - 1
    target = int(win.worst.item(last_row, 0).data(Qt.ItemDataRole.UserRole))
    assert target > 3000  # the list's last rows are late in the text (ties sorted by position)
    win.worst.cellClicked.emit(last_row, 0)
    assert win.strip.selected == target
    assert bar.value() > 0
    rect = win.strip.select(target)
    assert rect is not None
    top = bar.value()
    assert top <= rect.top() <= top + win.strip_area.viewport().height()


def test_cancel_keeps_the_tokens_scored_and_the_form_comes_back(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    canned = CannedComparison(n_tokens=2048, hold_after_chunks=2)
    win = _window(qtbot, tmp_path, canned)
    win.setup.passage.setPlainText("text")
    win.setup.start.click()
    assert not win.setup.start.isEnabled() and win.setup.cancel.isEnabled()
    assert not win.setup.passage.isEnabled()
    assert "slower" in win.setup.message.text()  # the chat shares the CPU: said while it runs
    qtbot.waitUntil(lambda: len(win.controller.run.tokens) == 2 * 255, timeout=WAIT)
    qtbot.waitUntil(lambda: "510 / 1,020 tokens" in win.setup.progress.format(), timeout=WAIT)
    assert "left" in win.setup.progress.format()
    with qtbot.waitSignal(win.controller.ended, timeout=WAIT):
        win.setup.cancel.click()
    assert "Cancelled" in win.setup.message.text() and "510" in win.setup.message.text()
    assert len(win.controller.run.tokens) == 510 and win.controller.run.summary is None
    assert win.setup.start.isEnabled() and win.setup.passage.isEnabled()
    assert win.summary.values["kl_mean"].text() == "–"
    assert win.export_csv.isEnabled()  # the tokens scored can be exported


def test_incompatible_files_are_refused_with_the_check_that_failed(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    why = (  # the engine's sentence (app/engine/quant/compare.py), said once, not wrapped in a second one
        "These two models cannot be compared token by token: different vocabulary: token 1,234 is 'foo' in one "
        "and 'bar' in the other. Choose two files of the same model (two quantizations of one GGUF)."
    )
    win = _window(qtbot, tmp_path, CannedComparison(fail=(P.FailureKind.INCOMPATIBLE, why)))
    _run(qtbot, win)
    assert win.setup.message.text() == why
    assert win.setup.start.isEnabled()


def test_bad_choices_are_said_and_nothing_starts(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    canned = CannedComparison()
    win = _window(qtbot, tmp_path, canned)
    win.setup.passage.setPlainText("   ")
    win.setup.start.click()
    assert "passage is empty" in win.setup.message.text()
    assert not win.setup.use_chat.isEnabled()  # no chat shown
    (tmp_path / "model-Q4_K_M.gguf").unlink()
    win.setup.passage.setPlainText("text")
    win.setup.start.click()
    assert "model-Q4_K_M.gguf does not exist" in win.setup.message.text()
    assert canned.requests == [] and not win.controller.running


def test_the_chat_is_compared_with_model_as_template(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    chat = (ChatMessage(Role.USER, "hi"), ChatMessage(Role.ASSISTANT, "hello"))
    canned = CannedComparison(n_tokens=600)
    win = _window(qtbot, tmp_path, canned, chat=chat)
    assert win.setup.use_chat.isEnabled() and "2 messages" in win.setup.chat_info.text()
    win.setup.use_chat.setChecked(True)
    win.setup.n_ctx.setValue(256)
    with qtbot.waitSignal(win.controller.ended, timeout=WAIT):
        win.setup.start.click()
    req = canned.requests[0]
    assert req.messages == chat and req.text is None and req.n_ctx == 256
    assert req.chat_template == "{{ tmpl }}"  # model A's override


def test_exports_write_one_csv_row_per_scored_token_and_the_json_summary(  # type: ignore[no-untyped-def]
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    win = _window(qtbot, tmp_path, CannedComparison(n_tokens=1024))
    _run(qtbot, win)
    out_csv, out_json = tmp_path / "out.csv", tmp_path / "out.json"
    asked: list[str] = []

    def choose(_parent, _title, start, _filter) -> str:  # type: ignore[no-untyped-def]
        asked.append(Path(start).name)
        return str(out_csv if str(start).endswith(".csv") else out_json)

    monkeypatch.setattr(dialogs, "choose_save_path", choose)
    win.export_csv.click()
    win.export_json.click()
    assert asked == ["model-Q8_0-vs-model-Q4_K_M.csv", "model-Q8_0-vs-model-Q4_K_M.json"]
    rows = list(csv.DictReader(out_csv.read_text(encoding="utf-8").splitlines()))
    assert len(rows) == len(win.controller.run.tokens) == 510
    # position counts from 0 as llama.cpp does; token_number from 1, as the worst-tokens list's "#" shows it
    assert rows[0]["position"] == "257" and rows[0]["token_number"] == "258" and rows[0]["text"] == " w257"
    numbers = {win.worst.item(r, 0).text(): win.worst.item(r, 1).text() for r in range(win.worst.rowCount())}
    row = next(r for r in rows if r["token_number"] in numbers)
    assert numbers[row["token_number"]] == visible(row["text"])
    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert doc["summary"]["n_scored"] == 510 and len(doc["tokens"]) == 510 and len(doc["token_texts"]) == 1024
    assert "Exported" in win.setup.message.text()
    # A folder that cannot be written: said, nothing half-written.
    monkeypatch.setattr(dialogs, "choose_save_path", lambda *_a: str(tmp_path / "missing" / "x.csv"))
    win.export_csv.click()
    assert "Could not write" in win.setup.message.text()
    assert not (tmp_path / "missing").exists()


def test_the_verdict_places_no_handful_of_tokens_and_says_a_chat_was_one_shorter_chunk(tmp_path: Path) -> None:
    from dataclasses import replace

    from app.ui.quant.compare_summary import verdict
    from tests.support.comparisons import scored_token, summary_for

    many = summary_for("a", "b", [scored_token(i, 0.002) for i in range(200)], 512)
    assert "between Q8_0" in verdict(many) and "scoreboard" in verdict(many)
    one = replace(summary_for("a", "b", [scored_token(1, 0.05)], 3), n_chunks=1)
    said = verdict(one)
    assert said.startswith("1 token scored in 1 chunk of n_ctx 3. Too few tokens for a verdict")
    assert "scoreboard" not in said and "under 100 scored tokens" in said
    chat = replace(summary_for("a", "b", [scored_token(i, 0.002) for i in range(150)], 300), n_ctx_asked=512)
    assert verdict(chat).startswith("The chat is 300 tokens, shorter than n_ctx 512: it was scored as one chunk of 300")
    assert "scoreboard" in verdict(chat)


def test_tok_s_measured_while_glassbox_ran_something_else_or_under_load_are_marked(  # type: ignore[no-untyped-def]
    qtbot, tmp_path: Path, monkeypatch
) -> None:
    """Review 27 §4: the comparison's prefill for A fell 142 -> 94 tok/s while the chat replied, with no note."""
    win = _window(qtbot, tmp_path, CannedComparison(n_tokens=600))
    _run(qtbot, win)
    assert win.summary.values["b.decode_tok_s"].text() == "80.0 tok/s" and "*" not in win.summary.elapsed.text()
    busy = ["a chat reply"]
    monkeypatch.setattr(win.controller, "_others", lambda: tuple(busy))
    _run(qtbot, win)
    assert win.summary.values["a.prefill_tok_s"].text().endswith("tok/s *")
    assert "* tok/s measured under load: a chat reply ran meanwhile" in win.summary.elapsed.text()
    assert "Measured under load" in win.summary.values["b.decode_tok_s"].toolTip()
    busy.clear()
    monkeypatch.setattr(machine_load.os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # other programs
    _run(qtbot, win)
    assert "other work kept" in win.summary.elapsed.text() and win.summary.values["b.decode_tok_s"].text().endswith("*")


def _entry(path: Path, name: str, arch: str, quant: str):  # type: ignore[no-untyped-def]
    from app.core.models.library import ModelEntry

    path.write_bytes(b"GGUF")
    return ModelEntry(path, (path,), name, path.name, arch, 135_000_000, quant, 95_000_000, 8192, None, "models", "")


def test_with_no_model_loaded_the_pickers_offer_two_files_of_one_model_or_ask_for_b(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Not the library's first file against an unrelated one (gemma-3-270m against SmolLM2 Q2_K: refused)."""
    gemma = _entry(tmp_path / "gemma-3-270m-q4_k_m.gguf", "Gemma 3 270m", "gemma3", "Q4_K_M")
    q2 = _entry(tmp_path / "SmolLM2-135M-Instruct.Q2_K.gguf", "SmolLM2 135M Instruct", "llama", "Q2_K")
    q41 = _entry(tmp_path / "SmolLM2-135M-Instruct-Q4_1.gguf", "SmolLM2-135M-Instruct-Q4_1", "llama", "Q4_1")
    library = [gemma, q2, q41]
    win = make_compare_window(lambda: library, lambda: None, lambda: None, lambda _p: None)
    qtbot.addWidget(win)
    win.prepare()  # the same file stem once the quantization is off: one model, though the names differ
    assert (win.setup.model_a.path, win.setup.model_b.path) == (str(q2.path), str(q41.path))
    library[:] = [gemma, q2]  # no two files of one model: B is left to choose
    other = make_compare_window(lambda: library, lambda: None, lambda: None, lambda _p: None)
    qtbot.addWidget(other)
    other.prepare()
    assert other.setup.model_a.path == str(gemma.path) and other.setup.model_b.path is None
    assert (
        other.setup.model_b.combo.currentText() == ""
        and "Choose model B" in other.setup.model_b.combo.placeholderText()
    )
    assert "Pick two GGUF files" in str(other.setup.choice())
    # the loaded model is A, and B its sibling by name
    q8 = _entry(tmp_path / "smol-q8.Q8_0.gguf", "SmolLM2 135M Instruct", "llama", "Q8_0")
    library[:] = [gemma, q2, q8]
    third = make_compare_window(lambda: library, lambda: str(q8.path), lambda: None, lambda _p: None)
    qtbot.addWidget(third)
    third.prepare()
    assert (third.setup.model_a.path, third.setup.model_b.path) == (str(q8.path), str(q2.path))


def test_the_pickers_keep_the_quantization_in_view_and_the_window_keeps_its_size(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = _entry(tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2 135M Instruct", "llama", "Q4_1")
    b = _entry(tmp_path / "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf", "SmolLM2 135M Instruct", "llama", "Q8_0")
    canned = CannedComparison(n_tokens=1024, kl_of=lambda i: 0.001 * (i % 50))
    win = make_compare_window(
        lambda: [a, b], lambda: None, lambda: None, lambda _p: None, canned_runner_factory(canned)
    )
    qtbot.addWidget(win)
    win.prepare()
    win.resize(1280, 720)
    win.show()
    qtbot.waitExposed(win)
    shown = []
    for picker in (win.setup.model_a, win.setup.model_b):
        combo = picker.combo
        text = combo.shown_text(combo.fontMetrics().horizontalAdvance("SmolLM2-135M-Instruct.Q4  ·  90.6 MiB"))
        assert "…" in text and text.endswith("  ·  90.6 MiB")
        shown.append(text)
    assert ".Q4_1.gguf" in shown[0] and ".Q8_0.gguf" in shown[1]
    width = win.width()
    _run(qtbot, win)
    qtbot.wait(50)  # the layout settles after the last repaint
    assert win.width() == width == 1280
    top1 = win.worst.columnWidth(3)
    assert top1 >= win.worst.fontMetrics().horizontalAdvance(" w1000 → x1000 ")  # room for "A → B"
    flip = next(r for r in range(win.worst.rowCount()) if "→" in win.worst.item(r, 3).text())
    b1 = win.worst.item(flip, 3).text().split("→")[1].strip()  # B's top-1, cut from the cell when narrow
    assert b1 in win.worst.item(flip, 3).toolTip()  # the tooltip has both top fives


def test_kl_scale_steps() -> None:
    assert [kl_level(x) for x in (0.0, 0.0009, 0.001, 0.05, 0.2, 0.7, 3.0)] == [0, 0, 1, 2, 3, 4, 5]
    assert kl_colour(10.0) == KL_COLOURS[-1]


def test_tools_menu_opens_the_compare_window_and_library_pairs_it(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    win = make_window(qtbot)
    try:
        tools = next(a.menu() for a in win.menuBar().actions() if a.text() == "&Tools")
        entry = next(a for a in tools.actions() if "Compare quantizations" in a.text())
        entry.trigger()
        compare = win.findChild(CompareWindow)
        assert compare is not None and compare.isVisible()
        assert win.findChild(CompareLauncher) is not None
        compare.close()
        a, b = tmp_path / "src.gguf", tmp_path / "src.Q8_0.gguf"
        win.models.compare_requested.emit(a, b)  # the Library's "Compare with the source" after a quantization
        assert compare.isVisible()  # the same window, shown again
        assert (compare.setup.model_a.path, compare.setup.model_b.path) == (str(a), str(b))
    finally:
        close_window(win)


def test_closing_the_window_ends_a_comparison_in_flight(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.support.job_host import ScriptedJobHost

    canned = CannedComparison(n_tokens=2048, hold_after_chunks=1)
    hosts: list[ScriptedJobHost] = []
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    for p in (a, b):
        p.write_bytes(b"GGUF")
    win = make_compare_window(
        lambda: [], lambda: None, lambda: None, lambda _p: None, canned_runner_factory(canned, hosts)
    )
    qtbot.addWidget(win)
    win.prepare()
    win.set_pair(a, b)
    win.show()
    win.setup.passage.setPlainText("text")
    win.setup.start.click()
    qtbot.waitUntil(lambda: len(win.controller.run.tokens) == 255, timeout=WAIT)
    win.close()
    assert hosts[0].killed and not win.controller.running
    assert win.setup.start.isEnabled() and "stopped when its window closed" in win.setup.message.text()
    canned.release.set()


def test_the_chat_shown_and_the_loaded_model_reach_the_compare_window(qtbot, window, window_model: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.support.window import send

    send(qtbot, window, "hello there")
    window.settings_ctl.update(chat_templates=((str(window_model), "{{ messages }}"),))
    entry = next(
        a
        for top in window.menuBar().actions()
        if top.text() == "&Tools"
        for a in top.menu().actions()
        if "Compare" in a.text()
    )
    entry.trigger()
    compare = window.findChild(CompareWindow)
    assert compare is not None
    setup = compare.setup
    assert setup.model_a.path == str(window_model)  # the loaded model comes first, marked ●
    assert setup.model_a.combo.currentText().startswith("● ")
    shown = window.chat.messages_for_engine()  # as the chat's next turn would send it (the system prompt first)
    assert setup.use_chat.isEnabled() and f"{len(shown)} messages" in setup.chat_info.text()
    setup.use_chat.setChecked(True)
    assert setup.model_b.path is None  # no other file of the loaded model in the library: B is the person's to choose
    setup.model_b.set_path(str(window_model))
    choice = setup.choice()
    assert not isinstance(choice, str)
    assert choice.messages == shown and choice.text is None
    assert [(m.role, m.content) for m in shown[-2:-1]] == [(Role.USER, "hello there")]
    assert shown[-1].role == Role.ASSISTANT
    assert choice.chat_template == "{{ messages }}"  # the person's override for model A's file
    compare.close()

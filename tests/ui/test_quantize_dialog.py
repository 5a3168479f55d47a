"""Issue 21 §2, the window: the Library's "Quantize…" and the "Make a quantization" dialog on a scripted job host
(tests/ui_model/test_quantize_real.py runs it on llama.cpp)."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QApplication

from app.core import protocol as P
from app.core.gguf.gguf_info import read_gguf_info
from app.core.quant.plan import plan_quantization
from app.core.quant.types import QuantType
from app.engine.host import EngineDied
from app.ui.common.fmt import format_bytes
from app.ui.quant.quantize_dialog import MIN_WIDTH, SIZING, QuantizeDialog, Sizing
from app.ui.quant.quantize_job import QuantizeJob, part_file
from tests.support.job_host import ScriptedJobHost
from tests.support.models import write_tiny_model
from tests.support.window import close_window, make_window


def _made(req, emit, _cancelled) -> None:  # type: ignore[no-untyped-def]
    """A quantization that writes its .part, reports three tensors, then the whole file."""
    dest = Path(req.dest)
    part_file(dest).write_bytes(b"x" * 300)
    for i in (1, 2, 3):
        emit(P.QuantizeProgress(req.request_id, i, 3, 100 * i, 300, 0.1 * i))
    part_file(dest).unlink()
    write_tiny_model(dest, name="Made Here")
    emit(P.Quantized(req.request_id, str(dest), req.qtype, dest.stat().st_size, 1000, 3, True, 0.3, 2))


def _fallbacks(n: int, chosen: str, given: str) -> tuple[P.FallbackTensor, ...]:
    return tuple(P.FallbackTensor(f"blk.{i}.attn_k.weight", 576, 256, chosen, given) for i in range(n))


#: llama.cpp's dry run of SmolLM2 (tests/engine/test_quantize.py runs it): bytes, BPW, fallback tensors.
_SMOL_DRY_RUN = (
    P.PlannedType(QuantType.Q8_0, 144_811_072, 8.506, 272),
    P.PlannedType(QuantType.Q6_K, 138_382_912, 8.124, 272, _fallbacks(180, "Q6_K", "Q8_0")),
    P.PlannedType(QuantType.Q5_K_M, 112_103_488, 6.561, 272, _fallbacks(180, "Q5_K", "Q5_1")),
    P.PlannedType(QuantType.Q4_K_M, 105_454_144, 6.165, 272, _fallbacks(180, "Q4_K", "Q5_0")),
    P.PlannedType(
        QuantType.Q4_0, 91_726_912, 5.349, 272, (P.FallbackTensor("token_embd.weight", 576, 256, "Q6_K", "Q8_0"),)
    ),
    P.PlannedType(QuantType.Q3_K_M, 93_510_208, 5.455, 272, _fallbacks(180, "Q3_K", "Q4_0")),
    P.PlannedType(
        QuantType.Q2_K, 88_201_792, 5.139, 272, _fallbacks(150, "Q2_K", "Q4_0") + _fallbacks(30, "Q3_K", "Q4_0")
    ),
)


def _dry_run(req, emit, _cancelled) -> None:  # type: ignore[no-untyped-def]
    """The sizing job: llama.cpp's figures for SmolLM2 at once."""
    emit(P.QuantizePlanned(req.request_id, req.source, _SMOL_DRY_RUN, 0.4))


def _sized(script, sizing=_dry_run):  # type: ignore[no-untyped-def]
    """A job script that answers the dialog's PlanQuantize with ``sizing`` and the rest with ``script``."""

    def run(req, emit, cancelled) -> None:  # type: ignore[no-untyped-def]
        (sizing if isinstance(req, P.PlanQuantize) else script)(req, emit, cancelled)

    return run


def _quantizing(hosts: list[ScriptedJobHost]) -> list[ScriptedJobHost]:
    """The hosts that were sent a Quantize (not the sizing's)."""
    return [h for h in hosts if any(isinstance(r, P.Quantize) for r in h.requests)]


def _dialog(qtbot, source: Path, folder: Path, script, sizing=_dry_run, wait=True) -> QuantizeDialog:  # type: ignore[no-untyped-def]
    """The dialog on a scripted job host, shown; ``wait``: until its sizing has answered."""
    dialog = QuantizeDialog(
        plan_quantization([read_gguf_info(source)]),
        folder,
        QuantizeJob(lambda: ScriptedJobHost(_sized(script, sizing))),
    )
    qtbot.addWidget(dialog)
    dialog.show()
    if wait:
        qtbot.waitUntil(lambda: dialog.sizing is not Sizing.SIZING, timeout=10_000)
    return dialog


def test_the_dialog_offers_the_types_with_sizes_and_warns_of_requantization(qtbot, smollm2, tmp_path):
    dialog = _dialog(qtbot, smollm2, tmp_path, _made)
    rows = [dialog.types.topLevelItem(i) for i in range(dialog.types.topLevelItemCount())]
    assert [r.text(0) for r in rows] == [q.value for q in QuantType]
    assert rows[0].text(1) == "138.1 MiB" and rows[0].text(2) == "8.51"  # Q8_0: llama.cpp's dry run's figure
    assert dialog.plan.option(QuantType.Q8_0).expected_bytes == 144_811_072 and rows[-1].text(1) == "84.1 MiB"
    assert dialog.notice.isVisible() and "requantization" in dialog.notice.plain
    assert not dialog.refused_label.isVisible()
    assert dialog.name_edit.text() == "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf"
    dialog.select_type(QuantType.Q2_K)
    assert dialog.name_edit.text() == "SmolLM2-135M-Instruct.Q4_1.Q2_K.gguf"
    dialog.name_edit.textEdited.emit("mine")
    dialog.name_edit.setText("mine")
    dialog.select_type(QuantType.Q4_0)  # a typed name is kept
    assert dialog.destination == tmp_path / "mine.gguf"


def test_a_type_the_source_already_has_is_named_and_not_offered(qtbot, gemma, tmp_path):
    dialog = _dialog(qtbot, gemma, tmp_path, _made)
    offered = {dialog.types.topLevelItem(i).text(0) for i in range(dialog.types.topLevelItemCount())}
    assert "Q4_K_M" not in offered and len(offered) == 6
    assert dialog.refused_label.isVisible() and "already Q4_K_M" in dialog.refused_label.text()


def test_a_quantization_runs_reports_progress_and_offers_the_comparison(qtbot, smollm2, tmp_path):
    dialog = _dialog(qtbot, smollm2, tmp_path, _made)
    statuses: list = []
    dialog.job.progressed.connect(statuses.append)
    with qtbot.waitSignal(dialog.quantized, timeout=10_000) as made:
        dialog.start_button.click()
    dest = tmp_path / "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf"
    assert made.args == [dest] and dest.is_file() and not part_file(dest).exists()
    assert [s.tensors_done for s in statuses] == [1, 2, 3] and statuses[-1].fraction == 1.0
    assert "Tensor 3 of 3" in dialog.status.text()
    assert dialog.message.kind.value == "info" and dest.name in dialog.message.plain
    assert "2 of 3 tensors another type" in dialog.message.plain
    assert dialog.compare_button.isVisible() and dialog.start_button.text() == "Make another"
    with qtbot.waitSignal(dialog.compare_requested, timeout=1000) as compare:
        dialog.compare_button.click()
    assert compare.args == [smollm2, dest]


def test_a_failure_is_shown_in_words_and_a_taken_name_is_refused_before_starting(qtbot, smollm2, tmp_path):
    def fails(req, emit, _cancelled):  # type: ignore[no-untyped-def]
        part_file(Path(req.dest)).write_bytes(b"half")
        emit(P.Failed(req.request_id, P.FailureKind.QUANTIZE, f"The disk holding {tmp_path} is full."))

    dialog = _dialog(qtbot, smollm2, tmp_path, fails)
    taken = tmp_path / dialog.name_edit.text()
    taken.write_bytes(b"mine")
    dialog.start_button.click()
    assert dialog.message.kind.value == "error" and "already exists" in dialog.message.plain
    assert not dialog.job.running and taken.read_bytes() == b"mine"
    dialog.name_edit.setText("other")
    with qtbot.waitSignal(dialog.job.failed, timeout=10_000):
        dialog.start_button.click()
    assert "is full" in dialog.message.plain and dialog.start_button.isVisible()
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken.name]  # the .part is gone


def test_cancel_kills_the_job_and_removes_its_part_file(qtbot, smollm2, tmp_path):
    release = threading.Event()

    def hangs(req, emit, _cancelled):  # type: ignore[no-untyped-def]
        part_file(Path(req.dest)).write_bytes(b"half")
        emit(P.QuantizeProgress(req.request_id, 1, 272, 4, 100, 0.1))
        release.wait(30)  # like llama_model_quantize: never looks at the flag

    hosts: list[ScriptedJobHost] = []

    def make() -> ScriptedJobHost:
        hosts.append(ScriptedJobHost(_sized(hangs)))
        return hosts[-1]

    dialog = QuantizeDialog(plan_quantization([read_gguf_info(smollm2)]), tmp_path, QuantizeJob(make))
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.start_button.click()
    qtbot.waitUntil(lambda: "Tensor 1 of 272" in dialog.status.text(), timeout=10_000)
    assert dialog.cancel_button.isVisible() and not dialog.close_button.isEnabled()
    with qtbot.waitSignal(dialog.job.cancelled, timeout=5000):
        dialog.cancel_button.click()
    release.set()
    assert _quantizing(hosts)[0].killed and list(tmp_path.iterdir()) == []
    assert "Cancelled" in dialog.message.plain and dialog.start_button.isVisible()


def test_the_librarys_quantize_opens_the_dialog_and_selects_the_result(qtbot, smollm2, tmp_path):
    win = make_window(qtbot)
    try:
        models = win.models
        models.quantize_hosts = lambda: ScriptedJobHost(_sized(_made))
        source = write_tiny_model(models.paths.models_dir / "Source-Q4_1.gguf", name="Source", file_type=3)
        tab = models.library_tab
        with qtbot.waitSignal(tab.entries_changed, timeout=10_000):
            tab.refresh()
        assert tab.select_path(source) and tab.quantize_button.isEnabled()
        tab.quantize_button.click()
        dialog = models.findChild(QuantizeDialog)
        assert dialog is not None and dialog.isVisible() and dialog.folder == models.paths.models_dir
        compared: list = []
        models.compare_requested.connect(lambda a, b: compared.append((a, b)))
        dialog.select_type(QuantType.Q4_0)
        with qtbot.waitSignal(tab.entries_changed, timeout=10_000):
            dialog.start_button.click()
        made = models.paths.models_dir / "Source-Q4_1.Q4_0.gguf"
        qtbot.waitUntil(lambda: tab.selected_entry() is not None and tab.selected_entry().path == made, timeout=10_000)
        dialog.compare_button.click()
        assert compared == [(source, made)]
        dialog.close()
    finally:
        close_window(win)


class _LateNews(ScriptedJobHost):
    """A job host whose reader hears of the process's end a little late, as from a real killed process (the
    pipe's EOF, then ``_wait_exitcode``): long enough for a dialog closed at once to be deleted first."""

    def recv_raw(self, timeout: float | None = None) -> object:
        try:
            return super().recv_raw(timeout)
        except EngineDied:
            threading.Event().wait(0.3)
            raise


def _hangs_until(release: threading.Event):  # type: ignore[no-untyped-def]
    """A script like llama_model_quantize: writes its .part, reports a tensor, never looks at the cancel
    flag; its thread ends when ``release`` is set."""

    def script(req, emit, _cancelled) -> None:  # type: ignore[no-untyped-def]
        part_file(Path(req.dest)).write_bytes(b"half")
        emit(P.QuantizeProgress(req.request_id, 1, 272, 4, 100, 0.1))
        release.wait(10)

    return script


def _close_at_once(qtbot, smollm2, tmp_path, monkeypatch, close) -> list[ScriptedJobHost]:  # type: ignore[no-untyped-def]
    """Start a quantization, ``close(dialog)`` as soon as it runs, delete the dialog as the app does
    (WA_DeleteOnClose); returns the hosts once every reader thread of theirs has ended, failing on any
    exception a thread raised (the app shows those as "Something went wrong inside Glassbox")."""
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    hosts: list[ScriptedJobHost] = []
    release = threading.Event()

    def make() -> ScriptedJobHost:
        hosts.append(_LateNews(_sized(_hangs_until(release))))
        return hosts[-1]

    before = set(threading.enumerate())
    dialog = QuantizeDialog(plan_quantization([read_gguf_info(smollm2)]), tmp_path, QuantizeJob(make))
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    gone = threading.Event()
    dialog.destroyed.connect(gone.set)
    dialog.start_button.click()
    qtbot.waitUntil(lambda: "Tensor 1 of 272" in dialog.status.text(), timeout=10_000)
    started = [t for t in threading.enumerate() if t not in before]
    readers = [t for t in started if t.name == "glassbox-engine-reader"]
    close(dialog)
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)  # deleted now, as the event loop would
    qtbot.waitUntil(gone.is_set, timeout=5000)
    release.set()
    for t in started:
        t.join(5)
    assert readers and not any(t.is_alive() for t in started)
    assert raised == []  # before: RuntimeError: Signal source has been deleted (after EngineDied: killed)
    return hosts


def test_closing_a_running_dialog_ends_the_job_quietly(qtbot, smollm2, tmp_path, monkeypatch):
    hosts = _close_at_once(qtbot, smollm2, tmp_path, monkeypatch, lambda d: d.close())  # Close, or the ×
    assert _quantizing(hosts)[0].killed and list(tmp_path.iterdir()) == []  # the process killed, the .part removed


def test_escape_on_a_running_dialog_ends_the_job_quietly_too(qtbot, smollm2, tmp_path, monkeypatch):
    # Escape is QDialog.reject(): Qt 6.3+ closes the dialog from done() without a closeEvent
    hosts = _close_at_once(qtbot, smollm2, tmp_path, monkeypatch, lambda d: qtbot.keyClick(d, Qt.Key.Key_Escape))
    assert _quantizing(hosts)[0].killed and list(tmp_path.iterdir()) == []


def _laid_out_whole(dialog: QuantizeDialog) -> None:
    """Each shown row of the dialog's layout below the one above it and inside the dialog, the type list as
    tall as all its rows, each wrapped message as tall as its text needs, all on a 1366x768 screen."""
    lay = dialog.layout()
    rows = []
    for i in range(lay.count()):
        item = lay.itemAt(i)
        if item.isEmpty() or (item.widget() is not None and not item.widget().isVisible()):
            continue
        rows.append(item.geometry())
    for above, below in itertools.pairwise(rows):
        assert above.bottom() < below.top(), (above, below)
    assert rows[-1].bottom() < dialog.height()
    assert dialog.types.height() >= dialog.types.sizeHint().height()
    last = dialog.types.topLevelItem(dialog.types.topLevelItemCount() - 1)
    assert dialog.types.visualItemRect(last).bottom() < dialog.types.viewport().height()  # Q2_K whole
    for label in (dialog.notice, dialog.type_note, dialog.message):
        if label.isVisible():
            assert label.height() >= label.heightForWidth(label.width()), label.objectName()
    assert dialog.height() <= 768 - 60  # it fits a 1366x768 screen with its title bar


def test_the_dialog_keeps_its_width_and_shows_every_row_whole(qtbot, smollm2, tmp_path):
    release, made = threading.Event(), threading.Event()
    hangs = _hangs_until(release)

    def waits(req, emit, cancelled):  # type: ignore[no-untyped-def]
        _made(req, emit, cancelled) if made.is_set() else hangs(req, emit, cancelled)

    dialog = _dialog(qtbot, smollm2, tmp_path, waits)
    widths = [dialog.width()]
    name = dialog.name_edit
    assert name.fontMetrics().horizontalAdvance(name.text()) < name.contentsRect().width()  # the whole name
    assert name.cursorPosition() == 0
    _laid_out_whole(dialog)
    dialog.select_type(QuantType.Q2_K)
    _laid_out_whole(dialog)
    dialog.start_button.click()
    qtbot.waitUntil(lambda: "Tensor 1 of 272" in dialog.status.text(), timeout=10_000)
    widths.append(dialog.width())
    _laid_out_whole(dialog)
    with qtbot.waitSignal(dialog.job.cancelled, timeout=5000):
        dialog.cancel_button.click()
    widths.append(dialog.width())
    _laid_out_whole(dialog)
    release.set()
    made.set()
    with qtbot.waitSignal(dialog.quantized, timeout=10_000):
        dialog.start_button.click()
    widths.append(dialog.width())
    _laid_out_whole(dialog)
    assert widths == [MIN_WIDTH] * 4  # before: 319, 481 running, 407 done, 319 cancelled


def test_a_name_outside_the_folder_is_refused_and_fallbacks_are_said_before_start(qtbot, smollm2, tmp_path):
    dialog = _dialog(qtbot, smollm2, tmp_path, _made)
    assert not dialog.type_note.isVisible()  # Q8_0: 576-wide rows are whole Q8_0 blocks
    dialog.select_type(QuantType.Q2_K)
    assert dialog.type_note.isVisible()
    assert dialog.type_note.text() == (  # before Start, from llama.cpp's dry run's fallback warnings
        "180 of 272 tensors fall back to Q4_0: their rows of 576 weights are not a whole number of Q2_K or Q3_K "
        "blocks (256 weights), so the file is larger than Q2_K's 2.62 bits per weight suggest."
    )
    for bad in ("../escape", "sub/name.gguf", "..", "a\\b"):
        dialog.name_edit.setText(bad)
        dialog.start_button.click()
        assert dialog.message.kind.value == "error" and "is not a file name" in dialog.message.plain, bad
        assert not dialog.job.running
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent / "escape.gguf").exists()


def test_closing_the_window_ends_a_quantization_in_flight(qtbot, smollm2, tmp_path):
    release = threading.Event()
    hosts: list[ScriptedJobHost] = []

    def make() -> ScriptedJobHost:
        hosts.append(ScriptedJobHost(_sized(_hangs_until(release))))
        return hosts[-1]

    win = make_window(qtbot)
    try:
        win.models.quantize_hosts = make
        dialog = win.models.make_quantization(str(smollm2))
        assert dialog is not None
        dialog.start_button.click()
        qtbot.waitUntil(lambda: "Tensor 1 of 272" in dialog.status.text(), timeout=10_000)
        part = part_file(dialog.destination)
        assert part.exists()
    finally:
        close_window(win)
        release.set()
    assert (
        _quantizing(hosts)[0].killed and not part.exists()
    )  # the dialog closed with the window: killed, .part removed


def test_a_dialog_made_wider_or_narrower_fits_its_height(qtbot, gemma, tmp_path):
    dialog = _dialog(qtbot, gemma, tmp_path, _made)
    dialog.resize(900, dialog.height())
    wide = dialog.height()
    _laid_out_whole(dialog)
    dialog.resize(MIN_WIDTH, dialog.height())
    assert dialog.width() == MIN_WIDTH and dialog.height() > wide  # the notice wraps to more lines
    _laid_out_whole(dialog)


def test_a_long_name_widens_the_dialog_rather_than_overlap_the_folder_button(qtbot, smollm2, tmp_path):
    long_source = tmp_path / "Meta-Llama-3.1-8B-Instruct-abliterated-GGUF-Q4_K_M-imatrix-v2.gguf"
    long_source.symlink_to(smollm2)
    dialog = _dialog(qtbot, long_source, tmp_path, _made)
    name = dialog.name_edit
    assert name.text().startswith("Meta-Llama-3.1-8B") and name.cursorPosition() == 0
    assert name.fontMetrics().horizontalAdvance(name.text()) < name.contentsRect().width()  # whole
    field = name.geometry()
    assert field.right() < dialog.choose_button.geometry().left() and dialog.width() > MIN_WIDTH
    _laid_out_whole(dialog)


def test_the_types_show_at_once_as_sizing_until_llama_cpps_dry_run_answers(qtbot, smollm2, tmp_path):
    release = threading.Event()

    def slow(req, emit, cancelled):  # type: ignore[no-untyped-def]
        release.wait(10)
        _dry_run(req, emit, cancelled)

    dialog = _dialog(qtbot, smollm2, tmp_path, _made, sizing=slow, wait=False)
    rows = [dialog.types.topLevelItem(i) for i in range(dialog.types.topLevelItemCount())]
    assert [r.text(0) for r in rows] == [q.value for q in QuantType]
    assert {r.text(1) for r in rows} == {SIZING} and dialog.sizing is Sizing.SIZING
    dialog.select_type(QuantType.Q2_K)
    assert not dialog.type_note.isVisible()  # nothing said of fallbacks before llama.cpp says
    release.set()
    qtbot.waitUntil(lambda: dialog.sizing is Sizing.EXACT, timeout=10_000)
    assert [r.text(1) for r in rows][-1] == "84.1 MiB" and rows[-1].text(2) == "5.14"
    assert dialog.type_note.isVisible() and dialog.type_note.text().startswith("180 of 272 tensors fall back")
    _laid_out_whole(dialog)


def test_a_failed_sizing_leaves_the_rough_estimates_marked_about(qtbot, smollm2, tmp_path):
    def fails(req, emit, _cancelled):  # type: ignore[no-untyped-def]
        emit(P.Failed(req.request_id, P.FailureKind.QUANTIZE, "llama.cpp could not read it."))

    dialog = _dialog(qtbot, smollm2, tmp_path, _made, sizing=fails)
    assert dialog.sizing is Sizing.ROUGH and "dry run failed (llama.cpp could not read it)." in dialog.caption.text()
    plan = plan_quantization([read_gguf_info(smollm2)])
    rows = [dialog.types.topLevelItem(i) for i in range(dialog.types.topLevelItemCount())]
    for row, o in zip(rows, plan.options, strict=True):
        assert row.text(1) == f"about {format_bytes(o.expected_bytes)}" and row.text(2).startswith("about ")
    dialog.select_type(QuantType.Q2_K)
    assert rows[-1].text(2) == "about 2.63" and not dialog.type_note.isVisible()  # no fallbacks known
    with qtbot.waitSignal(dialog.quantized, timeout=10_000):  # a quantization still runs
        dialog.start_button.click()


def test_a_type_llama_cpp_refuses_is_shown_refused_with_its_reason(qtbot, smollm2, tmp_path):
    refused = P.PlannedType(
        QuantType.Q3_K_M, 0, 0.0, 272, refusal="Q3_K_M: llama.cpp needs an importance matrix for it."
    )

    def sizing(req, emit, _cancelled):  # type: ignore[no-untyped-def]
        options = tuple(refused if o.qtype is QuantType.Q3_K_M else o for o in _SMOL_DRY_RUN)
        emit(P.QuantizePlanned(req.request_id, req.source, options, 0.4))

    dialog = _dialog(qtbot, smollm2, tmp_path, _made, sizing=sizing)
    dialog.select_type(QuantType.Q3_K_M)
    assert dialog.types.currentItem().text(1) == "refused"
    assert "importance matrix" in dialog.type_note.text() and not dialog.start_button.isEnabled()
    dialog.select_type(QuantType.Q2_K)
    assert dialog.start_button.isEnabled()


def test_make_another_returns_to_the_form_without_starting_and_marks_the_types_made(qtbot, smollm2, tmp_path):
    """Review 27 §5 (fix21 §6): "Make another" started a new quantization at once with the type just made
    (failing "already exists"), the error stayed after another type was picked, and made types were not marked."""
    dialog = _dialog(qtbot, smollm2, tmp_path, _made)
    with qtbot.waitSignal(dialog.quantized, timeout=10_000):
        dialog.start_button.click()
    assert dialog.start_button.text() == "Make another" and dialog.compare_button.isVisible()
    dialog.start_button.click()
    assert not dialog.job.running  # nothing started
    assert dialog.start_button.text() == "Start" and not dialog.compare_button.isVisible()
    rows = {dialog.types.topLevelItem(i).text(0) for i in range(dialog.types.topLevelItemCount())}
    assert "Q8_0 · made" in rows and "Q6_K" in rows
    assert dialog.qtype is QuantType.Q6_K and dialog.name_edit.text() == "SmolLM2-135M-Instruct.Q4_1.Q6_K.gguf"
    assert dialog.message.kind.value == "info" and "Made SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf" in dialog.message.plain
    # A taken name is refused in words; choosing another type takes the stale refusal away.
    dialog.select_type(QuantType.Q8_0)
    dialog.start_button.click()
    assert dialog.message.kind.value == "error" and "already exists" in dialog.message.plain
    dialog.select_type(QuantType.Q4_0)
    assert dialog.message.kind is None and not dialog.message.isVisible()


def test_the_finished_message_gives_the_fallback_reason_said_before_start(qtbot, smollm2, tmp_path):
    """Review 27 §7: before Start "1 of 272 tensors falls back to Q8_0: its rows of 576 weights are not a whole
    number of Q6_K blocks"; after, "their rows are not a whole number of Q4_0 blocks" (576 = 18 x 32)."""
    dialog = _dialog(qtbot, smollm2, tmp_path, _made)
    dialog.select_type(QuantType.Q4_0)
    before = dialog.type_note.text()
    assert "Q6_K blocks" in before
    with qtbot.waitSignal(dialog.quantized, timeout=10_000):
        dialog.start_button.click()
    assert before in dialog.message.plain and "Q4_0 blocks" not in dialog.message.plain

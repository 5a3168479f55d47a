"""The Server panel on the window (FakeEngine): off by default, switch, key, LAN choice, log apart from chats."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import replace

from PySide6.QtGui import QGuiApplication

from app.server.schema import Endpoint, parse_request
from app.ui.server.controller import with_chat_template
from app.ui.server.panel import LAN_WARNING


def get(url, key):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def switch_on(win):
    # any free port (0): tests run next to each other
    win.settings_ctl.update(server=replace(win.settings_ctl.settings.server, port=0))
    win.server_panel.enabled.click()


def test_off_by_default_then_on_with_a_generated_key(window):
    panel = window.server_panel
    assert not panel.enabled.isChecked() and not window.server.running and "Off" in panel.address.text()
    assert window.server_dock.isHidden()  # the panel is there to open, not in the way
    switch_on(window)
    key = panel.key.text()
    assert window.server.running and key.startswith("gb-") and window.settings_ctl.settings.server.api_key == key
    assert "http://127.0.0.1:" in panel.address.text() and "this computer only" in panel.address.text()
    panel.copy_key.click()
    assert QGuiApplication.clipboard().text() == key
    status, body = get(f"{window.server.url}/models", key)
    assert status == 200 and [m["id"] for m in body["data"]] == ["Tiny-Chat-Q4_1"]
    panel.enabled.click()
    assert not window.server.running and not window.settings_ctl.settings.server.enabled


def test_new_key_locks_out_the_old_one(window):
    switch_on(window)
    old = window.server_panel.key.text()
    window.server_panel.new_key.click()
    new = window.server_panel.key.text()
    assert new != old and window.server.running
    assert get(f"{window.server.url}/models", old)[0] == 401
    assert get(f"{window.server.url}/models", new)[0] == 200
    window.server_panel.enabled.click()


def test_lan_exposure_is_an_explicit_choice_that_says_what_it_exposes(window):
    panel = window.server_panel
    switch_on(window)
    assert window.server._server.host == "127.0.0.1" and not panel.lan_note.isVisibleTo(panel)
    panel.lan.click()
    assert window.settings_ctl.settings.server.expose_lan and window.server._server.host == "0.0.0.0"
    assert panel.lan_note.isVisibleTo(panel) and panel.lan_note.text() == LAN_WARNING
    assert "every network interface" in panel.address.text()
    for words in ("anyone on your network", "key", "chats, files and settings are not served"):
        assert words in LAN_WARNING
    panel.lan.click()
    assert window.server._server.host == "127.0.0.1"
    panel.enabled.click()


def test_no_model_is_a_503_that_says_so_and_the_log_is_not_a_chat(qtbot, window):
    window.unload_model()
    qtbot.waitUntil(lambda: window.engine.model is None)
    switch_on(window)
    url, key = window.server.url, window.server_panel.key.text()
    req = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps({"messages": [{"role": "user", "content": "hello there"}]}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("expected 503")
    except urllib.error.HTTPError as e:
        assert e.code == 503 and json.loads(e.read())["error"]["code"] == "no_model"
    assert window.server.entries == []  # refused before it reached the engine's queue
    assert all(not window.conversations.chat_history(c.id) for c in window.conversations.list_conversations())
    window.server_panel.enabled.click()


def test_an_api_chat_uses_the_persons_chat_template_override_and_a_completion_does_not(window):
    override = "{% for m in messages %}<<{{ m.role }}>> {{ m.content }}\n{% endfor %}<<assistant>>"
    chat = parse_request({"messages": [{"role": "user", "content": "hi"}]}, Endpoint.CHAT)
    completion = parse_request({"prompt": "hello"}, Endpoint.COMPLETIONS)
    assert with_chat_template(chat.generate, override).chat_template == override
    assert with_chat_template(chat.generate, None).chat_template is None
    assert with_chat_template(completion.generate, override) == completion.generate  # a raw prompt as sent


def test_the_top_bar_says_when_the_engine_answers_api_requests(qtbot, window):
    """The person's chat is idle ("ready") while the engine answers the local API: the top bar says so."""
    label = window.top_bar.state_label
    assert label.full_text == "● ready"
    chat = parse_request({"messages": [{"role": "user", "content": "hi"}]}, Endpoint.CHAT)
    events: list = []
    ticket = window.engine.api.submit(chat.generate, events.append)
    assert label.full_text == "● answering an API request"
    assert window.engine.api.cancel(ticket)
    qtbot.waitUntil(lambda: label.full_text == "● ready", timeout=5000)


def test_the_top_bar_tells_api_requests_answered_from_those_waiting(qtbot, window):
    """Review 25 F9: requests in the engine and requests queued for it are told apart ("answering 4 API
    requests, 1 waiting", not "answering 5 API requests")."""
    label = window.top_bar.state_label
    window.server_panel.parallel.setValue(2)
    window.server_panel.parallel.editingFinished.emit()
    _ids, events = _parallel_in_flight(window, 3)
    assert label.full_text == "● answering 2 API requests, 1 waiting"
    window.engine.resume()
    qtbot.waitUntil(lambda: _ended(events), timeout=10_000)
    qtbot.waitUntil(lambda: label.full_text == "● ready", timeout=5000)


def test_choosing_refuse_is_saved_as_the_policy_and_applied(qtbot, window):
    """The busy policy chosen in the panel is stored as a BusyPolicy (a Qt item's data is plain
    text: it used to break every later settings save and never refuse anything)."""
    import json as json_mod

    from app.core.server_settings import BusyPolicy

    panel = window.server_panel
    panel.busy.setCurrentIndex(panel.busy.findText("Refuse (503) while I am chatting"))
    panel.busy.activated.emit(panel.busy.currentIndex())
    assert window.settings_ctl.settings.server.busy_policy is BusyPolicy.REFUSE
    window.settings_ctl.save_now()
    stored = json_mod.loads(window.paths.settings_file.read_text(encoding="utf-8"))
    assert stored["server"]["busy_policy"] == "refuse"


def test_cancel_request_waits_for_a_selected_request(window):
    """With no request selected "Cancel request" has nothing to cancel: it is off, and says why."""
    panel = window.server_panel
    assert not panel.cancel.isEnabled()
    assert "selected" in panel.cancel.toolTip()
    panel.table.clearSelection()
    assert not panel.cancel.isEnabled()


def _parallel_in_flight(window, n_requests):
    """``n_requests`` API chats sent as parallel sequences, the scripted engine paused (they stay in flight);
    returns their request ids (as the engine's notices carry them) and each one's event list."""
    from app.core import protocol as P

    sent: list = []
    window.engine.request_sent.connect(sent.append)
    window.engine.pause()
    chat = parse_request({"messages": [{"role": "user", "content": "hi"}]}, Endpoint.CHAT)
    events: list[list] = [[] for _ in range(n_requests)]
    for ev_list in events:
        window.engine.api.submit(chat.generate, ev_list.append)
    window.engine.request_sent.disconnect(sent.append)
    ids = [r.request_id for r in sent if isinstance(r, P.GenerateParallel)]
    return ids, events


def _ended(events) -> bool:
    from app.core import protocol as P

    return all(evs and isinstance(evs[-1], (P.Finished, P.Failed)) for evs in events)


def test_parallel_sequences_are_set_in_the_panel_without_a_restart_and_shown_in_flight(qtbot, window):
    """Issue 23 §4: the number is stored and given to the engine client (the server keeps its address);
    the engine's notice becomes one row per sequence, under the parallel context's size and memory."""
    from app.core import protocol as P
    from app.core.server_settings import DEFAULT_PARALLEL

    panel = window.server_panel
    switch_on(window)
    url = window.server.url
    # One at a time unless the person asks for more: N sequences each hold the loaded n_ctx's KV cache.
    assert panel.parallel.value() == DEFAULT_PARALLEL == window.engine.api.parallel == 1
    assert "one at a time" in panel.sequences.summary.text()
    panel.parallel.setValue(4)
    panel.parallel.editingFinished.emit()
    assert "Up to 4 API requests" in panel.sequences.summary.text()
    panel.parallel.setValue(2)
    panel.parallel.editingFinished.emit()
    assert window.settings_ctl.settings.server.parallel == 2 and window.engine.api.parallel == 2
    assert window.server.url == url  # no restart
    ids, events = _parallel_in_flight(window, 2)
    assert len(ids) == 2
    figures = (
        P.SequenceFigures(ids[0], 0, P.SequenceState.DECODING, 30, 30, 12, 21.5),
        P.SequenceFigures(ids[1], 1, P.SequenceState.PREFILL, 40, 16, 0, 0.0),
    )
    window.engine.api.sequences_progressed.emit(P.SequencesProgressed(figures, 2, 4096, 180 << 20, 99 << 20, 17))
    table = panel.sequences.table
    assert table.rowCount() == 2 and table.isVisibleTo(panel)
    cells = [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(2)]
    assert cells[0][0] == "0" and cells[0][1] == "decoding" and cells[0][4] == "30 / 30" and cells[0][2] == "12"
    assert "21" in cells[0][3] and cells[1][1] == "prefill" and cells[1][4] == "16 / 40"
    summary = panel.sequences.summary.text()
    assert "2 sequences × n_ctx 4,096" in summary and "KV cache 180 MiB" in summary and "2 in flight" in summary
    window.engine.api.sequences_progressed.emit(P.SequencesProgressed(figures, 2, 4096, 180 << 20, 99 << 20, 1, True))
    assert "Paused while your reply is written" in panel.sequences.summary.text()
    window.engine.resume()
    qtbot.waitUntil(lambda: _ended(events), timeout=10_000)
    panel.parallel.setValue(1)
    panel.parallel.editingFinished.emit()
    assert window.engine.api.parallel == 1 and not table.isVisibleTo(panel)
    assert "one at a time" in panel.sequences.summary.text()


def test_sequences_leave_the_table_when_they_end_and_the_context_with_the_model(qtbot, window, tiny_model):
    """Review 25 F3: the rows of requests that ended (here by a model switch) go at once, not at the
    engine's next notice (none comes once the last has ended), and the summary no longer gives the old
    model's parallel context (its n_ctx and KV cache) once the model is switched."""
    from app.core import protocol as P

    panel = window.server_panel
    switch_on(window)
    panel.parallel.setValue(4)
    panel.parallel.editingFinished.emit()
    ids, events = _parallel_in_flight(window, 4)
    assert len(ids) == 4
    figures = tuple(P.SequenceFigures(rid, i, P.SequenceState.DECODING, 30, 30, 9, 20.0) for i, rid in enumerate(ids))
    window.engine.api.sequences_progressed.emit(P.SequencesProgressed(figures, 4, 4096, 360 << 20, 99 << 20, 4))
    table = panel.sequences.table
    assert table.rowCount() == 4 and "4 in flight" in panel.sequences.summary.text()
    with qtbot.waitSignal(window.engine.model_loaded, timeout=15_000):
        assert window.load_model(str(tiny_model))
        window.engine.resume()  # the switch stops the sequences; the engine answers them, then loads
    qtbot.waitUntil(lambda: _ended(events), timeout=10_000)
    summary = panel.sequences.summary.text()
    assert table.rowCount() == 0, [table.item(r, 1).text() for r in range(table.rowCount())]
    assert "KV cache" not in summary and "in flight" not in summary
    assert "Up to 4 API requests" in summary and table.isVisibleTo(panel)


def test_setting_one_sequence_mid_flight_keeps_the_running_ones_shown(qtbot, window):
    """Review 25 F4: with sequences running, setting N back to 1 keeps their rows (they finish first,
    decoded together) and the summary says so; the table goes when the last one ends."""
    from app.core import protocol as P

    panel = window.server_panel
    switch_on(window)
    panel.parallel.setValue(2)
    panel.parallel.editingFinished.emit()
    ids, events = _parallel_in_flight(window, 3)  # two sent as sequences, the third queued in the window
    assert len(ids) == 2 and len(window.engine.api.waiting) == 1
    figures = tuple(P.SequenceFigures(rid, i, P.SequenceState.DECODING, 30, 30, 9, 20.0) for i, rid in enumerate(ids))
    window.engine.api.sequences_progressed.emit(P.SequencesProgressed(figures, 2, 4096, 180 << 20, 99 << 20, 2))
    panel.parallel.setValue(1)
    panel.parallel.editingFinished.emit()
    table = panel.sequences.table
    assert window.engine.api.parallel == 1 and table.isVisibleTo(panel) and table.rowCount() == 2
    summary = panel.sequences.summary.text()
    assert "1 from the next request" in summary and "2 in flight" in summary and "finish first" in summary
    assert "the 1 queued then run one at a time" in summary
    window.engine.resume()
    qtbot.waitUntil(lambda: _ended(events), timeout=10_000)
    assert table.rowCount() == 0 and not table.isVisibleTo(panel)
    assert "one at a time in the chat's context" in panel.sequences.summary.text()


def test_the_sequences_sit_right_under_the_address(window):
    """Review 25 F9: at 1366x768 the Server dock is short (under Stats and the Sampler): the sequences in
    flight come right under the address, before the key and the settings, so they are seen without scrolling."""
    panel = window.server_panel
    top = panel.sequences.mapTo(panel, panel.sequences.rect().topLeft()).y()
    assert panel.address.geometry().bottom() <= top < panel.key.mapTo(panel, panel.key.rect().topLeft()).y()

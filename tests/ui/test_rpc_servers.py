"""The Model panel's RPC servers: entering them (with the security warning), checking them,
applying them with a reload, and showing where the layers live and the network cost per token."""

from __future__ import annotations

import socket

from PySide6.QtCore import Qt

from app.core import protocol as P
from app.core.chat.context import GenerationStats, LoadSettings
from app.core.rpc import DevicePlacement
from app.ui.panels.model import ModelPanel
from app.ui.panels.rpc_servers import RpcServersBox, placement_lines, traffic_text
from tests.support.window import WAIT_MS

MIB = 1024 * 1024


def _box(qtbot, available: bool = True) -> RpcServersBox:
    box = RpcServersBox()
    qtbot.addWidget(box)
    box.set_available(available)
    return box


def test_servers_are_typed_as_host_port_and_the_warning_says_there_is_no_authentication(qtbot):
    box = _box(qtbot)
    assert box.servers() == () and not box.warning.isVisibleTo(box)
    edits: list[tuple[str, ...]] = []
    box.edited.connect(lambda: edits.append(box.servers()))
    qtbot.keyClicks(box.field, "10.0.0.2:50052, 10.0.0.3:50052")
    assert box.servers() == ("10.0.0.2:50052", "10.0.0.3:50052")
    assert edits[-1] == box.servers()
    assert box.warning.isVisibleTo(box)
    assert "no authentication" in box.warning.text() and "trust" in box.warning.text()
    assert "no authentication" in box.field.toolTip()
    # A half-typed entry keeps the last valid list and says what is wrong.
    n = len(edits)
    qtbot.keyClicks(box.field, ", 10.0.0.4:")
    assert box.servers() == ("10.0.0.2:50052", "10.0.0.3:50052")
    assert "not host:port" in box.status.text() and len(edits) == n
    box.set_servers(())
    assert box.field.text() == "" and not box.warning.isVisibleTo(box) and box.status.text() == ""


def test_a_build_without_rpc_says_how_to_get_it(qtbot):
    box = _box(qtbot, available=False)
    assert not box.field.isEnabled() and not box.check_btn.isEnabled()
    assert "-DGGML_RPC=ON" in box.status.text()


def test_check_names_an_unreachable_server(qtbot):
    with socket.create_server(("127.0.0.1", 0)) as s:
        dead = f"127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens there
    box = _box(qtbot)
    box.set_servers((dead,))
    qtbot.mouseClick(box.check_btn, Qt.MouseButton.LeftButton)
    assert not box.check_btn.isEnabled()
    qtbot.waitUntil(lambda: box.check_btn.isEnabled(), timeout=WAIT_MS + 5_000)
    assert f"✗ RPC server {dead} cannot be reached" in box.status.text()


def test_placement_and_network_lines():
    placement = (
        DevicePlacement("CPU", "", (), 20 * MIB, 0),
        DevicePlacement("RPC0", "10.0.0.2:50052", tuple(range(31)), 82 * MIB, 90 * MIB),
    )
    assert placement_lines(placement, 30, 83 * MIB) == [
        "CPU: input layer · weights 20.0 MiB",
        "RPC0 (10.0.0.2:50052): layers 0-29, output · weights 82.0 MiB · KV 90.0 MiB",
        "sent to the RPC servers while loading: 83.0 MiB",
    ]
    stats = GenerationStats(
        evaluated_tokens=40,
        llama_n_decode=10,
        rpc_prefill_sent_bytes=30 * 1024,
        rpc_prefill_received_bytes=10 * 1024,
        rpc_decode_sent_bytes=15 * 1024,
        rpc_decode_received_bytes=5 * 1024,
    )
    text = traffic_text(stats)
    assert "prefill 1.0 KiB/token × 40 tokens" in text and "decode 2.0 KiB/token × 10 tokens" in text
    assert traffic_text(GenerationStats(evaluated_tokens=40, llama_n_decode=10)) == ""


def test_the_model_panel_carries_the_servers_in_its_load_settings(qtbot):
    panel = ModelPanel(LoadSettings(rpc_servers=("10.0.0.2:50052",)))
    qtbot.addWidget(panel)
    panel.set_gpu_offload(False, rpc=True)
    assert panel.n_gpu_layers.isEnabled()  # on a CPU-only machine it counts the layers sent to the servers
    assert "RPC servers" in panel.gpu_note.text()
    assert panel.load_settings().rpc_servers == ("10.0.0.2:50052",)
    assert not panel.apply_btn.property("pending")
    edited: list[LoadSettings] = []
    panel.load_settings_edited.connect(edited.append)
    panel.rpc.field.clear()
    qtbot.keyClicks(panel.rpc.field, "10.0.0.9:1")
    assert edited[-1].rpc_servers == ("10.0.0.9:1",)
    assert not panel.apply_btn.isEnabled()  # no model loaded here: nothing to apply the edit to yet
    panel.set_gpu_offload(False, rpc=False)
    assert not panel.n_gpu_layers.isEnabled() and not panel.rpc.field.isEnabled()


def test_the_window_applies_servers_with_a_reload_and_shows_the_cost_per_token(qtbot, window):
    win = window
    win.engine.engine_ready.emit(P.EngineReady("fake", "fake", False, (), rpc=True))
    field = win.model_panel.rpc.field
    assert field.isEnabled()
    qtbot.keyClicks(field, "127.0.0.1:50052")
    assert win.loader.current_load.rpc_servers == ()  # an edit is remembered for the model once applied
    assert "Not applied yet: RPC servers 127.0.0.1:50052" in win.model_panel.memory.text.text()
    n_loads = len(win.engine.sent(P.LoadModel))
    qtbot.mouseClick(win.model_panel.apply_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(win.engine.sent(P.LoadModel)) > n_loads, timeout=WAIT_MS)
    assert win.engine.sent(P.LoadModel)[-1].settings.rpc_servers == ("127.0.0.1:50052",)
    qtbot.waitUntil(
        lambda: win.engine.model is not None and win.engine.model.settings.rpc_servers != (), timeout=WAIT_MS
    )
    assert win.model_panel.load_settings().rpc_servers == ("127.0.0.1:50052",)
    assert win.loader.current_load.rpc_servers == ("127.0.0.1:50052",)  # applied: remembered
    # rpc-server serves one client, the loaded model's engine: Check does not knock on its door.
    qtbot.mouseClick(win.model_panel.rpc.check_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "in use" in win.model_panel.rpc.status.text(), timeout=WAIT_MS)
    assert win.model_panel.rpc.status.text() == "✓ 127.0.0.1:50052: in use by the loaded model"
    stats = GenerationStats(
        evaluated_tokens=10, llama_n_decode=4, rpc_prefill_sent_bytes=10240, rpc_decode_sent_bytes=4096
    )
    win.engine.generation_finished.emit(P.Finished(99, "x", stats))
    assert "prefill 1.0 KiB/token × 10 tokens" in win.model_panel.rpc.traffic.text()


def test_a_remote_engine_starting_does_not_turn_off_this_machines_rpc_backend(qtbot, window):
    """A remote server's EngineReady says nothing of this machine's llama.cpp build: the RPC field
    (and n_gpu_layers) stay as the local engine reported them."""
    from app.core import protocol as P

    window.engine.engine_ready.emit(P.EngineReady("0.3.36", "", gpu_offload=False, rpc=True))
    assert window.model_panel.rpc.field.isEnabled()
    window.engine.engine_ready.emit(P.EngineReady("remote (http://x/v1)", "", gpu_offload=False, remote=True))
    assert window.model_panel.rpc.field.isEnabled() and window.model_panel.n_gpu_layers.isEnabled()


def test_an_engine_that_dies_with_rpc_servers_in_use_names_them(qtbot, window):
    """llama.cpp aborts the engine when an RPC server goes away: the message names the servers
    instead of only blaming the model."""
    from dataclasses import replace

    from app.core.chat.context import ChatMessage
    from app.core.exitinfo import describe_exit
    from app.core.sampling.params import SamplerSettings
    from tests.support.fake_engine import CrashMidReply

    eng = window.engine
    eng.model = replace(eng.model, settings=replace(eng.model.settings, rpc_servers=("127.0.0.1:50391",)))
    eng.script(CrashMidReply((), describe_exit(-6)))  # the engine process ends with SIGABRT
    with qtbot.waitSignal(eng.engine_crashed, timeout=WAIT_MS) as crashed:
        eng.generate((ChatMessage("user", "Hi."),), SamplerSettings())
    text = crashed.args[0]
    assert text.startswith("The engine was killed by SIGABRT") and "127.0.0.1:50391" in text
    assert "goes away" in text

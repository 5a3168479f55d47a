"""A model switch gives the memory back: each load after the first runs in a fresh engine process.

SmolLM2 → Gemma 3 → SmolLM2 in one process left SmolLM2 25-35 MB bigger than at its
first load (bench/model_switch.py); in a fresh process it is the same within 5 MB.
The window cannot tell: the same signals, in the same order, as a load in place.
"""

from __future__ import annotations

from pathlib import Path

from app.core.chat.context import ChatMessage, LoadSettings
from app.core.sampling.params import SamplerSettings
from app.ui.engine.client import EngineClient, EngineState

WAIT_MS = 60_000
RSS_SLACK_KB = 5 * 1024


def vm_rss_kb(pid: int) -> int:
    """Resident memory of ``pid``, KiB (VmRSS in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_switching_back_returns_the_engine_to_the_first_loads_memory(qtbot, smollm2, gemma):
    client = EngineClient()
    seen: list = []
    client.state_changed.connect(lambda s: seen.append(("state", s)))
    for name in ("engine_ready", "model_loaded", "model_load_failed", "engine_crashed"):
        getattr(client, name).connect(lambda *_a, n=name: seen.append(n))
    settings = LoadSettings(n_ctx=2048)
    try:
        with qtbot.waitSignal(client.engine_ready, timeout=WAIT_MS):
            client.start()
        rss: list[tuple[int, int]] = []
        for path in (smollm2, gemma, smollm2):
            with qtbot.waitSignal(client.model_loaded, timeout=WAIT_MS):
                client.load_model(str(path), settings)
            assert client.state == EngineState.READY and client.pid is not None
            qtbot.wait(200)
            rss.append((client.pid, vm_rss_kb(client.pid)))
        (_, first), _, (_, back) = rss
        assert abs(back - first) <= RSS_SLACK_KB, f"SmolLM2: {first} KiB at first, {back} KiB after the switch back"
        assert len({pid for pid, _ in rss}) == 3, "each switch runs in a fresh engine process"
        # The switch is invisible to the window: no DEAD, no STARTING, no second engine_ready.
        loading, ready = ("state", EngineState.LOADING), ("state", EngineState.READY)
        assert seen == [
            ("state", EngineState.STARTING),
            ("state", EngineState.NO_MODEL),
            "engine_ready",
            *[loading, ready, "model_loaded"] * 3,
        ]
        # The new process works.
        with qtbot.waitSignal(client.generation_finished, timeout=WAIT_MS) as done:
            assert client.generate((ChatMessage("user", "Hi"),), SamplerSettings(temperature=0.0, max_tokens=4))
        assert done.args[0].stats.generated_tokens > 0
    finally:
        client.shutdown()


def test_a_switch_during_a_reply_ends_the_reply_then_loads(qtbot, smollm2, gemma):
    client = EngineClient()
    try:
        with qtbot.waitSignal(client.engine_ready, timeout=WAIT_MS):
            client.start()
        with qtbot.waitSignal(client.model_loaded, timeout=WAIT_MS):
            client.load_model(str(smollm2), LoadSettings(n_ctx=2048))
        first_pid = client.pid
        states: list = []
        client.state_changed.connect(states.append)
        at_finish: list = []
        client.generation_finished.connect(lambda _ev: at_finish.append(client.state))
        ask = (ChatMessage("user", "Write the numbers from 1 to 3000, one per line."),)
        with qtbot.waitSignal(client.token_received, timeout=WAIT_MS):
            client.generate(ask, SamplerSettings(temperature=0.0, max_tokens=-1, repeat_penalty=1.0))
        with qtbot.waitSignals([client.generation_finished, client.model_loaded], order="strict", timeout=WAIT_MS):
            client.load_model(str(gemma), LoadSettings(n_ctx=2048))
            assert client.state == EngineState.LOADING
        # LOADING from the switch until the new model is in: never READY with the old one on the way.
        assert states == [EngineState.GENERATING, EngineState.LOADING, EngineState.READY]
        assert at_finish == [EngineState.LOADING], "the old reply's end must not read as ready"
        assert client.pid not in (None, first_pid) and client.model is not None
        assert Path(client.model.info.path) == Path(gemma)
    finally:
        client.shutdown()

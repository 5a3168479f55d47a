"""The scripted engine host keeps faith with the real engine process: behind the same EngineClient, the
same commands give the same signals in the same order, the same states, the same kinds of requests sent.

tests/ui runs the window on the scripted host (FakeEngine: the real client on a
:class:`~tests.support.scripted_host.ScriptedHost`); this is what makes those tests mean
something about the real app.
"""

from __future__ import annotations

import os
import re
import signal

from app.core import protocol as P
from app.core.chat.context import ChatMessage, LoadSettings, StopReason
from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.sampling.params import SamplerSettings
from app.ui.engine.client import EngineClient, EngineState
from tests.support.fake_engine import CrashMidReply, Endless, FakeEngine

WAIT_MS = 60_000
SIGNALS = (
    "engine_ready",
    "model_loaded",
    "model_load_failed",
    "prompt_prepared",
    "prefill_progressed",
    "token_received",
    "generation_finished",
    "generation_failed",
    "engine_crashed",
)
SYSTEM = ChatMessage("system", "You are a helpful assistant.")


def _record(engine: EngineClient) -> tuple[list, list]:
    """(what happened: signal names and ("state", value), collapsing repeats; requests sent)."""
    seen: list = []
    sent: list = []

    def note(item) -> None:
        if not seen or seen[-1] != item or item not in ("token_received", "prefill_progressed"):
            seen.append(item)

    for name in SIGNALS:
        getattr(engine, name).connect(lambda *_a, n=name: note(n))
    engine.state_changed.connect(lambda v: note(("state", v)))
    engine.request_sent.connect(lambda r: sent.append(type(r).__name__))
    return seen, sent


def _drive(qtbot, engine: EngineClient, model, bad, before_long=None, before_bad_load=None) -> list:
    """The same commands on the client with either host; returns the Finished stop reasons.

    ``before_long`` / ``before_bad_load``: the scripted host's script for what the real engine
    does on its own (a reply that runs on; a file llama.cpp refuses).
    """
    reasons = []
    with qtbot.waitSignal(engine.engine_ready, timeout=WAIT_MS):
        engine.start()
    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS):
        engine.load_model(str(model), LoadSettings(n_ctx=512))
    assert engine.state == EngineState.READY and engine.model is not None
    messages = (SYSTEM, ChatMessage("user", "Name three colours."))
    with qtbot.waitSignal(engine.generation_finished, timeout=WAIT_MS) as done:
        assert engine.generate(messages, SamplerSettings(temperature=0.0, max_tokens=4)) is not None
        assert engine.state == EngineState.GENERATING and engine.generating
    reasons.append(done.args[0].stats.stop_reason)
    if before_long:
        before_long()
    long_ask = (SYSTEM, ChatMessage("user", "Write the numbers from 1 to 3000, one per line."))
    with qtbot.waitSignal(engine.token_received, timeout=WAIT_MS):
        engine.generate(long_ask, SamplerSettings(temperature=0.0, max_tokens=-1, repeat_penalty=1.0))
    with qtbot.waitSignal(engine.generation_finished, timeout=WAIT_MS) as done:
        engine.cancel()
    reasons.append(done.args[0].stats.stop_reason)
    engine.reset_context()
    if before_bad_load:
        before_bad_load()
    with qtbot.waitSignal(engine.model_load_failed, timeout=WAIT_MS):
        engine.load_model(str(bad), LoadSettings(n_ctx=512))
    assert engine.model is None and engine.state == EngineState.NO_MODEL
    assert engine.generate(messages, SamplerSettings()) is None  # nothing is sent without a model
    engine.shutdown()
    assert engine.state == EngineState.DEAD and not engine.generating and engine.pid is None
    return reasons


def test_the_fake_engine_answers_like_the_real_one(qtbot, smollm2, tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("shopping list: eggs, milk\n")

    real = EngineClient()
    real_seen, real_sent = _record(real)
    try:
        real_reasons = _drive(qtbot, real, smollm2, bad)
    finally:
        real.shutdown()

    fake = FakeEngine()
    fake_seen, fake_sent = _record(fake)
    fake_reasons = _drive(
        qtbot,
        fake,
        smollm2,
        bad,
        before_long=lambda: fake.script(Endless()),
        before_bad_load=lambda: fake.fail_next_load("notes.gguf is not a GGUF model.", kind=P.FailureKind.BAD_MODEL),
    )

    assert fake_seen == real_seen
    assert fake_sent == real_sent == ["LoadModel", "Generate", "Generate", "ResetContext", "LoadModel"]
    assert fake_reasons == real_reasons == [StopReason.MAX_TOKENS.value, StopReason.CANCELLED.value]


def _crash_mid_reply(qtbot, engine: EngineClient, model, crash) -> str:
    """Load, start a reply that runs on, ``crash()`` once a token arrived; returns the description."""
    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS):
        engine.load_model(str(model), LoadSettings(n_ctx=512))
    long_ask = (SYSTEM, ChatMessage("user", "Write the numbers from 1 to 3000, one per line."))
    with qtbot.waitSignal(engine.token_received, timeout=WAIT_MS):
        engine.generate(long_ask, SamplerSettings(temperature=0.0, max_tokens=-1, repeat_penalty=1.0))
    with qtbot.waitSignal(engine.engine_crashed, timeout=WAIT_MS) as died:
        crash()
    assert engine.state == EngineState.DEAD and engine.model is None and not engine.generating
    assert engine.pid is None
    return died.args[0]


def test_the_fake_engine_crashes_like_the_real_one(qtbot, smollm2):
    real = EngineClient()
    real_seen, _ = _record(real)
    try:
        real.start()
        real_text = _crash_mid_reply(qtbot, real, smollm2, lambda: os.kill(real.pid, signal.SIGKILL))
    finally:
        real.shutdown()

    fake = FakeEngine()
    fake_seen, _ = _record(fake)
    fake.start()
    fake.script(CrashMidReply(("1", "\n", "2"), real_text))
    fake_text = _crash_mid_reply(qtbot, fake, smollm2, lambda: None)
    assert "SIGKILL" in real_text and fake_text == real_text
    assert fake_seen[-2:] == real_seen[-2:] == [("state", EngineState.DEAD.value), "engine_crashed"]
    assert fake_seen[:-2] == real_seen[: len(fake_seen) - 2]


def _load_during_reply(qtbot, engine: EngineClient, model) -> list:
    """Load, start a reply that runs on, load again once a token arrived; returns the states seen
    from that load on (never "ready" between the reply's end and the new model)."""
    with qtbot.waitSignal(engine.engine_ready, timeout=WAIT_MS):
        engine.start()
    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS):
        engine.load_model(str(model), LoadSettings(n_ctx=512))
    long_ask = (SYSTEM, ChatMessage("user", "Write the numbers from 1 to 3000, one per line."))
    with qtbot.waitSignal(engine.token_received, timeout=WAIT_MS):
        engine.generate(long_ask, SamplerSettings(temperature=0.0, max_tokens=-1, repeat_penalty=1.0))
    states: list = []
    engine.state_changed.connect(states.append)
    with qtbot.waitSignal(engine.generation_ended, timeout=WAIT_MS):
        engine.load_model(str(model), LoadSettings(n_ctx=512))
    assert engine.state == EngineState.LOADING and engine.model is None
    assert engine.generate(long_ask, SamplerSettings()) is None  # nothing is sent while loading
    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS):
        pass
    assert engine.state == EngineState.READY
    return list(states)  # a copy: shutting down adds DEAD


def test_a_load_during_a_reply_stays_loading_until_the_model_is_in_on_both(qtbot, smollm2):
    real = EngineClient()
    try:
        real_states = _load_during_reply(qtbot, real, smollm2)
    finally:
        real.shutdown()
    fake = FakeEngine()
    fake.script(Endless())
    try:
        fake_states = _load_during_reply(qtbot, fake, smollm2)
    finally:
        fake.shutdown()
    assert fake_states == real_states == [EngineState.LOADING, EngineState.READY]


def _checks(qtbot, engine: EngineClient, model) -> list[tuple[str, str]]:
    """Check three output formats; returns (answer type, the message's "line N" or part) for each."""
    with qtbot.waitSignal(engine.engine_ready, timeout=WAIT_MS):
        engine.start()
    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS):
        engine.load_model(str(model), LoadSettings(n_ctx=512))
    out = []
    for c in (
        OutputConstraint(ConstraintKind.GBNF, 'root ::= "yes" | "no"'),
        OutputConstraint(ConstraintKind.GBNF, 'root ::= a\na = "x"\n'),
        OutputConstraint(ConstraintKind.JSON_SCHEMA, '{"type": "integer", "minimum": 1}'),
    ):
        with qtbot.waitSignal(engine.constraint_checked, timeout=WAIT_MS) as got:
            assert engine.check_constraint(c) is not None
        ev = got.args[0]
        where = re.search(r"line \d+|'\w+' at \$", getattr(ev, "message", ""))
        out.append((type(ev).__name__, where.group(0) if where else ""))
    engine.shutdown()
    return out


def test_the_fake_engine_checks_output_formats_like_the_real_one(qtbot, smollm2):
    real = EngineClient()
    try:
        real_checks = _checks(qtbot, real, smollm2)
    finally:
        real.shutdown()
    fake_checks = _checks(qtbot, FakeEngine(), smollm2)
    assert fake_checks == real_checks == [("ConstraintChecked", ""), ("Failed", "line 2"), ("Failed", "'minimum' at $")]

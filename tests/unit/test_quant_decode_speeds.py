"""Decode tok/s of the two models of a comparison (issue 21 §1): measured in turns, so that whatever else the
machine does meanwhile slows both alike. Fake models on a shared clock; the real run is in
tests/engine/test_quant_compare.py and tests/ui_model/test_compare_real.py."""

from __future__ import annotations

import pytest

from app.engine.quant.model import decode_speeds


class Machine:
    """A CPU busy with something else for the first ``busy`` decode calls (each then takes 2 s, else 1 s)."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.calls: list[str] = []


class FakeModel:
    def __init__(self, name: str, machine: Machine) -> None:
        self.name, self.machine = name, machine
        self.prompt: list[int] | None = None

    def start_decode(self, prompt: list[int]) -> None:
        self.prompt = list(prompt)

    def decode_next(self) -> float:
        m = self.machine
        m.calls.append(self.name)
        return 2.0 if len(m.calls) <= m.busy else 1.0


@pytest.mark.parametrize("busy", [0, 1, 16, 31, 40])
def test_a_load_during_the_measurement_slows_both_models_alike(busy: int) -> None:
    """The bug: A timed all its tokens first, while the window filled its table after the last chunk, so the
    same file read 26 tok/s as A and 48 as B. Taken in turns, a load of any length lands on both."""
    machine = Machine(busy)
    a, b = FakeModel("A", machine), FakeModel("B", machine)
    speed_a, speed_b = decode_speeds([a, b], [1, 2, 3], 32)  # type: ignore[list-item]
    assert a.prompt == b.prompt == [1, 2, 3]
    assert machine.calls.count("A") == machine.calls.count("B") == 32
    seconds_a, seconds_b = 32 / speed_a, 32 / speed_b
    assert abs(seconds_a - seconds_b) <= 1.0  # at most one token's extra second apart
    assert machine.calls[:4] == ["A", "B", "B", "A"]  # neither always first


def test_no_tokens_asked_measures_nothing() -> None:
    a = FakeModel("A", Machine(0))
    assert decode_speeds([a], [1], 0) == [0.0]  # type: ignore[list-item]
    assert a.prompt is None

"""PersonFirst (app/engine/parallel/gate.py): the person's work goes before the API's parallel steps."""

from __future__ import annotations

import threading
import time

from app.engine.parallel.gate import PersonFirst


def test_a_step_waits_while_the_person_works_and_the_person_waits_only_for_the_step_in_progress():
    gate = PersonFirst()
    order: list[str] = []
    in_step = threading.Event()
    release_step = threading.Event()

    def api() -> None:
        with gate.api_step() as ok:
            assert ok
            order.append("step 1")
            in_step.set()
            release_step.wait(5)
        with gate.api_step() as ok:  # the person asked meanwhile: this step waits for them
            order.append("step 2")

    t = threading.Thread(target=api)
    t.start()
    assert in_step.wait(5)
    person_done = threading.Event()

    def person() -> None:
        with gate.person():
            order.append("person")
        person_done.set()

    p = threading.Thread(target=person)
    p.start()
    deadline = time.monotonic() + 5
    while gate._person == 0 and time.monotonic() < deadline:  # until the person waits for step 1
        time.sleep(0.001)
    assert gate._person == 1 and order == ["step 1"]
    release_step.set()
    t.join(5)
    p.join(5)
    assert person_done.is_set() and order == ["step 1", "person", "step 2"]


def test_a_step_gives_up_after_its_timeout_while_the_person_works():
    gate = PersonFirst()
    with gate.person():
        t0 = time.monotonic()
        with gate.api_step(0.05) as ok:
            assert not ok
        assert time.monotonic() - t0 >= 0.05
    with gate.api_step(0.05) as ok:
        assert ok

"""The first-run starter models show a rough fit verdict for this machine (no network)."""

from __future__ import annotations

from app.core.hardware.fit import SMALL_MODEL_RUNTIME_BYTES, SystemMemory, Verdict, size_verdict
from app.core.models.hub import STARTER_MODELS
from app.ui.models.starter_list import StarterList

GIB = 1024**3


def test_size_verdict_uses_the_fit_thresholds() -> None:
    size = 300 * 1024**2
    need = size + SMALL_MODEL_RUNTIME_BYTES
    assert size_verdict(size, SystemMemory(16 * GIB, 8 * GIB)) == (Verdict.FITS, need)
    assert size_verdict(size, SystemMemory(GIB, int(need / 0.9)))[0] is Verdict.TIGHT
    assert size_verdict(size, SystemMemory(GIB, need - 1))[0] is Verdict.DOES_NOT_FIT


def test_each_starter_row_says_whether_it_fits_this_computer(qtbot) -> None:
    roomy = StarterList(memory=SystemMemory(16 * GIB, 8 * GIB))
    qtbot.addWidget(roomy)
    assert set(roomy.verdicts) == {s.filename for s in STARTER_MODELS}
    assert all(lab.text() == "fits" for lab in roomy.verdicts.values())
    assert "free RAM" in next(iter(roomy.verdicts.values())).toolTip()
    small = StarterList(memory=SystemMemory(GIB, 600 * 1024**2))
    qtbot.addWidget(small)
    assert all(lab.text() == "does not fit" for lab in small.verdicts.values())

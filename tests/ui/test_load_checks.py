"""The window checks a model file with the engine's own check (check_loadable) before loading it."""

from __future__ import annotations

import pytest

from app.core.gguf.gguf_info import MissingSplitParts, check_loadable
from tests.support.models import write_split_model


def _banner_buttons(window) -> list[str]:
    lay = window.banner._actions
    return [lay.itemAt(i).widget().text() for i in range(lay.count()) if lay.itemAt(i).widget()]


# Cases E6 and H5 (docs/field-cases.md).
def test_a_split_model_with_a_missing_part_names_it_and_loads_nothing(qtbot, window, tmp_path):
    parts = write_split_model(tmp_path / "split", "Tiny-Split-Q4_0", 3)
    parts[2].unlink()
    loaded_before = window.engine.model
    assert window.load_model(str(parts[0])) is False
    assert window.banner.isVisible()
    with pytest.raises(MissingSplitParts) as exc:
        check_loadable(parts[0])
    assert window.banner.text.text() == exc.value.message  # one wording, the engine's and the window's
    assert parts[2].name in window.banner.text.text()
    assert _banner_buttons(window) == []  # nothing to open instead: the fix is to download the part
    assert window.engine.model is loaded_before

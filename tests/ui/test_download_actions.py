"""app.ui.models.download_actions: the one table from a download's state to its labels, colour and
buttons, and what the Hub tab and the starter list show for each state."""

from __future__ import annotations

from pathlib import Path

from app.core.models.downloads import DownloadState, DownloadStatus
from app.ui.common import palette
from app.ui.models.download_actions import (
    STATE_LOOKS,
    DownloadAction,
    hub_button,
    starter_button,
    state_color,
    state_label,
)


def _status(state: DownloadState, *, done: int = 250, error: str | None = None) -> DownloadStatus:
    return DownloadStatus(
        "id1", "a/r", "sha", "r.gguf", "Q4_0", state, done, 1000, 1e6, 1.0, error, (Path("/x/r.gguf"),), 0, 1
    )


def test_every_state_has_one_look() -> None:
    assert set(STATE_LOOKS) == set(DownloadState)
    assert STATE_LOOKS[DownloadState.DONE].row_actions == (
        DownloadAction.LOAD,
        DownloadAction.SHOW,
        DownloadAction.REMOVE,
    )
    assert STATE_LOOKS[DownloadState.CANCELLED].row_actions == (DownloadAction.REMOVE,)
    for state in (DownloadState.QUEUED, DownloadState.RUNNING, DownloadState.PAUSED, DownloadState.FAILED):
        assert DownloadAction.CANCEL in STATE_LOOKS[state].row_actions, state


def test_state_label_and_colour_say_retrying_for_a_running_download_with_an_error() -> None:
    assert state_label(_status(DownloadState.DONE)) == "done · verified"
    assert state_color(_status(DownloadState.FAILED)) == palette.RED
    running = _status(DownloadState.RUNNING)
    assert (state_label(running), state_color(running)) == ("downloading", palette.ACCENT)
    retrying = _status(DownloadState.RUNNING, error="connection reset; retrying")
    assert (state_label(retrying), state_color(retrying)) == ("retrying", palette.AMBER)


def test_hub_button_per_state(tmp_path: Path) -> None:
    dest = tmp_path / "r.gguf"
    assert hub_button(None, dest) is None  # a plain Download button
    dest.write_bytes(b"x")
    here = hub_button(None, dest)
    assert here is not None and (here.text, here.enabled, here.action) == ("Load", True, DownloadAction.LOAD)
    assert str(dest) in here.tip
    running = hub_button(_status(DownloadState.RUNNING), dest)
    assert running is not None and (running.text, running.enabled, running.action) == ("25%", False, None)
    failed = hub_button(_status(DownloadState.FAILED, error="HTTP 404"), dest)
    assert failed is not None and (failed.text, failed.enabled, failed.tip) == ("Retry", True, "HTTP 404")
    paused = hub_button(_status(DownloadState.PAUSED), dest)
    assert paused is not None and (paused.text, paused.action) == ("Resume", DownloadAction.RESUME)
    assert hub_button(_status(DownloadState.CANCELLED), dest) is None


def test_starter_button_per_state() -> None:
    assert starter_button(_status(DownloadState.QUEUED)) == ("Queued", False)
    assert starter_button(_status(DownloadState.RUNNING, done=420)) == ("42%", False)
    assert starter_button(_status(DownloadState.PAUSED)) == ("Paused", False)
    assert starter_button(_status(DownloadState.FAILED)) == ("Download", True)
    assert starter_button(_status(DownloadState.CANCELLED)) == ("Download", True)
    assert starter_button(_status(DownloadState.DONE)) == ("Downloaded", False)

"""One table from a download's state to what the window shows and offers for it.

The Downloads tab (state label and colour, row buttons), the Hub tab (a file's
Download button) and the first-run starter list (a starter's button) all read
:data:`STATE_LOOKS`; :func:`hub_button` and :func:`starter_button` turn a row of
it and a status into a button's text, enabled flag and action.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from app.core.models.downloads import DownloadState, DownloadStatus
from app.ui.common import palette


class DownloadAction(str, enum.Enum):
    """What a button does to a download (the value is the button's object-name stem)."""

    DOWNLOAD = "download"  #: queue it (or resume a paused or failed one)
    LOAD = "load"  #: load the downloaded model
    SHOW = "show"  #: show the file in the file manager
    PAUSE = "pause"
    RESUME = "resume"
    RETRY = "retry"
    CANCEL = "cancel"  #: stop and delete the partial file
    REMOVE = "remove"  #: forget it (files untouched)


#: The Downloads tab's row buttons, in the order they are laid out: label and tooltip.
ROW_BUTTONS: dict[DownloadAction, tuple[str, str]] = {
    DownloadAction.LOAD: ("Load", "Load this model in the engine"),
    DownloadAction.SHOW: ("Show", "Show the file in the file manager"),
    DownloadAction.PAUSE: ("Pause", "Pause; the partial file is kept, and resuming continues from it"),
    DownloadAction.RESUME: ("Resume", "Continue from where it stopped"),
    DownloadAction.RETRY: ("Retry", "Try again from where it stopped"),
    DownloadAction.CANCEL: ("Cancel", "Stop and delete the partial file"),
    DownloadAction.REMOVE: ("Remove", "Remove from this list (files are not touched)"),
}

PERCENT = "{percent}%"  # a label that shows the progress


@dataclass(frozen=True)
class StateLook:
    """How one :class:`DownloadState` is shown.

    Attributes:
        label: the Downloads tab's State column.
        color: a :mod:`~app.ui.common.palette` colour (hex) for the label and the progress bar.
        row_actions: the Downloads tab's buttons on the row.
        hub_label, hub_action, hub_tip: the Hub tab's button on the file (action None: disabled;
            a tip of None: the status's error).
        starter_label, starter_enabled: the first-run page's button on a starter model.
    """

    label: str
    color: str
    row_actions: tuple[DownloadAction, ...]
    hub_label: str | None
    hub_action: DownloadAction | None
    hub_tip: str | None
    starter_label: str
    starter_enabled: bool


STATE_LOOKS: dict[DownloadState, StateLook] = {
    DownloadState.QUEUED: StateLook(
        "queued",
        palette.MUTED,
        (DownloadAction.PAUSE, DownloadAction.CANCEL),
        "Queued",
        None,
        "Waiting in the download queue (see Downloads).",
        "Queued",
        False,
    ),
    DownloadState.RUNNING: StateLook(
        "downloading",
        palette.ACCENT,
        (DownloadAction.PAUSE, DownloadAction.CANCEL),
        PERCENT,
        None,
        "Downloading (see Downloads).",
        PERCENT,
        False,
    ),
    DownloadState.PAUSED: StateLook(
        "paused",
        palette.AMBER,
        (DownloadAction.RESUME, DownloadAction.CANCEL),
        "Resume",
        DownloadAction.RESUME,
        "Paused; resume the download.",
        "Paused",
        False,
    ),
    DownloadState.FAILED: StateLook(
        "failed",
        palette.RED,
        (DownloadAction.RETRY, DownloadAction.CANCEL),
        "Retry",
        DownloadAction.RETRY,
        None,
        "Download",
        True,
    ),
    DownloadState.CANCELLED: StateLook(
        "cancelled",
        palette.FAINT,
        (DownloadAction.REMOVE,),
        None,  # the file's plain Download button
        None,
        None,
        "Download",
        True,
    ),
    DownloadState.DONE: StateLook(
        "done · verified",
        palette.GREEN,
        (DownloadAction.LOAD, DownloadAction.SHOW, DownloadAction.REMOVE),
        "Load",
        DownloadAction.LOAD,
        None,  # "Downloaded to <dest>; load it."
        "Downloaded",
        False,
    ),
}

RETRYING_LABEL = "retrying"  # a running download that hit an error and tries again
RETRYING_COLOR = palette.AMBER


def state_label(status: DownloadStatus) -> str:
    """The Downloads tab's State column for ``status``."""
    if status.state is DownloadState.RUNNING and status.error:
        return RETRYING_LABEL
    return STATE_LOOKS[status.state].label


def state_color(status: DownloadStatus) -> str:
    """The palette colour (hex) of ``status``'s State column."""
    if status.state is DownloadState.RUNNING and status.error:
        return RETRYING_COLOR
    return STATE_LOOKS[status.state].color


def _label(template: str, status: DownloadStatus) -> str:
    return template.format(percent=int(status.fraction * 100))


@dataclass(frozen=True)
class ButtonLook:
    """A button's text, whether it is enabled, what a click does and its tooltip."""

    text: str
    enabled: bool
    action: DownloadAction | None
    tip: str


def hub_button(status: DownloadStatus | None, dest: Path) -> ButtonLook | None:
    """The Hub tab's button for a file whose download has ``status`` (None: never downloaded).

    Args:
        status: the newest status of the file's download, or None.
        dest: where the file goes (a file already there is offered to load).

    Returns:
        The look, or None for a plain Download button (no download, or a cancelled one).
    """
    load_tip = f"Downloaded to {dest}; load it."
    if status is None:
        return ButtonLook("Load", True, DownloadAction.LOAD, load_tip) if dest.exists() else None
    look = STATE_LOOKS[status.state]
    if look.hub_label is None:
        return None
    if look.hub_action is DownloadAction.LOAD:
        tip = load_tip
    else:
        tip = look.hub_tip if look.hub_tip is not None else (status.error or "The download failed.")
    return ButtonLook(_label(look.hub_label, status), look.hub_action is not None, look.hub_action, tip)


def starter_button(status: DownloadStatus) -> tuple[str, bool]:
    """The first-run page's button on a starter model whose download has ``status``: text and enabled."""
    look = STATE_LOOKS[status.state]
    return _label(look.starter_label, status), look.starter_enabled

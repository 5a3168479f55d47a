"""`open_quantize_dialog`: read a model's header(s), plan its quantizations and show the dialog for it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from app.core.gguf.gguf_info import GGUFError, check_loadable, read_gguf_info
from app.core.quant.plan import plan_quantization
from app.ui.engine.host_link import Host
from app.ui.quant.quantize_dialog import QuantizeDialog
from app.ui.quant.quantize_job import QuantizeJob


def open_quantize_dialog(
    source: Path, folder: Path, parent: QWidget, hosts: Callable[[], Host] | None = None
) -> QuantizeDialog | str:
    """Show a :class:`QuantizeDialog` for ``source`` (deleted when closed), results in ``folder`` by default.

    Args:
        source: the GGUF (the first part of a split model).
        folder: the default folder for the result (the models folder).
        parent: the dialog's parent.
        hosts: makes the job's engine host (None: a real engine process).

    Returns:
        The dialog shown, or, when the source cannot be read, the message saying why (the file named).
    """
    try:
        first = check_loadable(source)
        parts = [first] + [read_gguf_info(p) for p in first.split_paths()[1:]]
    except GGUFError as exc:
        return str(exc)
    except OSError as exc:
        return f"{source} cannot be read ({exc.strerror or exc}). Check that the file is there."
    dialog = QuantizeDialog(plan_quantization(parts), folder, QuantizeJob(hosts), parent)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog

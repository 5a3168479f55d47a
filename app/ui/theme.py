"""Look and feel: Fusion style, a dark palette, and the stylesheet from resources/."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from PySide6.QtGui import QFont, QIcon, QPalette
from PySide6.QtWidgets import QApplication

from app.ui.common import palette
from app.ui.common.palette import qcolor


def resource_path(name: str) -> Path:
    """Path of a runtime asset: from the installed package ``app.resources``, else the checkout's resources/."""
    try:
        p = Path(str(resources.files("app.resources").joinpath(name)))
        if p.exists():
            return p
    except ModuleNotFoundError:
        pass
    return Path(__file__).resolve().parents[2] / "resources" / name


def apply_theme(app: QApplication) -> None:
    """Fusion style, the dark palette built from :mod:`app.ui.common.palette`, the font, the stylesheet and the icon.

    Applying it again is cheap: the style and the stylesheet are set only when they differ (setting
    either polishes every widget alive again, a quarter of a second with a window open).
    """
    if app.style().name().lower() != "fusion":
        app.setStyle("Fusion")
    pal = QPalette()
    c = {
        QPalette.ColorRole.Window: palette.WINDOW,
        QPalette.ColorRole.WindowText: palette.TEXT,
        QPalette.ColorRole.Base: palette.BASE,
        QPalette.ColorRole.AlternateBase: palette.ALTERNATE,
        QPalette.ColorRole.ToolTipBase: palette.TRACK,
        QPalette.ColorRole.ToolTipText: palette.TEXT,
        QPalette.ColorRole.Text: palette.TEXT,
        QPalette.ColorRole.Button: palette.BUTTON,
        QPalette.ColorRole.ButtonText: palette.TEXT,
        QPalette.ColorRole.Highlight: palette.ACCENT,
        QPalette.ColorRole.HighlightedText: palette.WHITE,
        QPalette.ColorRole.Link: palette.LINK,
        QPalette.ColorRole.PlaceholderText: palette.FAINT,
    }
    for role, color in c.items():
        pal.setColor(role, qcolor(color))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, qcolor(palette.DISABLED))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, qcolor(palette.DISABLED))
    app.setPalette(pal)
    font = QFont(app.font())
    font.setPointSizeF(10)
    app.setFont(font)
    qss = resource_path("style.qss")
    if qss.exists() and app.styleSheet() != (text := qss.read_text(encoding="utf-8")):
        app.setStyleSheet(text)
    icon = resource_path("glassbox.svg")
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))

"""Look and feel: Fusion style, a dark palette, and the stylesheet from resources/."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from PySide6.QtGui import QColor, QFont, QIcon, QPalette
from PySide6.QtWidgets import QApplication


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
    app.setStyle("Fusion")
    pal = QPalette()
    c = {
        QPalette.ColorRole.Window: "#17191e",
        QPalette.ColorRole.WindowText: "#e6e9ef",
        QPalette.ColorRole.Base: "#1d2026",
        QPalette.ColorRole.AlternateBase: "#22252c",
        QPalette.ColorRole.ToolTipBase: "#2a2e36",
        QPalette.ColorRole.ToolTipText: "#e6e9ef",
        QPalette.ColorRole.Text: "#e6e9ef",
        QPalette.ColorRole.Button: "#262a32",
        QPalette.ColorRole.ButtonText: "#e6e9ef",
        QPalette.ColorRole.Highlight: "#3b82f6",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#7aa7ff",
        QPalette.ColorRole.PlaceholderText: "#6b7280",
    }
    for role, color in c.items():
        pal.setColor(role, QColor(color))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#5b6170"))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#5b6170"))
    app.setPalette(pal)
    font = QFont(app.font())
    font.setPointSizeF(10)
    app.setFont(font)
    qss = resource_path("style.qss")
    if qss.exists():
        app.setStyleSheet(qss.read_text(encoding="utf-8"))
    icon = resource_path("glassbox.svg")
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))

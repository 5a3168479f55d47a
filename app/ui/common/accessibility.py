"""Accessible names: every actionable widget gets a name a screen reader can read.

Widgets name themselves where they are made (``setAccessibleName``); :func:`name_widgets`
names what is left under a root from what a sighted person sees next to it: the form label
beside it, a label whose buddy it is, its placeholder, its tooltip's first line, or (for
Qt's own helper buttons) what the button does.
"""

from __future__ import annotations

import re

from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QMenuBar,
    QPlainTextEdit,
    QScrollBar,
    QTableView,
    QTextEdit,
    QWidget,
)

ACTIONABLE = (QAbstractButton, QLineEdit, QTextEdit, QPlainTextEdit, QAbstractSlider, QAbstractSpinBox, QComboBox)


def needs_name(w: QWidget) -> bool:
    """An actionable widget (not a scroll bar, not a spin box's or combo box's own line edit)
    with neither an accessible name nor visible text."""
    if not isinstance(w, ACTIONABLE) or isinstance(w, QScrollBar):
        return False
    if isinstance(w, QLineEdit) and isinstance(w.parentWidget(), (QAbstractSpinBox, QComboBox)):
        return False
    text = w.text() if isinstance(w, QAbstractButton) else ""
    return not (w.accessibleName().strip() or text.strip())


def _plain(text: str) -> str:
    text = re.sub(r"<[^>]+>", "", text or "").strip()
    return text.splitlines()[0].strip() if text else ""


def _form_label(w: QWidget) -> str:
    p = w.parentWidget()
    while p is not None:
        lay = p.layout()
        forms = [lay] if isinstance(lay, QFormLayout) else []
        forms += [f for f in p.findChildren(QFormLayout)]
        for form in forms:
            label = form.labelForField(w)
            if isinstance(label, QLabel) and label.text().strip():
                return _plain(label.text())
        if isinstance(p, QAbstractScrollArea):
            break
        p = p.parentWidget()
    return ""


def _buddy_label(w: QWidget, root: QWidget) -> str:
    for label in root.findChildren(QLabel):
        if label.buddy() is w and label.text().strip():
            return _plain(label.text()).replace("&", "")
    return ""


def _qt_helper_name(w: QWidget) -> str:
    parent = w.parentWidget()
    if isinstance(parent, QLineEdit):
        return "Clear"
    if isinstance(parent, QTableView) or w.objectName() == "qt_tableview_cornerbutton":
        return "Select all"
    if isinstance(parent, QMenuBar):
        return "More menus"
    return ""


def derived_name(w: QWidget, root: QWidget) -> str:
    """The name :func:`name_widgets` gives ``w`` ("" when nothing describes it)."""
    placeholder = w.placeholderText() if isinstance(w, (QLineEdit, QPlainTextEdit, QTextEdit)) else ""
    for candidate in (
        _form_label(w),
        _buddy_label(w, root),
        _plain(placeholder),
        _plain(w.toolTip()),
        _qt_helper_name(w),
    ):
        if candidate:
            return candidate
    name = w.objectName()
    return re.sub(r"(?<=[a-z])(?=[A-Z])|_", " ", name).strip().capitalize() if name else ""


def name_widgets(root: QWidget) -> int:
    """Give every actionable widget under ``root`` without a name one (see the module
    docstring). Returns how many were named."""
    named = 0
    for w in root.findChildren(QWidget):
        if needs_name(w):
            name = derived_name(w, root)
            if name:
                w.setAccessibleName(name)
                named += 1
    return named

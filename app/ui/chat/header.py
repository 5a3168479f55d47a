"""A message's header row: its title, its badge, and its action buttons; the actions that do
not fit the row's width wait in a "⋯" menu (never a button with its text elided)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent
from PySide6.QtGui import QAction, QResizeEvent, QShowEvent
from PySide6.QtWidgets import QAbstractButton, QHBoxLayout, QLabel, QMenu, QSizePolicy, QToolButton, QWidget

MORE_TEXT = "⋯"
MORE_NAME = "More actions"


@dataclass
class _Item:
    """Widgets shown together (the branch's "‹ 2/3 ›" is one item) and the buttons the menu offers for them.

    ``priority``: lower is kept on the row longer. ``held``: offered but hidden while a reply
    streams, keeping its place (so nothing moves under the pointer when the reply ends).
    """

    widgets: tuple[QWidget, ...]
    entries: tuple[tuple[QAbstractButton, Callable[[], str]], ...]
    priority: int
    offered: bool = True
    held: bool = False
    on_row: bool = True


class MessageHeader(QWidget):
    """The header of a :class:`~app.ui.chat.message.MessageWidget`.

    The owner says which actions are offered (:meth:`set_offered`); the header decides which of
    them the row shows, by priority, and puts the others in :attr:`more`'s menu (a QToolButton,
    keyboard reachable, accessible name "More actions"), as chat apps do. The title gives up
    width first (down to its minimum, elided); a button is never narrower than its size hint.

    Its horizontal size policy is Ignored: the row adds nothing to the message's minimum width
    (the message is as wide as the chat column; see MessageWidget).
    """

    SPACING = 4  # px between widgets

    def __init__(self, title: QLabel, badge: QLabel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("msgHeader")
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.title = title
        self.badge = badge
        self._lay = QHBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self._lay.setSpacing(self.SPACING)
        self._lay.addWidget(title)
        self._lay.addWidget(badge)
        self._lay.addStretch(1)
        self._items: list[_Item] = []
        self.more = QToolButton()
        self.more.setObjectName("msgAction")
        self.more.setText(MORE_TEXT)
        self.more.setToolTip(MORE_NAME)
        self.more.setAccessibleName(MORE_NAME)
        self.more.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.more.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        self.menu = QMenu(self.more)
        self.menu.setObjectName("msgMoreMenu")
        self.menu.aboutToShow.connect(self._fill_menu)
        self.more.setMenu(self.menu)
        self.more.hide()
        self._lay.addWidget(self.more)

    # ------------------------------------------------------------------ the owner's side
    def add_item(
        self,
        widgets: tuple[QWidget, ...],
        entries: tuple[tuple[QAbstractButton, Callable[[], str]], ...],
        priority: int,
        offered: bool = True,
    ) -> None:
        """Append an item to the row (display order is the order of calls, before the "⋯" button).

        Args:
            widgets: shown together on the row.
            entries: ``(button, label)`` for each menu entry the item becomes when it does not fit
                (the entry clicks the button; ``label()`` is read when the menu is filled).
            priority: lower stays on the row longer.
            offered: offered now (see :meth:`set_offered`).
        """
        self._items.append(_Item(widgets, entries, priority, offered))
        for w in widgets:
            self._lay.insertWidget(self._lay.indexOf(self.more), w)
        self.refit()

    def _item(self, widget: QWidget) -> _Item:
        for item in self._items:
            if widget in item.widgets:
                return item
        raise KeyError(f"{widget!r} is not on this header")

    def set_offered(self, widget: QWidget, on: bool, *, held: bool = False) -> None:
        """Offer (or withdraw) the item ``widget`` belongs to. ``held``: keep its place on the row
        but show nothing there (a reply streaming: its Edit, Regenerate and Delete come back when it ends).

        Raises:
            KeyError: ``widget`` is on no item of this header.
        """
        item = self._item(widget)
        if (item.offered, item.held) == (on, held and on):
            return
        item.offered, item.held = on, held and on
        self.refit()

    def is_offered(self, widget: QWidget) -> bool:
        """Whether the item ``widget`` belongs to is offered (on the row or in the menu), held or not."""
        return self._item(widget).offered

    def in_menu(self, widget: QWidget) -> bool:
        """Whether the item ``widget`` belongs to is offered from the "⋯" menu (it does not fit the row)."""
        item = self._item(widget)
        return item.offered and not item.held and not item.on_row

    # ------------------------------------------------------------------ fitting
    def _width(self, item: _Item) -> int:
        """px the item takes on the row (its widgets' size hints and the spacing between them)."""
        return sum(w.sizeHint().width() for w in item.widgets) + self.SPACING * (len(item.widgets) - 1)

    def refit(self) -> None:
        """Decide which offered items the row shows (by priority, while they fit its width) and
        which wait in the menu; shows "⋯" when any does. Before the header is shown (a message
        being built) every offered item is put on the row: the fitting waits for a width."""
        offered = [i for i in self._items if i.offered]
        if not self.isVisible() or self.width() <= 0:
            for item in self._items:
                self._place(item, item.offered)
            self.more.setVisible(False)
            if self.menu.actions():
                self.menu.clear()
            return
        lead = self.title.minimumSizeHint().width()
        if not self.badge.isHidden():
            lead += self.badge.sizeHint().width() + self.SPACING
        room = self.width() - lead
        need = sum(self._width(i) + self.SPACING for i in offered)
        if need <= room:
            keep = {id(i) for i in offered}
        else:
            room -= self.more.sizeHint().width() + self.SPACING
            keep = set()
            for item in sorted(offered, key=lambda i: i.priority):
                w = self._width(item) + self.SPACING
                if w <= room:
                    keep.add(id(item))
                    room -= w
        for item in self._items:
            self._place(item, id(item) in keep)
        overflow = any(i.offered and not i.held and not i.on_row for i in self._items)
        self.more.setVisible(overflow)
        if overflow or self.menu.actions():
            self._fill_menu()

    @staticmethod
    def _place(item: _Item, on_row: bool) -> None:
        """Show ``item`` on the row (hidden with its place kept when held) or take it off the row."""
        item.on_row = on_row
        for w in item.widgets:
            policy = w.sizePolicy()
            retain = on_row and item.held
            if policy.retainSizeWhenHidden() != retain:
                policy.setRetainSizeWhenHidden(retain)
                w.setSizePolicy(policy)
            show = on_row and not item.held
            if w.isHidden() == show:
                w.setVisible(show)

    def _fill_menu(self) -> None:
        """The menu's entries: the offered items that are not on the row, in row order."""
        self.menu.clear()
        for item in self._items:
            if not item.offered or item.held or item.on_row:
                continue
            for button, label in item.entries:
                act = QAction(label(), self.menu)
                act.setToolTip(button.toolTip())
                act.setEnabled(button.isEnabled())
                act.setCheckable(button.isCheckable())
                act.setChecked(button.isChecked())
                act.triggered.connect(lambda _checked=False, b=button: b.click())
                self.menu.addAction(act)
        self.menu.setToolTipsVisible(True)

    def menu_entries(self) -> list[QAction]:
        """The menu's entries now (what "⋯" offers), in row order."""
        return [a for a in self.menu.actions() if not a.isSeparator()]

    def menu_buttons(self) -> list[QAbstractButton]:
        """The buttons the menu's entries click, in the order of :meth:`menu_entries`."""
        return [b for i in self._items if i.offered and not i.held and not i.on_row for b, _label in i.entries]

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        if e.size().width() != e.oldSize().width():
            self.refit()

    def showEvent(self, e: QShowEvent) -> None:
        super().showEvent(e)
        self.refit()  # the theme's font and padding apply once shown

    def changeEvent(self, e: QEvent) -> None:
        super().changeEvent(e)
        if e.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self.refit()

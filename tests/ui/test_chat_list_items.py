"""The Chats list's items (issue 20 §3): the title and the second line (when, "● writing a reply…",
a search hit's snippet) are each elided on their own to the item's width, and drawn as two lines."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QStyleOptionViewItem

from app.core.chat.context import Role
from app.core.conversations import ConversationStore
from app.ui.chat.conversations import ConversationsPanel
from app.ui.theme import apply_theme

TITLES = (
    "just a quick question about jupyter notebooks and their kernels",
    "Explain how the KV cache grows with every token in detail",
)
MESSAGES = (
    "How do I restart the jupyter kernel from inside a notebook cell without losing variables?",
    "The KV cache grows with each jupyter token because the keys and values of every layer are kept",
)


def _panel(qtbot, tmp_path, width: int) -> tuple[ConversationsPanel, list[int]]:
    apply_theme(QApplication.instance())
    store = ConversationStore(tmp_path / "chats.sqlite3")
    ids = []
    for title, text in zip(TITLES, MESSAGES, strict=True):
        conv = store.create_conversation(title=title)
        store.add_message(conv, None, Role.USER, text)
        ids.append(conv)
    panel = ConversationsPanel(store)
    qtbot.addWidget(panel)
    panel.resize(width, 400)
    panel.show()
    qtbot.waitUntil(lambda: 0 < panel.list.viewport().width() < width)
    return panel, ids


def _shown(panel: ConversationsPanel, row: int) -> tuple[QStyleOptionViewItem, list[str]]:
    """The item's option as the list draws it, and its lines as drawn."""
    lst = panel.list
    item = lst.item(row)
    option = QStyleOptionViewItem()
    option.initFrom(lst)
    option.rect = lst.visualItemRect(item)
    return option, lst.itemDelegate().shown_text(option, lst.indexFromItem(item)).split("\n")


def _ink_rows(image: QImage, rect: QRect) -> list[int]:
    """The rows of ``rect`` in ``image`` with a pixel much lighter than the item's background (text)."""
    bg = QColor(image.pixel(rect.right() - 2, rect.top() + 2)).lightness()
    rows = []
    for y in range(rect.top(), rect.bottom() + 1):
        if any(QColor(image.pixel(x, y)).lightness() > bg + 60 for x in range(rect.left(), rect.right() + 1)):
            rows.append(y)
    return rows


def test_the_title_and_the_second_line_are_elided_each_on_its_own(qtbot, tmp_path):
    panel, ids = _panel(qtbot, tmp_path, 170)
    panel.set_replying(ids[0])  # the older chat: second in the list
    rows = {panel.list.item(i).data(Qt.ItemDataRole.UserRole): i for i in range(panel.list.count())}
    option, (title, second) = _shown(panel, rows[ids[0]])
    width = option.rect.width()
    assert title.endswith("…") and title.count("…") == 1 and title.startswith("just a quick")
    assert second.startswith("● writ") and second.endswith("…") and second.count("…") == 1
    fm = option.fontMetrics
    assert fm.horizontalAdvance(title) <= width and fm.horizontalAdvance(second) <= width
    # Both lines are drawn: text on two bands of rows, one above the other.
    image = panel.list.viewport().grab().toImage()
    ink = _ink_rows(image, panel.list.visualItemRect(panel.list.item(rows[ids[0]])))
    bands = [y for i, y in enumerate(ink) if i == 0 or ink[i - 1] != y - 1]  # first row of each band
    assert len(bands) == 2, ink
    # Wide enough, nothing is cut.
    panel.resize(900, 400)
    qtbot.waitUntil(lambda: panel.list.viewport().width() > 800)
    _option, lines = _shown(panel, rows[ids[0]])
    assert lines == [TITLES[0], "● writing a reply…"]


def test_two_search_hits_in_different_chats_show_their_own_snippets(qtbot, tmp_path):
    panel, _ids = _panel(qtbot, tmp_path, 200)
    panel.search.setText("jupyter")
    panel.refresh()
    hits = [i for i in range(panel.list.count()) if panel.list.item(i).data(Qt.ItemDataRole.UserRole + 1) is not None]
    assert len(hits) == 2
    shown = [_shown(panel, row)[1] for row in hits]
    assert all(len(lines) == 2 and lines[1].startswith("user: ") for lines in shown), shown
    assert shown[0] != shown[1] and shown[0][1] != shown[1][1]
    # Each snippet shows the word searched for, though it lies past the list's width in the message.
    assert all("jupyter" in lines[1] for lines in shown), shown
    assert {lines[0][:6] for lines in shown} == {"just a", "Explai"}

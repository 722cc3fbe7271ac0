"""Every text a window shows, as data: what ``herd --quit-after N --dump-texts FILE`` writes.

The installed-app test (tests/packaging/test_installed_app.py) starts the app as people do, in
English and in Chinese, and compares the two lists: a text the English window shows and the
Chinese window leaves empty is a translation that went wrong (#37: a blank Chinese window).

Each entry is ``{"where": …, "kind": …, "text": …}``. ``where`` names the widget by its place in
the window (class names and positions, the object name where one is set), so the same widget has
the same ``where`` in both languages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QComboBox,
    QGroupBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QTabBar,
    QWidget,
)

from agent.files import write_json_atomic


def _name(widget: QWidget) -> str:
    """The widget's step in a ``where``: its object name, or its class and position among the
    parent's children of that class."""
    if widget.objectName() and not widget.objectName().startswith("qt_"):
        return widget.objectName()
    cls = type(widget).__name__
    parent = widget.parentWidget()
    if parent is None:
        return cls
    same = [w for w in parent.findChildren(type(widget), options=Qt.FindChildOption.FindDirectChildrenOnly)
            if type(w) is type(widget)]
    return f"{cls}[{same.index(widget) if widget in same else 0}]"


def _where(widget: QWidget, top: QWidget) -> str:
    steps = []
    w: QWidget | None = widget
    while w is not None and w is not top:
        steps.append(_name(w))
        w = w.parentWidget()
    return "/".join([type(top).__name__, *reversed(steps)])


def _menu_texts(menu: QMenu, where: str) -> Iterator[tuple[str, str, str]]:
    for i, action in enumerate(menu.actions()):
        if action.isSeparator() or not action.isVisible():
            continue
        yield f"{where}/action[{i}]", "QAction", action.text()
        if action.menu() is not None:
            yield from _menu_texts(action.menu(), f"{where}/action[{i}]")


def _texts_of(widget: QWidget, where: str) -> Iterator[tuple[str, str, str]]:
    """The (where, kind, text) a single widget shows."""
    kind = type(widget).__name__
    if isinstance(widget, QLabel) and widget.pixmap().isNull() and widget.movie() is None:
        yield where, kind, widget.text()
    elif isinstance(widget, QAbstractButton):
        yield where, kind, widget.text()
    elif isinstance(widget, QGroupBox):
        yield where, kind, widget.title()
    elif isinstance(widget, QTabBar):
        for i in range(widget.count()):
            if widget.isTabVisible(i):
                yield f"{where}#tab[{i}]", kind, widget.tabText(i)
    elif isinstance(widget, QHeaderView) and widget.model() is not None:
        for i in range(widget.count()):
            if not widget.isSectionHidden(i):
                text = widget.model().headerData(i, widget.orientation(), Qt.ItemDataRole.DisplayRole)
                yield f"{where}#section[{i}]", kind, "" if text is None else str(text)
    elif isinstance(widget, QLineEdit):
        yield f"{where}#placeholder", kind, widget.placeholderText()
    elif isinstance(widget, QComboBox):
        for i in range(widget.count()):
            yield f"{where}#item[{i}]", kind, widget.itemText(i)


def visible_texts(window: QWidget) -> list[dict]:
    """The texts ``window`` shows now: its title, its menus and every visible widget's text."""
    found = [(type(window).__name__ + "#title", type(window).__name__, window.windowTitle())]
    if isinstance(window, QMainWindow) and window.menuWidget() is not None:
        bar = window.menuBar()
        for i, action in enumerate(bar.actions()):
            where = f"{type(window).__name__}/menubar/action[{i}]"
            found.append((where, "QAction", action.text()))
            if action.menu() is not None:
                found.extend(_menu_texts(action.menu(), where))
    for widget in window.findChildren(QWidget):
        if widget.isVisible() and not isinstance(widget, QMenu):
            found.extend(_texts_of(widget, _where(widget, window)))
    return [{"where": w, "kind": k, "text": t} for w, k, t in found]


def write_visible_texts(window: QWidget, path: str | Path) -> None:
    """Write :func:`visible_texts` of ``window`` to ``path`` as JSON (atomically)."""
    write_json_atomic(path, visible_texts(window))

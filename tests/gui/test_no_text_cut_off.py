"""No text cut off or overflowing, at 1280×800 and 1600×1000, in English and Chinese (#17).

The window is set up as after a first run: two real agents added and paired, the demo model
open with a split over both. Then every tab is shown, its picture grabbed (so every widget has
been laid out and painted at that size), and every visible widget with text is checked:

* a button, check box or one-line label must get at least the width its text needs
  (``sizeHint``), or its text is cut off;
* a word-wrapped label must get the height its wrapped text needs at its width;
* a tab's title must not be elided.

A failure names the widget and its text, so the string to shorten (or the layout to mend) is
plain.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QTabBar, QWidget

from agent import i18n
from gui.translations import install_translator
from person import add_node_by_address, pair_by_card

pytestmark = pytest.mark.engine

SIZES = [(1280, 800), (1600, 1000)]


def _shown(w: QWidget, top: QWidget) -> bool:
    return w.isVisibleTo(top) and w.width() > 0 and w.height() > 0


def _cut_off(top: QWidget) -> list[str]:
    """Every widget of ``top`` whose text does not fit the room it was given."""
    out = []
    for w in top.findChildren(QWidget):
        if not _shown(w, top):
            continue
        name = f"{type(w).__name__} {w.objectName() or ''}".strip()
        if isinstance(w, QAbstractButton) and w.text():
            need = w.sizeHint().width()
            if need > w.width() + 1:
                out.append(f"{name} {w.text()!r}: needs {need} px, has {w.width()}")
        elif isinstance(w, QLabel) and w.text() and w.pixmap().isNull():
            if w.wordWrap():
                need = w.heightForWidth(w.width())
                if need > w.height() + 1:
                    out.append(f"{name} {w.text()[:60]!r}: needs {need} px high, has {w.height()}")
            else:
                need = w.sizeHint().width()
                if need > w.width() + 1:
                    out.append(f"{name} {w.text()[:60]!r}: needs {need} px, has {w.width()}")
        elif isinstance(w, QTabBar):
            for i in range(w.count()):
                if w.tabRect(i).width() + 1 < w.tabSizeHint(i).width():
                    out.append(f"tab {w.tabText(i)!r}: needs {w.tabSizeHint(i).width()} px, "
                               f"has {w.tabRect(i).width()}")
    return out


def _lay_out(win: QWidget) -> None:
    """Let the layouts catch up with the texts, as the window's next turn of the event loop would.

    A label whose text a status sample changed has asked for a new layout, but that request waits
    in the event queue, and a layout nested in a scroll area is redone only then; measured before,
    the label still has the room its old text got. Each layout done may ask its parent's again,
    so a few rounds."""
    for _ in range(5):
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


@pytest.fixture(params=["en", "zh_CN"])
def lang(request, qapp: QApplication, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    font = qapp.font()
    installed = []
    if request.param != "en":
        installed = install_translator(qapp, request.param)
        # the font a Chinese desktop uses (Debian's fonts-wqy-microhei), for real text widths
        qapp.setFont(QFont("WenQuanYi Micro Hei", font.pointSize()))
    yield request.param
    for t in installed:
        qapp.removeTranslator(t)
    i18n.set_translator(None)
    qapp.setFont(font)


def test_no_text_cut_off(qtbot, lang, make_window, agents, demo_model):
    win = make_window(browse=False)
    for a in agents.agents:
        add_node_by_address(qtbot, win, a.address)
    ours = {a.address: a for a in agents.agents}
    qtbot.waitUntil(lambda: sum(f"{n.host}:{n.api_port}" in ours for n in win.node_map.values()) == 2,
                    timeout=20000)
    for nid, n in list(win.node_map.items()):
        if f"{n.host}:{n.api_port}" in ours:
            pair_by_card(qtbot, win, nid, ours[f"{n.host}:{n.api_port}"].pin)
    qtbot.waitUntil(lambda: len(win.node_status) >= 2, timeout=15000)
    assert win.open_model(str(demo_model))
    qtbot.waitUntil(lambda: len(win.editor.plan().devices()) == 2, timeout=10000)
    qtbot.waitUntil(lambda: all(c.hardware.text() for c in win.nodes.cards.values()), timeout=10000)
    problems = []
    for width, height in SIZES:
        win.resize(width, height)
        for i in range(win.tabs.count()):
            win.tabs.setCurrentIndex(i)
            _lay_out(win)
            assert not win.grab().isNull()  # laid out and painted at this size
            problems += [f"{width}×{height} {win.tabs.tabText(i)}: {p}" for p in _cut_off(win)]
    assert not problems, "\n".join(dict.fromkeys(problems))

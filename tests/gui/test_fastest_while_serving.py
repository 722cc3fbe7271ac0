"""While the cluster serves, *Fastest* is greyed out and the Split tab says why in words beside
it (measuring needs the nodes' workers free), not only in a tooltip; after Stop it is offered
again and the words go."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocumentFragment

pytestmark = pytest.mark.engine


def test_the_reason_fastest_is_greyed_out_is_shown(qtbot, make_window, agents, demo_model, launch_on_both):
    win = make_window(browse=False)
    launch_on_both(win, agents, demo_model)
    qtbot.mouseClick(win.tabs.tabBar(), Qt.MouseButton.LeftButton,
                     pos=win.tabs.tabBar().tabRect(win.tabs.indexOf(win.editor)).center())
    editor = win.editor
    qtbot.waitUntil(lambda: editor.isVisible() and not editor.fastest_button.isEnabled(), timeout=5000)
    assert editor.fastest_why.isVisible()
    assert "Stop the cluster first" in editor.fastest_why.text()
    # the tool tip says the same, as plain text (#32: it is written as escaped rich text)
    assert editor.fastest_why.text() == QTextDocumentFragment.fromHtml(editor.fastest_button.toolTip()).toPlainText()

    qtbot.mouseClick(win.launch.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.session.supervisor is None and editor.fastest_button.isEnabled(), timeout=30000)
    assert not editor.fastest_why.isVisible() and editor.fastest_why.text() == ""

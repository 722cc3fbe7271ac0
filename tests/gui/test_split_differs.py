"""While the cluster serves, a split edited on screen is said to differ from the one running,
with *Relaunch with this split* to use it (#17: Start was greyed out with no word)."""

from __future__ import annotations

import pytest
from person import click
from PySide6.QtCore import QPoint, Qt

pytestmark = pytest.mark.engine


def _drag(qtbot, bar, start: QPoint, end: QPoint) -> None:
    qtbot.mousePress(bar, Qt.MouseButton.LeftButton, pos=start)
    for k in range(1, 6):
        qtbot.mouseMove(bar, QPoint(start.x() + (end.x() - start.x()) * k // 5, start.y()))
    qtbot.mouseRelease(bar, Qt.MouseButton.LeftButton, pos=end)


def test_edit_while_serving_then_relaunch(qtbot, make_window, agents, demo_model, launch_on_both):
    win = make_window(browse=False)
    launch_on_both(win, agents, demo_model)
    ed = win.editor
    assert ed.differs.isHidden()
    bar = win.tabs.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(0).center())
    running = win.launch_flow.running_plan()

    # one slot more on the host: not what runs
    start = ed.bar.handle_pos(0).toPoint()
    _drag(qtbot, ed.bar, start, QPoint(int(ed.bar.slot_x(ed.bar.handle_slot(0) + 1)), start.y()))
    assert ed.plan().host_layers == running.host_layers + 1
    assert not ed.differs.isHidden() and "another split" in ed.differs_label.text()
    assert not win.launch.start_button.isEnabled() and "Relaunch with this split" in win.launch.start_button.toolTip()

    # undo: the same split again, nothing to say
    qtbot.keyClick(ed.bar, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert ed.differs.isHidden()
    qtbot.keyClick(ed.bar, Qt.Key.Key_Right)
    assert not ed.differs.isHidden()
    shown = ed.plan()

    # the states the panel shows from here on: the old launch's end, then the new one's way up
    # (the session's own state is read on another thread, so "ready" alone could be the old one)
    shown_states: list[str] = []
    win.launch.stateChanged.connect(shown_states.append)
    click(qtbot, ed.relaunch_button)
    qtbot.waitUntil(lambda: "stopped" in shown_states
                    and "ready" in shown_states[shown_states.index("stopped"):], timeout=120000)
    assert win.launch_flow.running_plan().host_layers == shown.host_layers
    assert win.launch_flow.layout_of(win.launch_flow.running_plan()) == win.launch_flow.layout_of(ed.plan())
    assert ed.differs.isHidden()
    win.launch_flow.stop()
    qtbot.waitUntil(lambda: win.session.supervisor is None and win.launch.state == "stopped", timeout=30000)

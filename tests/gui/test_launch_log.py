"""The llama-server log shows what matters (#17): the routine lines each poll of /metrics and
/slots makes ("update_slots: all slots are idle", twice a second) appear only with *Show debug
lines*, and the newest line is in view from the start. A real cluster on loopback."""

from __future__ import annotations

import pytest
from person import click

pytestmark = pytest.mark.engine

IDLE = "update_slots: all slots are idle"


def test_routine_lines_hidden_and_newest_in_view(qtbot, make_window, agents, demo_model, launch_on_both):
    win = make_window(browse=False)
    launch_on_both(win, agents, demo_model)
    panel = win.launch
    # herd's own telemetry polls the server: the routine lines pile up in the raw log
    qtbot.waitUntil(lambda: sum(IDLE in x for x in panel._lines) >= 4, timeout=20000)
    shown = panel.log.toPlainText()
    assert IDLE not in shown and "listening on http://127.0.0.1" in shown
    sb = panel.log.verticalScrollBar()
    assert sb.maximum() > 0 and sb.value() == sb.maximum()  # the newest line in view

    click(qtbot, panel.debug_box)
    assert panel.debug_box.isChecked() and IDLE in panel.log.toPlainText()
    assert sb.value() == sb.maximum()
    click(qtbot, panel.debug_box)
    assert IDLE not in panel.log.toPlainText()
    win.launch_flow.stop()
    qtbot.waitUntil(lambda: win.session.supervisor is None and win.launch.state == "stopped", timeout=30000)


def test_the_newest_line_stays_in_view_unless_the_user_scrolls_back(qtbot):
    """The scroll range grows when the text is laid out, after an append: following it on the
    range's signal keeps the last line in view (right after appending, it was one line short)."""
    from gui.widgets.launch_panel import LaunchPanel

    panel = LaunchPanel()
    qtbot.addWidget(panel)
    panel.resize(600, 400)
    panel.show()
    sb = panel.log.verticalScrollBar()
    for i in range(120):
        panel.append_log([f"srv  log line {i}"])
    qtbot.waitUntil(lambda: sb.maximum() > 0)
    qtbot.waitUntil(lambda: sb.value() == sb.maximum(), timeout=2000)
    # the user scrolls back to read: new lines do not pull the view down
    sb.setValue(0)
    panel.append_log(["srv  one more line"])
    qtbot.waitUntil(lambda: "one more line" in panel.log.toPlainText())
    assert sb.value() == 0
    # back at the bottom, it follows again
    sb.setValue(sb.maximum())
    panel.append_log(["srv  and another"])
    qtbot.waitUntil(lambda: sb.value() == sb.maximum() and "and another" in panel.log.toPlainText(), timeout=2000)

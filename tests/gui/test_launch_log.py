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
    qtbot.waitUntil(lambda: win.session.launcher is None and win.launch.state == "stopped", timeout=30000)

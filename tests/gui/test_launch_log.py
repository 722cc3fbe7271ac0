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
    # llama-server's start-up boilerplate: in the raw log, not in the panel
    raw = "\n".join(panel._lines)
    # (the port notice is not printed on every run: the unit test below covers it)
    for noise in ("example_format:", "You are a helpful assistant<|im_end|>"):
        assert noise in raw and noise not in shown, noise
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


# llama-server's start-up lines as b11434 writes them (from a real start, trimmed)
START = ["0.00.129.700 I srv          init: init: chat template, example_format: '<|im_start|>system",
         "You are a helpful assistant<|im_end|>",
         "<|im_start|>user",
         "Hello<|im_end|>",
         "<|im_start|>assistant",
         "'",
         "0.00.129.800 I srv          init: init: chat template, thinking = 0",
         "0.00.129.900 W notice: server default port will be changed to :9931 in a future release "
         "(ref: https://github.com/ggml-org/llama.cpp/pull/26508)",
         "0.00.130.000 I main: server is listening on http://127.0.0.1:8080"]


@pytest.mark.parametrize("cut", [1, 3, 6, 7])
def test_the_example_chat_and_the_port_notice_are_hidden_however_the_lines_arrive(qtbot, cut):
    """The example chat spans several lines, which may come in two batches."""
    from gui.widgets.launch_panel import LaunchPanel

    panel = LaunchPanel()
    qtbot.addWidget(panel)
    panel.resize(600, 400)
    panel.show()
    qtbot.waitExposed(panel)
    panel.begin(10)
    panel.append_log(START[:cut])
    panel.append_log(START[cut:])
    assert panel.log.toPlainText().splitlines() == [START[6], START[8]]
    click(qtbot, panel.debug_box)  # all of it, one tick away
    assert panel.log.toPlainText().splitlines() == START
    click(qtbot, panel.debug_box)
    assert panel.log.toPlainText().splitlines() == [START[6], START[8]]


def test_an_example_without_its_closing_quote_ends_at_the_next_entry(qtbot):
    from gui.widgets.launch_panel import LaunchPanel

    panel = LaunchPanel()
    qtbot.addWidget(panel)
    panel.begin(10)
    panel.append_log(START[:4] + START[6:])
    assert panel.log.toPlainText().splitlines() == [START[6], START[8]]

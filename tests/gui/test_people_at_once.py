"""*People at once* in the app (#34 item 7): the launch panel's box makes the split editor's
memory fit plan a whole context of KV cache per person, and Start gives llama-server ``-np N``
with ``-c`` N times the context; the choice is kept in the settings. Real window (offscreen),
real llama-server with the SmolLM2 weights."""

from __future__ import annotations

import psutil
import pytest
from PySide6.QtCore import Qt

from gui.settings import Settings

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def _kv(win) -> int:
    return sum(f.kv_bytes for f in win.editor.split.fits)


def test_people_at_once_grows_the_planned_cache_and_becomes_np(qtbot, make_window, smollm2, tmp_path):
    win = make_window(browse=False)
    assert win.launch.people.people() is None and win.launch.people.spin.text() == "Auto"
    assert win.open_model(str(smollm2))
    qtbot.waitUntil(lambda: win.editor.plan() is not None, timeout=20000)
    win.editor.ctx.setValue(512)
    qtbot.waitUntil(lambda: _kv(win) > 0, timeout=5000)
    one_context = _kv(win)  # llama-server's default: four people sharing one context
    win.launch.people.spin.setValue(3)
    qtbot.waitUntil(lambda: _kv(win) == 3 * one_context, timeout=5000)
    assert win.workspace.options.people == 3

    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
    assert win.launch.state == "ready", win.launch.status.text()
    argv = psutil.Process(win.session.supervisor.server.pid).cmdline()
    assert argv[argv.index("-np") + 1] == "3" and argv[argv.index("-c") + 1] == str(3 * 512)
    with qtbot.waitSignal(win.launch_flow.stop().done, timeout=30000):
        pass
    win.close()
    assert Settings(str(tmp_path / "herd.ini")).get("server/people") == 3


def test_people_at_once_and_np_in_the_server_options_do_not_go_together(qtbot, make_window):
    win = make_window(browse=False)
    win.workspace.set_options(extra_args=("-np", "2"))
    win.launch.people.spin.setValue(2)
    # the box goes back, and the status bar says what to do
    assert win.launch.people.people() is None and win.workspace.options.people is None
    assert "remove -np and keep people at once" in win.statusBar().currentMessage()

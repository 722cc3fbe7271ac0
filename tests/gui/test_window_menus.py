"""The window's menus as a person uses them: Quit while serving asks first, and Help answers."""

from __future__ import annotations

import pytest
from person import answer_dialog, check, click, use_menu
from PySide6.QtWidgets import QMessageBox


@pytest.mark.engine
def test_quit_while_serving_asks(qtbot, make_window, agents, demo_model, launch_on_both):
    win = make_window(browse=False)
    launch_on_both(win, agents, demo_model)
    server = win.session.supervisor.server

    def cancel(box: QMessageBox) -> None:
        assert "The cluster is serving" in box.text()
        click(qtbot, box.button(QMessageBox.StandardButton.Cancel))

    seen = answer_dialog(qtbot, QMessageBox, cancel)
    use_menu(qtbot, win, win.menus.quit_action)
    check(seen)
    assert win.isVisible() and win.session.supervisor is not None and server.returncode is None

    def stop_and_quit(box: QMessageBox) -> None:
        click(qtbot, next(b for b in box.buttons() if b.text() == "Stop and quit"))

    seen = answer_dialog(qtbot, QMessageBox, stop_and_quit)
    use_menu(qtbot, win, win.menus.quit_action)
    check(seen)
    assert not win.isVisible()
    assert server.returncode is not None  # llama-server was stopped on the way out


def test_help_has_shortcuts_and_troubleshooting(qtbot, tmp_path, monkeypatch):
    from agent.engine_lookup import find_engine
    from gui.app import MainWindow
    from gui.bridge import AsyncBridge
    from gui.session import ClusterSession
    from gui.settings import Settings

    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    bridge = AsyncBridge()
    win = MainWindow(Settings(str(tmp_path / "herd.ini")), bridge=bridge, session=ClusterSession(bridge, browse=False),
                     engine=find_engine(probe=False))
    qtbot.addWidget(win)
    win.show()
    try:
        texts = []

        def read(box: QMessageBox) -> None:
            texts.append(box.text())
            click(qtbot, box.button(QMessageBox.StandardButton.Ok))

        for action, want in ((win.menus.shortcuts_action, "Ctrl+Z / Ctrl+Y"), (win.menus.troubleshooting_action, "herd doctor")):
            seen = answer_dialog(qtbot, QMessageBox, read)
            use_menu(qtbot, win, action)
            check(seen)
            assert want in texts[-1], texts[-1]
    finally:
        win.close()
        bridge.close()

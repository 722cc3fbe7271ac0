"""Serving in the background (#36 item 1): closing the window while the cluster serves offers to
keep serving, stop, or cancel; the answer can be remembered; the tray tells how the cluster is and
offers Open, Stop cluster and Quit; without a tray the window is minimised and says so.

Real window, real demo agents, real llama-server. Two stand-ins, for what the offscreen platform
cannot give: a close event marked spontaneous (it has no window manager whose close button sends
one; the Xvfb test in test_background_serving_x11.py closes a real window), and whether the
desktop has a tray (it has no tray host; ``tray_available`` is set to each answer in turn).
"""

from __future__ import annotations

import httpx
import pytest
from person import answer_dialog, check, click
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QCheckBox, QMessageBox

from gui import background
from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.front_door import DoorSettings, FrontDoor
from gui.widgets.tray import ServingState, ServingTray


class WindowManagerClose(QCloseEvent):
    """Stand-in for the close button of the title bar: the window manager's close is spontaneous
    (the offscreen platform has no window manager to send one)."""

    def spontaneous(self) -> bool:  # noqa: D102
        return True


def close_by_hand(win) -> QCloseEvent:
    event = WindowManagerClose()
    win.closeEvent(event)
    return event


def reply_from(url: str, key: str | None = None) -> str:
    resp = httpx.post(url + "/v1/chat/completions", timeout=120,
                      headers={"Authorization": f"Bearer {key}"} if key else {},
                      json={"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4})
    resp.raise_for_status()
    return resp.json()["choices"][0]["message"]["content"]


def close_by_hand_unasked(win) -> tuple[QCloseEvent, list]:
    """:func:`close_by_hand`, and the questions it asked. A question is modal and runs its own event
    loop inside the close, so a timer armed before it fires within that loop; it records the
    question and cancels it, so that a wrong one fails the test instead of blocking it. (The
    modal widget is asked for directly: walking every top-level widget converts ones Qt made and
    deletes itself, such as the tray's balloon message, into Python objects.)"""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    asked: list[str] = []

    def cancel_question() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            asked.append(box.text())
            box.reject()

    timer = QTimer()
    timer.setSingleShot(True)
    timer.timeout.connect(cancel_question)
    timer.start(200)
    try:
        return close_by_hand(win), asked
    finally:
        timer.stop()


def click_tray(qtbot, tray, action) -> None:
    """Open the tray's menu (where the desktop would, at the icon) and click ``action`` in it."""
    menu = tray.contextMenu()
    menu.popup(QPoint(200, 200))
    qtbot.waitUntil(menu.isVisible, timeout=3000)
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())


@pytest.mark.engine
def test_keep_serving_hides_the_window_and_the_tray_opens_stops_and_quits(
        qtbot, make_window, agents, demo_model, launch_on_both, monkeypatch, tmp_path):
    from conftest import free_port

    monkeypatch.setattr(background, "tray_available", lambda: True)
    win = make_window(browse=False)
    assert win.tray is not None and win.tray.contextMenu() is not None
    launch_on_both(win, agents, demo_model)
    server = win.session.supervisor.server
    url = win.session.server_url

    def cancel(box: QMessageBox) -> None:
        assert {b.text() for b in box.buttons()} == {"Keep serving in the background", "Stop and quit", "Cancel"}
        click(qtbot, box.button(QMessageBox.StandardButton.Cancel))

    seen = answer_dialog(qtbot, QMessageBox, cancel)
    event = close_by_hand(win)
    check(seen)
    assert not event.isAccepted() and win.isVisible() and not win.background.in_background

    def keep_and_remember(box: QMessageBox) -> None:
        box.findChild(QCheckBox).setChecked(True)  # don't ask again
        click(qtbot, next(b for b in box.buttons() if b.text() == "Keep serving in the background"))

    seen = answer_dialog(qtbot, QMessageBox, keep_and_remember)
    event = close_by_hand(win)
    check(seen)
    assert not event.isAccepted() and not win.isVisible() and win.background.in_background
    assert server.returncode is None and reply_from(url)  # llama-server keeps serving
    assert win.settings.get("window/on_close") == "background"
    assert win.background.choice_actions["background"].isChecked()

    # the tray tells what serves, and the rate once a reply finished
    # (samples are shown on the next turn of the event loop: wait for the tool tip itself)
    qtbot.waitUntil(lambda: win.tray.state.serving and "tokens/s" in win.tray.toolTip(), timeout=20000)
    assert win.tray.state.model and f"Serving {win.tray.state.model}" in win.tray.toolTip()
    # who uses it: the front door's count per key, from a real front door before llama-server
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    key = keys.add("kitchen-laptop")
    door = FrontDoor(url, keys, port=free_port(), settings=DoorSettings(require_key_on_loopback=True))
    with qtbot.waitSignal(win.bridge.submit(door.start()).done, timeout=10000):
        pass
    win.session.sharing.door = door  # as a launch with Share on the LAN holds it
    assert "No requests from other apps yet" in win.tray.toolTip()
    reply_from(door.urls[0], key)
    qtbot.waitUntil(lambda: "Used by: kitchen-laptop (1 requests)" in win.tray.toolTip(), timeout=10000)
    win.session.sharing.door = None
    with qtbot.waitSignal(win.bridge.submit(door.stop()).done, timeout=10000):
        pass

    click_tray(qtbot, win.tray, win.tray.open_action)
    qtbot.waitUntil(win.isVisible, timeout=3000)

    # remembered: no question the second time
    event, asked = close_by_hand_unasked(win)
    assert asked == [] and not event.isAccepted() and not win.isVisible()

    click_tray(qtbot, win.tray, win.tray.stop_action)
    qtbot.waitUntil(lambda: win.session.supervisor is None and server.returncode is not None, timeout=30000)
    qtbot.waitUntil(lambda: not win.tray.state.serving, timeout=5000)
    assert "Not serving" in win.tray.toolTip() and not win.tray.stop_action.isEnabled()
    with pytest.raises(httpx.HTTPError):
        reply_from(url)

    click_tray(qtbot, win.tray, win.tray.quit_action)  # not serving: quits without asking
    qtbot.waitUntil(lambda: not win.tray.isVisible(), timeout=5000)
    assert win._closing and not win.isVisible()


@pytest.mark.engine
def test_without_a_tray_the_window_is_minimised_and_says_so(qtbot, make_window, agents, demo_model,
                                                             launch_on_both, monkeypatch):
    monkeypatch.setattr(background, "tray_available", lambda: False)
    win = make_window(browse=False)
    assert win.tray is None
    launch_on_both(win, agents, demo_model)
    server = win.session.supervisor.server

    def keep(box: QMessageBox) -> None:
        assert "This desktop has no system tray" in box.text()
        click(qtbot, next(b for b in box.buttons() if b.text() == "Keep serving in the background"))

    seen = answer_dialog(qtbot, QMessageBox, keep)
    event = close_by_hand(win)
    check(seen)
    assert not event.isAccepted()
    qtbot.waitUntil(win.isMinimized, timeout=3000)
    assert "no system tray" in win.statusBar().currentMessage()
    assert server.returncode is None and reply_from(win.session.server_url)
    assert win.settings.get("window/on_close") == "ask"  # not ticked: asked again next time

    win.bring_to_front()
    seen = answer_dialog(qtbot, QMessageBox, lambda box: click(
        qtbot, next(b for b in box.buttons() if b.text() == "Stop and quit")))
    event = close_by_hand(win)
    check(seen)
    assert event.isAccepted()  # the window closes, and llama-server with it
    qtbot.waitUntil(lambda: server.returncode is not None, timeout=30000)


def test_the_close_choice_is_changed_in_the_cluster_menu(qtbot, make_window):
    """Cluster ▸ When the window is closed while serving keeps the answer; a value the app does
    not know (a hand-edited settings file) means "ask"."""
    win = make_window(browse=False)
    win.background.choice_actions["stop"].trigger()
    assert win.settings.get("window/on_close") == "stop" and win.background.choice() == "stop"
    win.background.choice_actions["ask"].trigger()
    assert win.background.choice() == "ask"
    win.settings.set("window/on_close", "nonsense")  # a hand-edited file
    assert win.background.choice() == "ask"


def test_the_tray_says_what_serves_and_who_uses_it(qtbot, qapp):
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    tray = ServingTray(parent.windowIcon(), parent)
    tray.setToolTip("stopped")
    assert "Not serving (stopped)" in tray.toolTip() and not tray.stop_action.isEnabled()
    tray.show_state(ServingState(serving=True, model="SmolLM2 <b>135M</b>", decode_tps=41.26, replies_now=2,
                                 served={"": 3, "kitchen-laptop": 12}))
    tip = tray.toolTip()
    assert "Serving SmolLM2 &lt;b&gt;135M&lt;/b&gt; · 41.3 tokens/s" in tip  # outside text shown as it is
    assert "Used by: kitchen-laptop (12 requests), this PC (3 requests)" in tip
    assert "replies being written now: 2" in tip
    shown = [a.text() for a in tray.contextMenu().actions() if a.isVisible() and a.text()]
    assert shown[:2] == ["Serving SmolLM2 <b>135M</b> · 41.3 tokens/s",
                         "Used by: kitchen-laptop (12 requests), this PC (3 requests) · replies being written now: 2"]
    assert shown[2:] == ["Open", "Stop cluster", "Quit"] and tray.stop_action.isEnabled()
    with qtbot.waitSignal(tray.stopRequested, timeout=1000):
        tray.stop_action.trigger()

"""Serving in the background on a real X server, in English and Simplified Chinese (#36 item 1).

Run under an X server (``DISPLAY`` set, e.g. Xvfb; ``QT_QPA_PLATFORM=xcb``). For each language
this starts two real ``herd-agent`` processes on loopback, opens the real window, pairs them and
starts the demo's model (real workers and llama-server). Then it closes the window the way a
window manager's close button does (``WM_DELETE_WINDOW`` sent to the window through Xlib),
grabs the question that comes (``LANG-close-choice.png``), answers *Keep serving in the
background*, opens the tray's menu and grabs it (``LANG-tray-menu.png``), and finally clicks
*Open* and then *Stop cluster* in it. It prints one JSON line saying what it saw.

    DISPLAY=:1 QT_QPA_PLATFORM=xcb python scripts/tray_screenshots.py [--lang en zh_CN] [--out docs/screenshots]

Xvfb runs no tray host, so Qt reports no system tray there; the script then treats the
desktop as one that has a tray (``gui.background.tray_available``), so the tray's menu can be
shown and used. The window without a tray is covered by tests/gui/test_background_serving.py.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import ROOT, _pump, _wait, open_window, per_language, qt_app  # noqa: E402

CLIENT_MESSAGE = 33  # X.h


class _ClientMessage(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("message_type", ctypes.c_ulong),
                ("format", ctypes.c_int), ("data", ctypes.c_long * 5)]


class _XEvent(ctypes.Union):
    _fields_ = [("xclient", _ClientMessage), ("pad", ctypes.c_long * 24)]


def close_like_a_window_manager(window_id: int) -> None:
    """Send ``WM_DELETE_WINDOW`` to ``window_id``: what a title bar's close button does."""
    x11 = ctypes.cdll.LoadLibrary(ctypes.util.find_library("X11") or "libX11.so.6")
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    x11.XFlush.argtypes = x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    display = x11.XOpenDisplay(None)
    if not display:
        raise SystemExit("cannot open the X display (is DISPLAY set?)")
    event = _XEvent()
    event.xclient.type = CLIENT_MESSAGE
    event.xclient.window = window_id
    event.xclient.message_type = x11.XInternAtom(display, b"WM_PROTOCOLS", False)
    event.xclient.format = 32
    event.xclient.data[0] = x11.XInternAtom(display, b"WM_DELETE_WINDOW", False)
    x11.XSendEvent(display, window_id, False, 0, ctypes.byref(event))
    x11.XFlush(display)
    x11.XCloseDisplay(display)


def _grab(app, rect, path: Path) -> Path:
    """What the X server shows in ``rect`` (screen coordinates), saved to ``path``."""
    app.primaryScreen().grabWindow(0, rect.x(), rect.y(), rect.width(), rect.height()).save(str(path))
    return path


def _serve(app, win, cluster, model) -> None:
    ours = {f"127.0.0.1:{a.api_port}": a for a in cluster.agents}
    _wait(app, lambda: sum(f"{n.host}:{n.api_port}" in ours for n in win.node_map.values()) == 2, 20, "agents")
    for nid, node in win.node_map.items():
        win.pair_node(nid, ours[f"{node.host}:{node.api_port}"].pin)
    _wait(app, lambda: all(nid in win.node_status for nid in win.node_map), 15, "status")
    win.open_model(str(model))
    _wait(app, lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2, 15, "plan")
    win.editor.ctx.setValue(512)
    win.launch.start_button.click()
    _wait(app, lambda: win.launch.state in ("ready", "failed"), 120, "llama-server")
    if win.launch.state != "ready":
        raise SystemExit("the cluster did not start: " + win.launch.status.text())


def _close_and_keep(app, win, lang: str, out: Path) -> tuple[Path, list[str]]:
    """Close the window as a window manager does, grab the question, keep serving."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMessageBox

    from gui.background import KEEP_SERVING
    seen: dict = {}

    def boxes():
        return [w for w in app.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]

    def answer():  # runs inside the question's own event loop
        if not boxes():
            QTimer.singleShot(50, answer)
            return
        box = boxes()[0]
        _pump(app, 0.5)  # painted on the X server
        seen["shot"] = _grab(app, box.frameGeometry().united(win.frameGeometry()), out / f"{lang}-close-choice.png")
        seen["buttons"] = [b.text() for b in box.buttons()]
        keep = next(b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.AcceptRole)
        keep.click()

    QTimer.singleShot(50, answer)
    close_like_a_window_manager(int(win.winId()))
    _wait(app, lambda: win.background.in_background, 20, "the close question to be answered")
    assert win.background.choice() != KEEP_SERVING  # not ticked: asked again next time
    return seen["shot"], seen["buttons"]


def _tray_menu(app, win, lang: str, out: Path) -> tuple[Path, list[str]]:
    """Open the tray's menu where a tray in the top right corner would, grab it, click Open."""
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtTest import QTest

    import httpx

    menu = win.tray.contextMenu()
    # one reply from another app, so the tray has a decode rate to show
    httpx.post(win.session.server_url + "/v1/chat/completions", timeout=120,
               json={"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 16}).raise_for_status()
    _wait(app, lambda: win.tray.state.serving and win.tray.state.decode_tps is not None, 20,
          "the tray to show the cluster serving")
    screen = app.primaryScreen().geometry()
    menu.popup(QPoint(screen.right() - 20, screen.top() + 10))
    _wait(app, menu.isVisible, 5, "the tray menu")
    _pump(app, 0.5)
    shot = _grab(app, menu.frameGeometry(), out / f"{lang}-tray-menu.png")
    items = [a.text() for a in menu.actions() if a.isVisible() and a.text()]
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(win.tray.open_action).center())
    _wait(app, win.isVisible, 5, "the window to open")
    return shot, items


def render(lang: str, out: Path) -> list[Path]:
    """One real run in ``lang``; prints what it saw as JSON and returns the written PNGs."""
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    tmp = Path(tempfile.mkdtemp(prefix="herd-tray-"))
    os.environ["HERD_CONFIG_DIR"] = str(tmp / "config")  # fresh pairings, not the user's
    sys.path.insert(0, str(ROOT))
    from agent.engine_lookup import find_engine
    from gui import background
    from gui.cluster.demo_cluster import DemoCluster
    from gui.cluster.models.demo_weights import install_demo_weights

    app = qt_app(lang)
    real_tray = background.tray_available()
    background.tray_available = lambda: True  # Xvfb has no tray host (module docstring)
    engine = find_engine(probe=True)
    model = install_demo_weights()
    cluster = DemoCluster(2)
    cluster.start()
    win, bridge = open_window(tmp, engine)
    try:
        win.resize(1000, 640)
        win.show()
        win.start([a.address for a in cluster.agents])
        _serve(app, win, cluster, model)
        server = win.session.supervisor.server
        close_shot, buttons = _close_and_keep(app, win, lang, out)
        hidden_while_serving = not win.isVisible() and server.returncode is None
        menu_shot, items = _tray_menu(app, win, lang, out)
        win.tray.stop_action.trigger()
        _wait(app, lambda: win.session.supervisor is None and server.returncode is not None, 30, "the cluster to stop")
        print(json.dumps({"platform": app.platformName(), "desktop_tray": real_tray, "buttons": buttons,
                          "hidden_while_serving": hidden_while_serving, "tray_items": items,
                          "stopped": server.returncode is not None}, ensure_ascii=False), flush=True)
        return [close_shot, menu_shot]
    finally:
        win.close()
        bridge.close()
        cluster.stop()


def main() -> int:
    return per_language(render, __file__, __doc__)


if __name__ == "__main__":
    sys.exit(main())

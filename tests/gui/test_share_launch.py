"""The app's Start with *Share on the LAN* on (#34) goes through the same front door as
``herd up --lan``: the front door holds the endpoint's port, llama-server listens on loopback at
another port, the window shows the address the door listens on, and the chat keeps working on
the loopback side. Real window, real llama-server with the SmolLM2 weights."""

from __future__ import annotations

import os
import ssl
import stat

import httpx
import psutil
import pytest
from PySide6.QtCore import Qt

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def start_alone(qtbot, win, model) -> None:
    """Open ``model`` on this computer alone (no nodes) and press Start; wait until it serves."""
    assert win.open_model(str(model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None, timeout=20000)
    win.editor.ctx.setValue(512)
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
    assert win.launch.state == "ready", win.launch.status.text()


def test_start_with_sharing_on_serves_through_the_front_door(qtbot, make_window, smollm2):
    win = make_window(browse=False, **{"server/share_lan": True})
    endpoint_port = win.settings.get("server/port")
    dialog = win.menus.open_share_dialog()  # open before Start: it follows the launch
    assert "Press Start" in dialog.status.text() and dialog.port.text() == "—"
    start_alone(qtbot, win, smollm2)

    argv = psutil.Process(win.session.supervisor.server.pid).cmdline()
    server_port = int(argv[argv.index("--port") + 1])
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and server_port != endpoint_port
    door = win.session.sharing.door
    assert door is not None and door.port == endpoint_port
    # the endpoint shown is where the door listens, never llama-server's hidden port
    shown = win.launch.endpoint.text()
    assert shown.endswith(f":{endpoint_port}/v1") and str(server_port) not in shown
    assert win.session.server_url.endswith(f":{server_port}")  # the app's own side stays on loopback

    # a program on this computer uses the endpoint's port, as before
    reply = httpx.post(f"http://127.0.0.1:{endpoint_port}/v1/chat/completions", timeout=60, json={
        "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4, "temperature": 0})
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]
    # …and the Share… dialog shows what a phone app needs
    qtbot.waitUntil(lambda: dialog.port.text() == str(endpoint_port), timeout=10000)
    assert dialog.port.text() == str(endpoint_port) and dialog.switch.isChecked()
    assert dialog.model.text() == httpx.get(win.session.server_url + "/v1/models").json()["data"][0]["id"]
    assert f"http://127.0.0.1:{endpoint_port}" in dialog.addresses.text().splitlines()

    # the chat pane keeps working
    win.chat.max_tokens.setValue(3)
    win.chat.temperature.setValue(0)  # (the same reply every run)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=60000) as sig:
        assert win.chat.send_text("Hello")
    # it ran to the length asked (a chunk is one token or more: a character's bytes come whole)
    stats = sig.args[0]
    assert stats.finish_reason == "length" and 0 < stats.pieces <= 3, win.chat.status.text()

    with qtbot.waitSignal(win.launch_flow.stop().done, timeout=30000):
        pass
    assert win.session.sharing.door is None
    qtbot.waitUntil(lambda: dialog.port.text() == "—", timeout=10000)
    with pytest.raises(httpx.ConnectError):  # Stop closes the door too
        httpx.get(f"http://127.0.0.1:{endpoint_port}/health", timeout=5)


def test_start_with_sharing_off_leaves_llama_server_on_the_endpoint(qtbot, make_window, smollm2):
    win = make_window(browse=False)
    endpoint_port = win.settings.get("server/port")
    start_alone(qtbot, win, smollm2)
    assert win.session.sharing.door is None
    argv = psutil.Process(win.session.supervisor.server.pid).cmdline()
    assert int(argv[argv.index("--port") + 1]) == endpoint_port
    assert win.launch.endpoint.text() == f"http://127.0.0.1:{endpoint_port}/v1"
    with qtbot.waitSignal(win.launch_flow.stop().done, timeout=30000):
        pass


def test_start_with_https_on_serves_https_with_herds_certificate(qtbot, make_window, smollm2, tmp_path):
    win = make_window(browse=False, **{"server/share_lan": True, "server/share_https": True})
    endpoint_port = win.settings.get("server/port")
    start_alone(qtbot, win, smollm2)
    door = win.session.sharing.door
    assert door is not None and door.scheme == "https"
    assert win.launch.endpoint.text().startswith("https://")  # the URL shown is the one that answers
    cert = win.session.sharing.certificate
    assert cert is not None and stat.S_IMODE(os.stat(cert.key_path).st_mode) == 0o600
    pinned = ssl.create_default_context(cafile=str(cert.cert_path))
    reply = httpx.get(f"https://127.0.0.1:{endpoint_port}/v1/models", verify=pinned, timeout=30)
    assert reply.status_code == 200
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):  # not signed by an authority
        httpx.get(f"https://127.0.0.1:{endpoint_port}/v1/models", timeout=30)
    dialog = win.menus.open_share_dialog()
    assert cert.display_fingerprint in dialog.fingerprint.text()
    # the app's own chat stays on llama-server's loopback side, over plain HTTP
    win.chat.max_tokens.setValue(3)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=60000) as sig:
        assert win.chat.send_text("Hello")
    assert sig.args[0].pieces >= 1 and sig.args[0].finish_reason == "length"
    with qtbot.waitSignal(win.launch_flow.stop().done, timeout=30000):
        pass
    assert win.session.sharing.certificate is None

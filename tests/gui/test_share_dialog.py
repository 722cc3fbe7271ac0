"""The *Share…* dialog (#34): the *Share on the LAN* switch (off by default, kept as a setting), what
a phone app needs, and keys made and revoked in the dialog that open — and then no longer open —
a running front door with the key asked of loopback callers too. Real widgets, a real front door
in front of a real llama-server with the SmolLM2 weights, on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import ssl

import httpx
import pytest
from conftest import free_port, llama_server_process
from person import click
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel

from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.door_certificate import door_certificate
from gui.cluster.serving.front_door import DoorSettings, FrontDoor
from gui.cluster.serving.sharing import share_info
from gui.settings import Settings
from gui.widgets.share_dialog import ShareDialog, qr_text


@pytest.fixture
def settings(tmp_path):
    return Settings(str(tmp_path / "herd.ini"))


def test_the_switch_is_off_by_default_and_kept(qtbot, settings, tmp_path):
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    dialog = ShareDialog(settings, keys, lambda: None)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not settings.get("server/share_lan") and not dialog.switch.isChecked()
    assert "Turn on Share on the LAN" in dialog.status.text()
    with qtbot.waitSignal(dialog.sharingChanged) as sig:
        # (on the box itself: a stretched check box's middle may be empty space)
        qtbot.mouseClick(dialog.switch, Qt.MouseButton.LeftButton, pos=QPoint(8, dialog.switch.height() // 2))
    assert sig.args == [True] and settings.get("server/share_lan")
    assert "Press Start" in dialog.status.text()
    again = ShareDialog(Settings(str(tmp_path / "herd.ini")), keys, lambda: None)  # read back from the file
    qtbot.addWidget(again)
    assert again.switch.isChecked()


def test_a_bad_key_name_is_refused_in_words(qtbot, settings, tmp_path):
    dialog = ShareDialog(settings, ApiKeyStore(tmp_path / "api-keys.json"), lambda: None)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.key_name.setText("my phone!")
    click(qtbot, dialog.make_button)
    assert "cannot name a key" in dialog.error.text() and dialog.error.isVisible()
    assert dialog.key_list.count() == 0 and not dialog.new_key.isVisible()


@pytest.fixture(scope="module")
def upstream(engine, smollm2, tmp_path_factory):
    with llama_server_process(engine, smollm2, tmp_path_factory.mktemp("llama"), ctx=1024,
                              extra_args=("--threads", "1")) as url:
        yield url


@pytest.mark.engine
def test_a_key_made_in_the_dialog_opens_the_front_door_until_revoked(qtbot, settings, tmp_path, upstream):
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    door = FrontDoor(upstream, keys, port=free_port(), settings=DoorSettings(require_key_on_loopback=True))
    loop = asyncio.new_event_loop()
    loop.run_until_complete(door.start())
    try:
        served = httpx.get(upstream + "/v1/models", timeout=30).json()["data"][0]["id"]  # as llama-server says
        dialog = ShareDialog(settings, keys, lambda: share_info(door, served))
        qtbot.addWidget(dialog)
        dialog.show()
        # what the phone app needs: the address the door really listens on, its port, the model id
        assert dialog.addresses.text() == f"http://127.0.0.1:{door.port}"
        assert dialog.port.text() == str(door.port) and dialog.model.text() == served

        dialog.key_name.setText("phone")
        with qtbot.waitSignal(dialog.keysChanged):
            click(qtbot, dialog.make_button)
        key = dialog.new_key.text()
        assert key and dialog.new_key.isVisible() and dialog.key_name.text() == ""
        click(qtbot, dialog.copy_button)
        assert QGuiApplication.clipboard().text() == key
        # the QR code holds the base URL and the key: each module as segno makes it for that text
        import segno
        want = [list(r) for r in segno.make(qr_text(door.urls[0], key), error="m").matrix_iter(scale=1, border=4)]
        image = dialog.qr.pixmap().toImage()
        assert dialog.qr.isVisible() and image.width() == len(want) * 4
        got = [[image.pixelColor(x * 4 + 1, y * 4 + 1).lightness() < 128 for x in range(len(want))]
               for y in range(len(want))]
        assert got == [[bool(v) for v in row] for row in want]
        assert [dialog.key_list.item(i).text() for i in range(dialog.key_list.count())] == ["phone"]
        assert key not in (tmp_path / "api-keys.json").read_text()  # only its hash is kept

        def ask(auth: str | None) -> int:
            async def go():
                async with httpx.AsyncClient(timeout=60) as c:
                    headers = {"Authorization": f"Bearer {auth}"} if auth else {}
                    return (await c.get(f"{door.urls[0]}/v1/models", headers=headers)).status_code
            return loop.run_until_complete(go())

        assert ask(None) == 401
        assert ask(key) == 200
        dialog.key_list.setCurrentRow(0)
        with qtbot.waitSignal(dialog.keysChanged):
            click(qtbot, dialog.revoke_button)
        assert dialog.key_list.count() == 0 and not dialog.new_key.isVisible() and not dialog.qr.isVisible()
        assert ask(key) == 401  # the running door takes the revocation at once
    finally:
        loop.run_until_complete(door.stop())
        loop.close()


def test_use_https_is_off_by_default_kept_and_explained(qtbot, settings, tmp_path):
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    dialog = ShareDialog(settings, keys, lambda: None)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not settings.get("server/share_https") and not dialog.https.isChecked()
    with qtbot.waitSignal(dialog.httpsChanged) as sig:
        qtbot.mouseClick(dialog.https, Qt.MouseButton.LeftButton, pos=QPoint(8, dialog.https.height() // 2))
    assert sig.args == [True] and settings.get("server/share_https")
    again = ShareDialog(Settings(str(tmp_path / "herd.ini")), keys, lambda: None)  # read back from the file
    qtbot.addWidget(again)
    assert again.https.isChecked()
    # why plain HTTP is still there, in words the user reads next to the choice
    texts = " ".join(w.text() for w in dialog.findChildren(QLabel))
    assert "see the keys" in texts and "leave HTTPS off" in texts


@pytest.mark.engine
def test_over_https_the_dialog_shows_the_https_url_the_fingerprint_and_a_qr_of_them(qtbot, settings, tmp_path,
                                                                                  upstream):
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    cert = door_certificate([], "test-pc.local", tmp_path)
    door = FrontDoor(upstream, keys, port=free_port(), ssl_context=cert.server_context())
    loop = asyncio.new_event_loop()
    loop.run_until_complete(door.start())
    try:
        dialog = ShareDialog(settings, keys, lambda: share_info(door, "m", cert))
        qtbot.addWidget(dialog)
        dialog.show()
        assert dialog.addresses.text() == f"https://127.0.0.1:{door.port}"
        shown = dialog.fingerprint.text()
        # the fingerprint a client shows: SHA-256 of the certificate it was sent, whole
        # (fetched in a thread while this test's loop runs the door)
        pem = loop.run_until_complete(asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", door.port),
                                                        timeout=10))
        der = ssl.PEM_cert_to_DER_cert(pem)
        sent = hashlib.sha256(der).hexdigest().upper()
        assert ":".join(sent[i:i + 2] for i in range(0, 64, 2)) in shown
        assert str(cert.cert_path) in shown
        dialog.key_name.setText("phone")
        click(qtbot, dialog.make_button)
        key = dialog.new_key.text()
        import segno
        want = [list(r) for r in segno.make(qr_text(door.urls[0], key), error="m").matrix_iter(scale=1, border=4)]
        assert door.urls[0].startswith("https://")
        image = dialog.qr.pixmap().toImage()
        got = [[image.pixelColor(x * 4 + 1, y * 4 + 1).lightness() < 128 for x in range(len(want))]
               for y in range(len(want))]
        assert got == [[bool(v) for v in row] for row in want]
    finally:
        loop.run_until_complete(door.stop())
        loop.close()

    plain = FrontDoor(upstream, keys, port=free_port())  # over HTTP the dialog says what that means
    dialog = ShareDialog(settings, keys, lambda: share_info(plain, "m"))
    qtbot.addWidget(dialog)
    assert "in clear" in dialog.fingerprint.text()

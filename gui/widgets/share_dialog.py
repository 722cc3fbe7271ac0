"""The *Share…* dialog (#34): the *Share on the LAN* switch, what a phone app needs to connect,
and the keys, one per device.

With sharing on, herd's front door holds the endpoint's port and llama-server listens on
loopback only; every device of the home needs a key of its own. The dialog shows the addresses
the front door really listens on (never one it does not), this computer's ``hostname.local``
name, the port and the model id, and makes, lists and revokes keys. A new key is shown once:
only its hash is stored.

*Use HTTPS* (``server/share_https``) has the front door serve TLS with herd's own certificate,
so keys do not cross the LAN in clear; the dialog then shows the ``https://`` addresses and the
certificate's SHA-256 fingerprint for the user to check in the client. Plain HTTP stays the
choice for apps that do not accept a certificate no authority signed.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QImage, QPixmap
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
)

from gui.cluster.serving.api_keys import ApiKeyError, ApiKeyStore
from gui.cluster.serving.sharing import ShareInfo
from gui.widgets.outside_text import PlainLabel, show_plain

SHARE_SETTING = "server/share_lan"
HTTPS_SETTING = "server/share_https"
#: Screen pixels per QR module, and the quiet zone around the code in modules.
QR_SCALE, QR_BORDER = 4, 4


def qr_text(base_url: str, key: str) -> str:
    """What the QR code holds: the base URL an app asks for, then the key, one per line."""
    return f"{base_url}/v1\n{key}"


def qr_image(text: str) -> QImage:
    """``text`` as a QR code (segno, pure Python), one pixel per module with the quiet zone."""
    import segno

    rows = [list(row) for row in segno.make(text, error="m").matrix_iter(scale=1, border=QR_BORDER)]
    image = QImage(len(rows), len(rows), QImage.Format.Format_Grayscale8)
    for y, row in enumerate(rows):
        for x, dark in enumerate(row):
            image.setPixel(x, y, 0xFF000000 if dark else 0xFFFFFFFF)
    return image


class ShareDialog(QDialog):
    """Share the cluster with the other devices of the home (module docstring).

    Args:
        settings: the app's :class:`~gui.settings.Settings` (the switch is ``server/share_lan``,
            *Use HTTPS* ``server/share_https``).
        keys: the :class:`~gui.cluster.serving.api_keys.ApiKeyStore` the front door checks.
        info: returns what a phone app needs while the running cluster is shared, or None.

    Signals:
        sharingChanged(bool): the switch was turned on or off (it takes effect at the next Start).
        httpsChanged(bool): *Use HTTPS* was turned on or off (it takes effect at the next Start).
        keysChanged(): a key was made or revoked (the running front door takes it at once).
    """

    sharingChanged = Signal(bool)
    httpsChanged = Signal(bool)
    keysChanged = Signal()

    def __init__(self, settings, keys: ApiKeyStore, info: Callable[[], ShareInfo | None], parent=None) -> None:
        super().__init__(parent)
        self.settings, self.keys, self._info = settings, keys, info
        self.setWindowTitle(self.tr("Share on the LAN"))
        layout = QVBoxLayout(self)

        self.switch = QCheckBox(self.tr("Share on the LAN"))
        self.switch.setChecked(bool(settings.get(SHARE_SETTING)))
        self.switch.toggled.connect(self._switched)
        layout.addWidget(self.switch)
        layout.addWidget(PlainLabel(self.tr(
            "Phones and other computers of your home can then use the cluster as an OpenAI-compatible "
            "server, each with its own key. It takes effect at the next Start.")))
        layout.addLayout(self._https_choice())

        layout.addWidget(self._connect_box())
        layout.addWidget(self._keys_box())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.refresh()

    # ------------------------------------------------------------ building

    def _https_choice(self) -> QVBoxLayout:
        col = QVBoxLayout()
        self.https = QCheckBox(self.tr("Use HTTPS (herd's own certificate)"))
        self.https.setChecked(bool(self.settings.get(HTTPS_SETTING)))
        self.https.toggled.connect(self._https_switched)
        col.addWidget(self.https)
        # Over plain HTTP every request carries the key in clear (#34 item 8): say so, and why
        # plain HTTP is still offered.
        col.addWidget(PlainLabel(self.tr(
            "Over plain HTTP, anyone on your network who reads its traffic can see the keys and the chats. "
            "With HTTPS they cannot, but the app must accept herd's own certificate: check that the "
            "fingerprint it shows is the one below. Some apps accept no certificate that a public authority "
            "did not sign; for those, leave HTTPS off. It takes effect at the next Start.")))
        return col

    def _connect_box(self) -> QGroupBox:
        box = QGroupBox(self.tr("Connect an app"))
        form = QFormLayout(box)
        self.status = PlainLabel("")
        form.addRow(self.status)
        self.addresses, self.port, self.model, self.fingerprint = QLabel(), QLabel(), QLabel(), QLabel()
        for label in (self.addresses, self.port, self.model, self.fingerprint):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.fingerprint.setWordWrap(True)
        form.addRow(self.tr("Base URL:"), self.addresses)
        form.addRow(self.tr("Port:"), self.port)
        form.addRow(self.tr("Model id:"), self.model)
        form.addRow(self.tr("Certificate (SHA-256):"), self.fingerprint)
        return box

    def _keys_box(self) -> QGroupBox:
        box = QGroupBox(self.tr("Keys, one per device"))
        col = QVBoxLayout(box)
        row = QHBoxLayout()
        self.key_name = QLineEdit()
        self.key_name.setPlaceholderText(self.tr("a name for the device, e.g. phone"))
        self.make_button = QPushButton(self.tr("Make key"))
        self.make_button.clicked.connect(self.make_key)
        self.key_name.returnPressed.connect(self.make_key)
        row.addWidget(self.key_name, 1)
        row.addWidget(self.make_button)
        col.addLayout(row)
        self.error = PlainLabel("")
        self.error.setStyleSheet("color: #d62728")
        col.addWidget(self.error)
        row = QHBoxLayout()
        self.new_key = QLineEdit()
        self.new_key.setReadOnly(True)
        self.copy_button = QPushButton(self.tr("Copy"))
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.new_key.text()))
        row.addWidget(self.new_key, 1)
        row.addWidget(self.copy_button)
        col.addLayout(row)
        self.qr = QLabel()  # base URL and key, for a phone's camera (#34)
        col.addWidget(self.qr, 0, Qt.AlignmentFlag.AlignHCenter)
        self.once_note = PlainLabel(self.tr("Copy this key into the app now: it is shown only once. "
                                            "In the app, it goes where an API key is asked for."))
        col.addWidget(self.once_note)
        self.key_list = QListWidget()
        col.addWidget(self.key_list)
        self.revoke_button = QPushButton(self.tr("Revoke"))
        self.revoke_button.clicked.connect(self.revoke_selected)
        self.key_list.currentRowChanged.connect(lambda _r: self._update_buttons())
        col.addWidget(self.revoke_button)
        self._show_new_key("")
        return box

    # ------------------------------------------------------------ state

    def refresh(self) -> None:
        """Show the endpoint as it is now and the stored keys."""
        info = self._info()
        if info is None:
            if self.switch.isChecked():
                why = self.tr("Not shared now. Press Start (or Stop, then Start) to share the cluster.")
            else:
                why = self.tr("Not shared now. Turn on Share on the LAN, then press Start (or Stop, then Start).")
            show_plain(self.status, why)
            for label in (self.addresses, self.port, self.model, self.fingerprint):
                label.setText("—")
        else:
            show_plain(self.status, self.tr("Shared: apps on other devices use these, with a key."))
            show_plain(self.addresses, "\n".join([*info.urls, *([info.mdns_url] if info.mdns_url else [])]))
            self.port.setText(str(info.port))
            show_plain(self.model, info.model)
            # whole, never shortened: the user compares every pair with what the app shows
            self.fingerprint.setTextFormat(Qt.TextFormat.PlainText)
            if info.fingerprint:
                self.fingerprint.setText(info.fingerprint + "\n" + self.tr("(the app pins or trusts the file %1)")
                                         .replace("%1", info.cert_path or ""))
            else:
                self.fingerprint.setText(self.tr("none: plain HTTP, keys cross the network in clear"))
        self._list_keys()

    def follow_server(self, _state: str = "", _error: str = "") -> None:
        """llama-server's state changed (started, stopped, relaunched): show the endpoint anew."""
        self.refresh()

    def _list_keys(self) -> None:
        self.key_list.clear()
        try:
            names = [k.name for k in self.keys.list()]
        except ApiKeyError as exc:  # an unreadable key file: say which and what to do
            self._show_error(str(exc))
            names = []
        self.key_list.addItems(names)
        self._update_buttons()

    def _update_buttons(self) -> None:
        self.revoke_button.setEnabled(self.key_list.currentRow() >= 0)

    def _show_error(self, text: str) -> None:
        show_plain(self.error, text)
        self.error.setVisible(bool(text))

    def _show_new_key(self, key: str) -> None:
        self.new_key.setText(key)
        for w in (self.new_key, self.copy_button, self.once_note):
            w.setVisible(bool(key))
        self.qr.setVisible(False)  # (shown by make_key while the endpoint is shared)

    def _https_switched(self, on: bool) -> None:
        self.settings.set(HTTPS_SETTING, on)
        self.httpsChanged.emit(on)

    def _switched(self, on: bool) -> None:
        self.settings.set(SHARE_SETTING, on)
        self.refresh()
        self.sharingChanged.emit(on)

    # ------------------------------------------------------------ keys

    def make_key(self) -> str | None:
        """Make a key called as the name field says; show it once. Returns it (None if refused)."""
        try:
            key = self.keys.add(self.key_name.text().strip())
        except (ApiKeyError, OSError) as exc:
            self._show_error(str(exc))
            return None
        self._show_error("")
        self._show_new_key(key)
        info = self._info()
        if info is not None:
            image = qr_image(qr_text(info.urls[0], key))
            self.qr.setPixmap(QPixmap.fromImage(image.scaled(image.width() * QR_SCALE, image.height() * QR_SCALE)))
            self.qr.setVisible(True)
        self.key_name.clear()
        self._list_keys()
        self.keysChanged.emit()
        return key

    def revoke_selected(self) -> None:
        """Revoke the key selected in the list (the running front door refuses it at once)."""
        item = self.key_list.currentItem()
        if item is None:
            return
        try:
            self.keys.revoke(item.text())
        except (ApiKeyError, OSError) as exc:
            self._show_error(str(exc))
            return
        self._show_new_key("")
        self._list_keys()
        self.keysChanged.emit()

"""One herd window per user, as desktop apps do.

A second ``herd`` (or ``herd demo``) opened while one runs would fight the first over the same
workers: its Start failed with "Its RPC worker is in use by another client", that client being
the first window. So the running app listens on a local socket (a Unix socket, a named pipe on
Windows) whose name is the user's and their config folder's; a second one connects, asks the
first to bring its window to the front, and exits. Headless commands do not look.

A socket file left by an app that crashed answers no one: connecting fails, and the new app
removes it before it listens.
"""

from __future__ import annotations

import getpass
import hashlib
import logging

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

#: What a second herd sends to the first.
SHOW = b"show\n"


def instance_name() -> str:
    """The local socket's name: one per user and config folder (``$HERD_CONFIG_DIR`` gives a
    test, or a portable copy, an app of its own)."""
    from gui.cluster.nodes.records import config_dir

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): the config folder still differs
        user = "user"
    digest = hashlib.sha256(f"{user}\0{config_dir().resolve()}".encode()).hexdigest()[:16]
    return f"llama-herd-{digest}"


def ask_running(name: str | None = None, timeout_ms: int = 1000) -> bool:
    """Ask the herd already running for this user to show its window; True if one is there.

    Needs no QApplication, so ``herd demo`` can ask before it starts its agents."""
    sock = QLocalSocket()
    sock.connectToServer(name or instance_name())
    if not sock.waitForConnected(timeout_ms):
        return False  # none, or a stale socket file of one that crashed
    sock.write(SHOW)
    sock.waitForBytesWritten(timeout_ms)
    sock.disconnectFromServer()
    if sock.state() != QLocalSocket.LocalSocketState.UnconnectedState:
        sock.waitForDisconnected(timeout_ms)
    return True


class SingleInstance(QObject):
    """The running app's side: listens for a second herd's request.

    Signals:
        activated(): another herd asked this one to show its window.

    Attributes:
        name: the socket's name (:func:`instance_name`).
        server: the listening ``QLocalServer``.
    """

    activated = Signal()

    def __init__(self, name: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name or instance_name()
        self.server = QLocalServer(self)
        # only this user may connect (the socket file is 0700-like)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._accept)

    def listen(self) -> bool:
        """Start listening, taking over a socket file that an app which crashed left behind
        (call :func:`ask_running` first: a live one answers it). False if it cannot listen; the
        app then runs without the guard."""
        QLocalServer.removeServer(self.name)
        if not self.server.listen(self.name):
            log.warning("cannot listen on %s: %s; a second herd will not find this one",
                        self.name, self.server.errorString())
            return False
        return True

    def close(self) -> None:
        """Stop listening (removes the socket file)."""
        self.server.close()

    def _accept(self) -> None:
        while self.server.hasPendingConnections():
            conn = self.server.nextPendingConnection()
            conn.setParent(self)
            conn.readyRead.connect(lambda c=conn: self._read(c))
            conn.disconnected.connect(conn.deleteLater)
            if conn.bytesAvailable():
                self._read(conn)

    def _read(self, conn: QLocalSocket) -> None:
        if bytes(conn.readAll().data()).startswith(SHOW.strip()):
            log.info("another herd asked for this window: bringing it to the front")
            self.activated.emit()

"""One herd window per user, as desktop apps do.

A second ``herd`` (or ``herd demo``) opened while one runs would fight the first over the same
workers: its Start failed with "Its RPC worker is in use by another client", that client being
the first window. So the running app listens on a local socket (a Unix socket, a named pipe on
Windows) whose name is the user's and their config folder's; a second one connects, asks the
first to bring its window to the front, and exits. Headless commands do not look.

Two ``herd`` started at the same instant must not both find nobody there and both listen, so
the claim is a lock file in the config folder, locked by the OS (``QLockFile``) and held for
the app's life: exactly one takes it and listens; the other asks that one to show its window,
waiting the moment it takes to start listening. A lock of a process that died is stale (Qt
checks its pid) and taken over.

A socket file left by an app that crashed answers no one: connecting fails, and the new app
removes it before it listens.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import time
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
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


def lock_path() -> Path:
    """The lock file that makes one app the running one: in the config folder, so one per user
    and config folder, as :func:`instance_name`."""
    from gui.cluster.nodes.records import config_dir

    return config_dir() / "herd-app.lock"


def claim(name: str | None = None, wait_s: float = 10.0) -> SingleInstance | None:
    """Become this user's one running herd, or have the one that is show its window.

    Returns the listening :class:`SingleInstance` (it holds the lock until :meth:`~SingleInstance.close`)
    when this process is the one; None when another herd is (it was asked to come to the
    front, or did not answer within ``wait_s``: it may be stuck starting). Of any number of
    herds started together exactly one gets an instance. Where the lock file cannot be made
    (a read-only config folder) the app runs as before the lock: it asks, then listens."""
    path = lock_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # tryLock says so below
    lock = QLockFile(str(path))
    lock.setStaleLockTime(0)  # held for the app's life: only a dead owner makes it stale
    deadline = time.monotonic() + wait_s
    told = False
    while not lock.tryLock(0):
        if lock.error() != QLockFile.LockError.LockFailedError:
            log.warning("cannot lock %s (%s); two herds started together may both open", path, lock.error())
            if ask_running(name):
                return None
            lock = None
            break
        if not told:
            log.info("another herd holds %s: asking it to show its window", path)
            told = True
        # it listens a moment after taking the lock (or it is closing, and the lock comes free)
        if ask_running(name):
            return None
        if time.monotonic() > deadline:
            log.warning("the herd that holds %s does not answer", path)
            return None
        time.sleep(0.05)  # the other process is between taking the lock and listening
    instance = SingleInstance(name)
    instance.lock = lock
    instance.listen()
    return instance


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
        lock: the ``QLockFile`` held while this app is the running one (:func:`claim`), or None.
    """

    activated = Signal()

    def __init__(self, name: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name or instance_name()
        self.server = QLocalServer(self)
        # only this user may connect (the socket file is 0700-like)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._accept)
        self.lock: QLockFile | None = None

    def listen(self) -> bool:
        """Start listening, taking over a socket file that an app which crashed left behind
        (:func:`claim` calls it holding the lock, so no live app listens there). False if it
        cannot listen; the app then runs without the guard."""
        QLocalServer.removeServer(self.name)
        if not self.server.listen(self.name):
            log.warning("cannot listen on %s: %s; a second herd will not find this one",
                        self.name, self.server.errorString())
            return False
        return True

    def close(self) -> None:
        """Stop listening (removes the socket file) and let the lock go."""
        self.server.close()
        if self.lock is not None:
            self.lock.unlock()
            self.lock = None

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

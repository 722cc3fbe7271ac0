"""Serving in the background: what closing the window does while the cluster serves (#36 item 1).

A home cluster serves a household for days; the window is only one way in. Closing the window
while the cluster serves asks whether to keep serving in the background, to stop the cluster
and quit, or to cancel. The answer can be remembered (``window/on_close``) and changed under
*Cluster ▸ When the window is closed while serving*.

In the background the window is hidden and the tray icon (:class:`~gui.widgets.tray.ServingTray`)
says how the cluster is and offers *Open*, *Stop cluster* and *Quit*. A desktop without a tray
would leave no way back to a hidden window, so there the window is minimised instead, and the
question says so.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent
from PySide6.QtWidgets import QCheckBox, QMenu, QMessageBox, QSystemTrayIcon

from gui.widgets.tray import ServingState, ServingTray, tray_available

#: The setting that holds the remembered answer.
ON_CLOSE_KEY = "window/on_close"
#: Its values: ask each time, keep serving in the background, stop the cluster and quit.
ASK, KEEP_SERVING, STOP = "ask", "background", "stop"
ON_CLOSE_CHOICES = (ASK, KEEP_SERVING, STOP)
#: The answer "Cancel" (never remembered).
CANCEL = "cancel"


class BackgroundServing(QObject):
    """The close-window choice and the tray of one main window.

    Attributes:
        win: the :class:`~gui.app.MainWindow`.
        tray: the :class:`~gui.widgets.tray.ServingTray`, or None where the desktop has no tray.
        front_door: the running :class:`~gui.cluster.serving.front_door.FrontDoor`, if the
            launch shares on the LAN (the session's, read each time): the tray names who uses the
            cluster from its counts.
        in_background: the window was closed and the cluster keeps serving.
    """

    def __init__(self, win, icon) -> None:
        super().__init__(win)
        self.win = win
        self.in_background = False
        self.state = ServingState()
        self.tray: ServingTray | None = None
        if tray_available():
            self.tray = ServingTray(icon, win)
            self.tray.openRequested.connect(self.open_window)
            self.tray.stopRequested.connect(self.stop_cluster)
            self.tray.quitRequested.connect(win.quit_asking)
            self.tray.show_state(self.state)
            self.tray.show()
        win.session.sample.connect(self.on_sample)
        win.session.serverState.connect(self.on_server_state)

    # ------------------------------------------------------------ the settings

    def choice(self) -> str:
        """The remembered answer (``ask`` unless one was kept)."""
        value = self.win.settings.get(ON_CLOSE_KEY)
        return value if value in ON_CLOSE_CHOICES else ASK  # a hand-edited file: ask

    def add_settings_menu(self, menu: QMenu) -> QMenu:
        """Add *When the window is closed while serving* with its three choices to ``menu``."""
        sub = menu.addMenu(self.tr("When the &window is closed while serving"))
        group = QActionGroup(sub)
        self.choice_actions: dict[str, QAction] = {}
        for value, title in ((ASK, self.tr("&Ask")), (KEEP_SERVING, self.tr("&Keep serving in the background")),
                             (STOP, self.tr("&Stop the cluster and quit"))):
            action = sub.addAction(title)
            action.setCheckable(True)
            action.setActionGroup(group)
            action.setChecked(value == self.choice())
            action.triggered.connect(lambda _on=False, v=value: self.remember(v))
            self.choice_actions[value] = action
        return sub

    def remember(self, value: str) -> None:
        """Keep ``value`` as the answer to the close question (``ask``: ask again)."""
        self.win.settings.set(ON_CLOSE_KEY, value)
        self.win.settings.sync()
        if hasattr(self, "choice_actions"):
            self.choice_actions[value].setChecked(True)

    # ------------------------------------------------------------ closing the window

    def on_window_close(self, event: QCloseEvent) -> bool:
        """The user closes the window: True when it is handled here (kept serving or cancelled,
        the event ignored); False to go on closing (and stop the cluster)."""
        if not self.win.session.cluster_launch.is_running:
            return False
        answer = self.choice()
        if answer == ASK:
            answer = self.ask()
        if answer == STOP:
            return False
        event.ignore()
        if answer == KEEP_SERVING:
            self.keep_serving()
        return True

    def ask(self) -> str:
        """Ask what closing the window does now: ``background``, ``stop`` or ``cancel``."""
        text = self.tr("The cluster is serving. herd can keep serving it in the background, or stop "
                       "llama-server and the workers herd started.")
        if self.tray is None:
            text += "\n\n" + self.tr("This desktop has no system tray: in the background the window stays "
                                     "minimised on the taskbar instead.")
        box = QMessageBox(QMessageBox.Icon.Question, self.tr("Close llama-herd"), text, parent=self.win)
        keep = box.addButton(self.tr("Keep serving in the background"), QMessageBox.ButtonRole.AcceptRole)
        stop = box.addButton(self.tr("Stop and quit"), QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(keep)
        remember = QCheckBox(self.tr("Don't ask again (change it under Cluster ▸ When the window is closed)"))
        box.setCheckBox(remember)
        box.exec()
        answer = {keep: KEEP_SERVING, stop: STOP}.get(box.clickedButton(), CANCEL)
        if answer != CANCEL and remember.isChecked():
            self.remember(answer)
        return answer

    def keep_serving(self) -> None:
        """Leave the cluster serving with the window out of the way: hidden behind the tray
        icon, or minimised where there is no tray."""
        self.in_background = True
        if self.tray is not None:
            self.win.hide()
            self.tray.showMessage(self.tr("llama-herd keeps serving"),
                                  self.tr("The cluster serves in the background. Use this icon to open the "
                                          "window, stop the cluster or quit."),
                                  QSystemTrayIcon.MessageIcon.Information, 8000)
        else:
            self.win.showMinimized()
            self.win.statusBar().showMessage(
                self.tr("This desktop has no system tray, so the window stays minimised while the cluster "
                        "serves. Quit from the File menu to stop it."), 0)

    # ------------------------------------------------------------ the tray's actions

    def open_window(self) -> None:
        """Tray ▸ Open: the window back, on top."""
        self.in_background = False
        self.win.bring_to_front()

    @property
    def front_door(self):
        """The front door the session's launch opened, or None (#34: the app shares through it)."""
        return self.win.session.sharing.door

    def stop_cluster(self) -> None:
        """Tray ▸ Stop cluster: stop llama-server and the workers; herd stays in the tray."""
        if self.win.session.cluster_launch.is_running:
            self.win.launch_flow.stop()
        self.state.serving = False
        self.show_state()

    def on_sample(self, sample) -> None:
        """A telemetry sample: keep what the tray tells (rate, replies now, the model)."""
        values = sample.values
        if sample.kind == "metrics" and values.get("decode_tps") is not None:
            self.state.decode_tps = float(values["decode_tps"])
        elif sample.kind == "server":
            self.state.serving = values.get("state") == "ready" and self.win.session.cluster_launch.is_running
            self.state.replies_now = int(values.get("busy_slots") or 0)
        else:
            return
        # coalesce: samples come several a second while replies stream
        self.show_state_soon()

    def on_server_state(self, _state, _error: str) -> None:
        """llama-server's state changed: the tray says so once the window has taken it in."""
        self.show_state_soon()

    def show_state_soon(self) -> None:
        """:meth:`show_state` on the next turn of the event loop; not at all once the window is
        gone (the session that reports may outlive it)."""
        QTimer.singleShot(0, self, self.show_state)

    def show_state(self) -> None:
        """Refresh the tray's tool tip and menu from the running launch and the samples."""
        if self.tray is None:
            return
        running = self.win.workspace.running
        self.state.model = running.model.name if running is not None else ""
        if not self.win.session.cluster_launch.is_running:
            self.state.serving = False
        self.state.served = dict(self.front_door.served) if self.front_door is not None else {}
        self.tray.show_state(self.state)


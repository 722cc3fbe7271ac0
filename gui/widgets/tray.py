"""The tray icon while herd serves in the background (#36 item 1).

Its tool tip and the top of its menu say how the cluster is: serving or not, the model, the
decode rate and who uses it; its menu offers *Open*, *Stop cluster* and *Quit*. The icon only
shows and asks: what the actions do is up to the window (:mod:`gui.background`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from PySide6.QtCore import Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QMenu, QSystemTrayIcon, QWidget

from gui.widgets.outside_text import plain_tooltip, shortened


def tray_available() -> bool:
    """Whether this desktop shows tray icons (a desktop without a tray host does not)."""
    return QSystemTrayIcon.isSystemTrayAvailable()


@dataclass
class ServingState:
    """What the tray tells about the cluster.

    Attributes:
        status: the last word on the cluster (``ready``, ``stopped``, a failover event…).
        serving: llama-server answers now.
        model: the name of the model it serves ("" when none).
        decode_tps: the last decode rate in tokens/s (None before a reply finished).
        replies_now: replies being written now (llama-server's busy slots).
        served: requests answered by the front door so far, by key name ("" for this PC).
    """

    status: str = ""
    serving: bool = False
    model: str = ""
    decode_tps: float | None = None
    replies_now: int = 0
    served: Mapping[str, int] = field(default_factory=dict)


class ServingTray(QSystemTrayIcon):
    """The tray icon with the cluster's state and *Open*, *Stop cluster*, *Quit*.

    Attributes:
        state: the :class:`ServingState` shown.
        open_action, stop_action, quit_action: the menu's actions.

    Signals:
        openRequested: show the window.
        stopRequested: stop the cluster (herd keeps running).
        quitRequested: stop the cluster and quit herd.
    """

    openRequested = Signal()
    stopRequested = Signal()
    quitRequested = Signal()

    def __init__(self, icon: QIcon, parent: QWidget) -> None:
        super().__init__(icon, parent)
        self.state = ServingState()
        self._menu = QMenu(parent)
        self._state_actions = [self._menu.addAction(""), self._menu.addAction("")]
        for action in self._state_actions:
            action.setEnabled(False)  # information, not a command
        self._menu.addSeparator()
        self.open_action = self._menu.addAction(self.tr("Open"), self.openRequested.emit)
        self.stop_action = self._menu.addAction(self.tr("Stop cluster"), self.stopRequested.emit)
        self.quit_action = self._menu.addAction(self.tr("Quit"), self.quitRequested.emit)
        self.setContextMenu(self._menu)
        # a click on the icon itself opens the window, as in most tray apps
        self.activated.connect(lambda reason: self.openRequested.emit()
                               if reason == QSystemTrayIcon.ActivationReason.Trigger else None)
        self.show_state(self.state)

    def setToolTip(self, status: str) -> None:  # noqa: N802 - keeps QSystemTrayIcon's name
        """Take ``status`` as the last word on the cluster; the tool tip adds the rest."""
        self.state.status = status
        self.show_state(self.state)

    def show_state(self, state: ServingState) -> None:
        """Show ``state`` in the tool tip and the menu."""
        self.state = state
        lines = self.state_lines(state)
        for action, line in zip(self._state_actions, lines + [""], strict=False):
            action.setText(line)
            action.setVisible(bool(line))
        self.stop_action.setEnabled(state.serving)
        super().setToolTip(plain_tooltip("\n".join(["llama-herd", *lines])))

    def state_lines(self, state: ServingState) -> list[str]:
        """The two lines that say how the cluster is: what it serves, and who uses it."""
        if not state.serving:
            status = shortened(state.status) if state.status else self.tr("not running")
            return [self.tr("Not serving (%1)").replace("%1", status)]
        model = shortened(state.model, most_chars=60) or self.tr("a model")
        first = self.tr("Serving %1").replace("%1", model)
        if state.decode_tps is not None:
            first += " · " + self.tr("%1 tokens/s").replace("%1", f"{state.decode_tps:.1f}")
        return [first, self.users_line(state)]

    def users_line(self, state: ServingState) -> str:
        """Who uses the cluster: replies being written now and the front door's callers."""
        callers = [self.tr("%1 (%2 requests)").replace("%1", shortened(name, most_chars=30) if name
                                                          else self.tr("this PC")).replace("%2", str(count))
                   for name, count in sorted(state.served.items(), key=lambda kv: -kv[1])]
        if callers:
            used = self.tr("Used by: %1").replace("%1", ", ".join(callers[:3]))
        else:
            used = self.tr("No requests from other apps yet")
        if state.replies_now:
            used += " · " + self.tr("replies being written now: %1").replace("%1", str(state.replies_now))
        return used

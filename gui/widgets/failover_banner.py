"""A banner across the top of the window while the cluster recovers from a lost worker.

It turns the failover supervisor's events (:mod:`gui.cluster.failover.supervisor`) into what the user
needs to see and do: which node was lost and why, the countdown to the relaunch with **Cancel**
and **Relaunch now**, the choices when the model no longer fits without the node (wait for it,
or run with more layers on this computer), and **Use <node> again** when it comes back. Its
buttons only emit intentions; the window hands them to the session.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QVBoxLayout

from gui.cluster.failover import events as E
from gui.cluster.failover.text import describe_event
from gui.widgets.outside_text import NAME_WORD, PlainLabel, shortened

#: How long "serving again" stays up before the banner hides by itself (ms).
RECOVERED_HIDE_MS = 8000

_BAD = "#fdecea"
_BUSY = "#fff4d6"
_GOOD = "#e6f4ea"


class FailoverBanner(QFrame):
    """Shows a failover in progress; hidden while the cluster serves normally.

    Signals:
        cancelRequested(): stop the countdown to the automatic relaunch.
        optionChosen(str): one of the supervisor's options — ``recover`` (relaunch now),
            ``wait``, ``host`` (more layers on this computer) or ``rejoin``.

    Attributes:
        title, detail, countdown: the labels (the node and what happened; the core's words;
            the live countdown).
        cancel_button, recover_button, wait_button, host_button, rejoin_button, close_button.
        options: the options the buttons offer now.
        lost_node, returned_node: the node named by the last loss / return, or None.
    """

    cancelRequested = Signal()
    optionChosen = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("failoverBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.options: tuple[str, ...] = ()
        self._offered: tuple[str, ...] = ()  # what the buttons offered before the last click
        self.lost_node: str | None = None
        self.returned_node: str | None = None
        self._loss = ""  # why the node was lost (kept when the new plan is shown)
        self._plan_nodes: tuple[str, ...] | None = None  # who the new plan runs on
        # node names and the supervisor's reasons are outside text: plain, long words cut (#32)
        self.title = PlainLabel()
        self.title.setStyleSheet("font-weight: bold;")
        self.detail = PlainLabel()
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.countdown = PlainLabel()
        self.cancel_button = QPushButton(self.tr("Cancel"))
        self.recover_button = QPushButton(self.tr("Relaunch now"))
        self.wait_button = QPushButton()
        self.host_button = QPushButton(self.tr("Run with more layers on this computer"))
        self.rejoin_button = QPushButton()
        self.close_button = QPushButton(self.tr("Hide"))
        self.cancel_button.clicked.connect(self.cancelRequested)
        self.recover_button.clicked.connect(lambda: self._choose(E.OPT_RECOVER))
        self.wait_button.clicked.connect(lambda: self._choose(E.OPT_WAIT))
        self.host_button.clicked.connect(lambda: self._choose(E.OPT_HOST))
        self.rejoin_button.clicked.connect(lambda: self._choose(E.OPT_REJOIN))
        self.close_button.clicked.connect(self.hide)

        text = QVBoxLayout()
        text.addWidget(self.title)
        text.addWidget(self.detail)
        text.addWidget(self.countdown)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for b in (self.cancel_button, self.recover_button, self.wait_button, self.host_button,
                  self.rejoin_button, self.close_button):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addLayout(text)
        layout.addLayout(buttons)
        self._hide_timer = QTimer(self)
        self._hide_timer.setSingleShot(True)
        self._hide_timer.timeout.connect(self.hide)
        self._counting = False
        self._update_buttons()
        self.hide()

    # ------------------------------------------------------------ API

    def show_event(self, ev, nodes: list[str] | None = None) -> None:
        """Show what the :class:`~gui.cluster.failover.supervisor.FailoverEvent` ``ev`` means; ``nodes``:
        the names of the nodes a relaunch can use (for the countdown's words)."""
        kind = ev.kind
        self._hide_timer.stop()
        if kind == E.EventKind.LOST:
            self.lost_node = ev.node
            self._loss = describe_event(ev)
            self._plan_nodes = None
            self._set(_BAD, self.tr("%1 was lost").replace("%1", ev.node or "?"), describe_event(ev))
            self._counting = False
            self.countdown.clear()
            self.options = ()
        elif kind == E.EventKind.SERVER_EXITED:
            self._loss = describe_event(ev)
            self._plan_nodes = None
            self._set(_BAD, self.tr("llama-server stopped"), describe_event(ev))
            self._counting = False
            self.countdown.clear()
            self.options = ()
        elif kind == E.EventKind.REPLANNED:
            # The reason for the loss stays beside the new plan; and a lost node the new plan
            # uses again (its agent restarted its worker) is said to be back, not lost (#17).
            self._plan_nodes = tuple(ev.nodes)
            if self.lost_node and self.lost_node in ev.nodes:
                self.title.setText(self.tr("%1 dropped out and answers again; relaunching with it")
                                   .replace("%1", self.lost_node))
            self.detail.setText("\n".join(t for t in (self._loss, describe_event(ev)) if t))
        elif kind == E.EventKind.COUNTDOWN_TICK:
            planned = self._plan_nodes if self._plan_nodes is not None else nodes
            where = ", ".join(planned) if planned else self.tr("this computer alone")
            self.countdown.setText(self.tr("Relaunching on %1 in %2 s…")
                                   .replace("%1", where).replace("%2", str(math.ceil(ev.seconds or 0))))
            self._counting = True
            self.options = ev.options
        elif kind == E.EventKind.CANCELLED:
            self._counting = False
            self.countdown.setText(self.tr("Automatic relaunch cancelled. The cluster stays down "
                                           "until you relaunch it."))
        elif kind == E.EventKind.NO_FIT:
            self._set(_BAD, self.tr("The model does not fit without %1")
                      .replace("%1", self.lost_node or self.tr("the lost node")), describe_event(ev))
            self._counting = False
            self.countdown.clear()
            self.options = ev.options
        elif kind == E.EventKind.WAITING:
            self._counting = False
            if not self.countdown.text():
                self.countdown.setText(self.tr("Waiting: %1").replace("%1", describe_event(ev)))
            self.options = ev.options
        elif kind == E.EventKind.RELAUNCHING:
            self._set(_BUSY, self.tr("Relaunching…"), describe_event(ev))
            self._counting = False
            self.countdown.clear()
            self.options = ()
        elif kind == E.EventKind.RECOVERY_FAILED:
            self._set(_BAD, self.tr("Could not relaunch"), describe_event(ev))
            self._counting = False
            self.options = ()
        elif kind == E.EventKind.RECOVERED:
            self._set(_GOOD, self.tr("Serving again — you can continue the conversation"), describe_event(ev))
            self._counting = False
            self.countdown.clear()
            self.options = ()
            self.lost_node = None
            self._plan_nodes = None
            self._hide_timer.start(RECOVERED_HIDE_MS)
        elif kind == E.EventKind.RETURNED:
            self.returned_node = ev.node
            if E.OPT_REJOIN in ev.options:
                self._set(_BUSY, self.tr("%1 is back").replace("%1", ev.node or "?"), describe_event(ev))
                self.options = tuple(dict.fromkeys(self.options + (E.OPT_REJOIN,)))
            else:
                self._set(_BUSY, self.tr("%1 is back; re-planning with it").replace("%1", ev.node or "?"),
                          describe_event(ev))
                self.options = ()
        self._update_buttons()
        self.show()

    def clear(self) -> None:
        """Forget everything shown and hide (the cluster was stopped)."""
        self._hide_timer.stop()
        self.options = ()
        self._counting = False
        self.lost_node = self.returned_node = None
        self._loss, self._plan_nodes = "", None
        for label in (self.title, self.detail, self.countdown):
            label.clear()
        self._update_buttons()
        self.hide()

    def choice_failed(self) -> None:
        """The last choice was refused (the supervisor's state did not change): offer again
        what was offered before the click."""
        self.options = self._offered
        self._update_buttons()

    def counting(self) -> bool:
        """True while the countdown to an automatic relaunch runs."""
        return self._counting

    # ------------------------------------------------------------ inside

    def _set(self, color: str, title: str, detail: str) -> None:
        self.setStyleSheet(f"#failoverBanner {{ background: {color}; }}")
        self.title.setText(title)
        self.detail.setText(detail)

    def _choose(self, option: str) -> None:
        # One click is one intention: the buttons come back with the supervisor's next event
        # (or with choice_failed() when the choice is refused).
        self._offered = self.options
        self.options = ()
        self._counting = False
        self._update_buttons()
        self.optionChosen.emit(option)

    def _update_buttons(self) -> None:
        self.cancel_button.setVisible(self._counting)
        self.recover_button.setVisible(E.OPT_RECOVER in self.options)
        self.wait_button.setVisible(E.OPT_WAIT in self.options)
        self.wait_button.setText(self.tr("Wait for %1").replace(
            "%1", shortened(self.lost_node, longest_word=NAME_WORD) or self.tr("the lost node")))
        self.host_button.setVisible(E.OPT_HOST in self.options)
        self.rejoin_button.setVisible(E.OPT_REJOIN in self.options)
        self.rejoin_button.setText(self.tr("Use %1 again").replace(
            "%1", shortened(self.returned_node, longest_word=NAME_WORD) or "?"))

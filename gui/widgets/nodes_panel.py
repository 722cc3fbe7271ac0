"""The nodes panel: one card per node — the master itself first, then every worker by name.

A card shows the node's name (beside a square of the colour the split bar and the dashboard
draw it in), address, state, CPU/RAM (and GPU) with free memory, a sparkline of
its link round-trip time, a Wi-Fi warning, the llama.cpp build it runs, and whether this master
is paired with it. Its buttons only *ask*: Pair… (with the PIN the agent shows), start or stop
its RPC worker. The panel's own button adds a node by address, for networks where mDNS is blocked.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from PySide6.QtCore import QPointF, QRegularExpression, QSize, Qt, Signal
from PySide6.QtGui import QPainter, QPen, QPolygonF, QRegularExpressionValidator
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.nodes.pairing_display import PIN_DIGITS, display_fingerprint, normalise_pin
from gui.widgets.node_colors import node_colors
from gui.widgets.outside_text import NAME_WORD, PlainLabel, escaped, shortened
from gui.widgets.wrapping_label import WrappingLabel

GiB = 1 << 30
WARN = "#d62728"


def _gib(n) -> str:
    return "?" if n is None else f"{n / GiB:.1f} GiB"


def _size(n: int) -> str:
    """Bytes as GiB, or as MiB below one GiB (a cache of a small model is not "0.0 GiB")."""
    return _gib(n) if n >= GiB else f"{n / (1 << 20):.0f} MiB"


class Sparkline(QWidget):
    """A tiny line of the last values (RTT in ms), newest on the right."""

    def __init__(self, length: int = 60, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: deque[float] = deque(maxlen=length)
        self.setMinimumSize(90, 22)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def add(self, v: float) -> None:
        """Append one value and repaint."""
        self.values.append(v)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(120, 22)

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        if len(self.values) < 2:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        w, h = self.width(), self.height()
        hi = max(self.values) or 1.0
        n = self.values.maxlen or len(self.values)
        pts = [QPointF(w - (len(self.values) - 1 - i) * w / (n - 1), h - 2 - (v / hi) * (h - 4))
               for i, v in enumerate(self.values)]
        p.setPen(QPen(self.palette().highlight().color(), 1.5))
        p.drawPolyline(QPolygonF(pts))
        p.end()


class NodeCard(QFrame):
    """One node. ``node_id`` is None for the master (host) card.

    Signals:
        pairRequested(str): the user wants to pair (the panel asks for the PIN).
        workerRequested(str, bool): start (True) or stop (False) this node's RPC worker.
        wakeRequested(str): send this sleeping node its Wake-on-LAN packet (#36).
    """

    pairRequested = Signal(str)
    workerRequested = Signal(str, bool)
    wakeRequested = Signal(str)

    def __init__(self, node_id: str | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.node_id = node_id
        self.name = node_id or ""
        #: the node's colour in every view (:func:`gui.widgets.node_colors.node_colors`)
        self.color = ""
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName("nodeCard")
        # Wrapped labels that get the height their text needs in the scrolled list (#17).
        self.title = WrappingLabel()
        self.title.setTextFormat(Qt.TextFormat.RichText)  # the name in it is escaped (#32)
        # what the node announces or reports (its address, engine, CPU and GPU names) is text (#32)
        self.address = PlainLabel()
        self.state = QLabel()
        self.state.setTextFormat(Qt.TextFormat.PlainText)
        self.hardware = PlainLabel()
        self.engine = PlainLabel()
        self.warning = PlainLabel()
        self.warning.setStyleSheet(f"color: {WARN};")
        self.warning.hide()
        # Its own line: the Wi-Fi warning must not hide it, nor it the Wi-Fi warning.
        self.impostor = PlainLabel()
        self.impostor.setStyleSheet(f"color: {WARN}; font-weight: bold;")
        self.impostor.hide()
        self.rtt_label = QLabel()
        self.sparkline = Sparkline()
        self.sparkline.setMinimumWidth(40)
        self.pair_button = QPushButton(self.tr("Pair…"))
        self.worker_button = QPushButton(self.tr("Start worker"))
        self.wake_button = QPushButton(self.tr("Wake"))
        self.wake_button.setToolTip(self.tr("Send this computer a Wake-on-LAN packet (it must allow waking by "
                                            "the network, see the README)"))
        self.wake_button.hide()
        self.paired_label = QLabel()
        grid = QGridLayout(self)
        grid.addWidget(self.title, 0, 0, 1, 2)
        grid.addWidget(self.state, 0, 2, alignment=Qt.AlignmentFlag.AlignRight)
        grid.addWidget(self.address, 1, 0, 1, 3)
        grid.addWidget(self.hardware, 2, 0, 1, 3)
        grid.addWidget(self.engine, 3, 0, 1, 3)
        row = QHBoxLayout()
        row.addWidget(self.rtt_label)
        row.addWidget(self.sparkline, 1)
        grid.addLayout(row, 4, 0, 1, 3)
        grid.addWidget(self.warning, 5, 0, 1, 3)
        grid.addWidget(self.impostor, 6, 0, 1, 3)
        buttons = QHBoxLayout()
        buttons.addWidget(self.paired_label)
        buttons.addStretch(1)
        buttons.addWidget(self.pair_button)
        buttons.addWidget(self.wake_button)
        buttons.addWidget(self.worker_button)
        grid.addLayout(buttons, 7, 0, 1, 3)
        self._worker_running = False
        self.pair_button.clicked.connect(lambda: self.pairRequested.emit(self.node_id))
        self.worker_button.clicked.connect(
            lambda: self.workerRequested.emit(self.node_id, not self._worker_running))
        self.wake_button.clicked.connect(lambda: self.wakeRequested.emit(self.node_id))
        if node_id is None:
            self.pair_button.hide()
            self.worker_button.hide()
            self.rtt_label.hide()
            self.sparkline.hide()

    def _no_status_texts(self) -> tuple[str, str]:
        """What the hardware line says before any status (replaced when pairing changes it)."""
        return (self.tr("Waiting for the node's status…"),
                self.tr("Pair with this node to see its hardware and load."))

    def show_node(self, node) -> None:
        """Show a :class:`gui.cluster.nodes.records.Node`'s identity and reachability."""
        self.name = node.name
        self._show_title()
        if not self.hardware.text() or self.hardware.text() in self._no_status_texts():
            # until the agent's first status: said in words, not as zeros (#37); an unpaired node
            # tells its hardware only to a master it paired with
            self.hardware.setText(self.tr("Waiting for the node's status…") if node.paired
                                  else self.tr("Pair with this node to see its hardware and load."))
        self.address.setText(self.tr("Address: %1 (API %2, RPC %3)")
                             .replace("%1", node.host).replace("%2", str(node.api_port))
                             .replace("%3", str(node.rpc_port or "?")))
        if not node.reachable:
            self.state.setText(self.tr("lost"))
            self.state.setStyleSheet(f"color: {WARN}; font-weight: bold;")
        else:
            self.state.setText(self._state_text(node.state))
            self.state.setStyleSheet("")
        self.engine.setText(self.tr("llama.cpp build %1 · RPC %2").replace("%1", node.engine or "?")
                            .replace("%2", node.proto or "?"))
        self.paired_label.setText(self.tr("paired") if node.paired else
                                  self.tr("pair again (paired by an older version)") if getattr(node, "repair", False)
                                  else self.tr("not paired"))
        key = getattr(node, "key", "")
        # The pinned key's fingerprint, the way Syncthing shows device ids: compare it with what
        # `herd-agent` logs on the node ("this node's key fingerprint: ...").
        self.paired_label.setToolTip(self.tr("Key %1").replace("%1", display_fingerprint(key, 16)) if key else "")
        if key:
            self.paired_label.setText(self.tr("paired · key %1").replace("%1", display_fingerprint(key, 4)))
        impostor = node.impostor
        self.impostor.setText(self.tr("Another computer claims to be this node but its key is not the one "
                                      "pinned at pairing; this master does not use it. %1").replace("%1", impostor)
                              if impostor else "")
        self.impostor.setVisible(bool(impostor))
        self.pair_button.setVisible(not node.paired)
        self.worker_button.setEnabled(node.paired and node.reachable)
        # a paired node that does not answer may be asleep: wake it if its MAC is known (#36)
        self.wake_button.setVisible(node.paired and not node.reachable and getattr(node, "wakeable", False))
        self._worker_running = node.state in ("ready", "busy", "starting")
        self.worker_button.setText(self.tr("Stop worker") if self._worker_running else self.tr("Start worker"))

    def set_color(self, color: str) -> None:
        """Mark the card with the node's colour."""
        if color != self.color:
            self.color = color
            self._show_title()

    def _show_title(self) -> None:
        swatch = f'<span style="color: {self.color};">■</span> ' if self.color else ""
        self.title.setText(f"{swatch}<b>{escaped(self.name, longest_word=NAME_WORD)}</b>")

    def _state_text(self, state: str) -> str:
        names = {"stopped": self.tr("worker stopped"), "ready": self.tr("worker ready"),
                 "busy": self.tr("worker in use"), "starting": self.tr("worker starting"),
                 "crashed": self.tr("worker crashed"), "": self.tr("online")}
        return names.get(state, shortened(state, longest_word=NAME_WORD))

    def show_status(self, status) -> None:
        """Show an agent's status (an :class:`~agent.protocol.AgentStatus`, as the telemetry
        samples carry it: hardware, load, devices, NICs, worker state)."""
        rpc_state = status.rpc.state.value
        rpc_state = None if rpc_state == "unknown" else rpc_state
        if rpc_state is not None and self.state.text() != self.tr("lost"):
            # fresher than the mDNS record, which may lag behind
            self.state.setText(self._state_text(rpc_state))
            self._worker_running = rpc_state in ("ready", "busy", "starting")
            self.worker_button.setText(self.tr("Stop worker") if self._worker_running else self.tr("Start worker"))
        hw = status.get("hardware") or {}
        load = status.get("load") or {}
        parts = []
        cpu = hw.get("cpu") or hw.get("cpu_model") or ""
        cores = hw.get("cpu_threads") or hw.get("cpu_cores")
        line = self.tr("CPU %1").replace("%1", f"{cpu} ×{cores}" if cores else cpu or "?")
        if load.get("cpu_percent") is not None:
            line += self.tr(" · %1% busy").replace("%1", f"{load['cpu_percent']:.0f}")
        parts.append(line)
        parts.append(self.tr("RAM %1 free of %2").replace("%1", _gib(load.get("ram_free_bytes") or hw.get("ram_free_bytes")))
                     .replace("%2", _gib(hw.get("ram_total_bytes"))))
        for d in status.rpc.devices:
            if d.name.upper() != "CPU":
                parts.append(self.tr("GPU %1: %2 free of %3").replace("%1", d.name)
                             .replace("%2", _gib(d.free_bytes)).replace("%3", _gib(d.total_bytes)))
        cache = status.rpc.weight_cache
        if cache is not None and cache.cap_bytes <= 0 and cache.used_bytes <= 0:
            # nothing measured yet (a status right after pairing said "0 MiB of at most 0 MiB", #37)
            parts.append(self.tr("Weights cached: —"))
        elif cache is not None:
            # what makes a second start fast, and what it costs in disk (the cap: agent's cache_max_gib)
            parts.append(self.tr("Weights cached %1 of at most %2").replace("%1", _size(cache.used_bytes))
                         .replace("%2", _size(cache.cap_bytes)))
        awake = self._keep_awake_text(status.get("keep_awake"))
        if awake:
            parts.append(awake)
        self.hardware.setText("\n".join(parts))
        wifi = [n.get("name") for n in hw.get("nics") or [] if n.get("wifi") and not n.get("loopback")]
        self.set_warning(self.tr("Wi-Fi link (%1): expect slow, uneven decoding. Use a cable if you can.")
                         .replace("%1", ", ".join(wifi)) if wifi else "")

    def _keep_awake_text(self, keep_awake) -> str:
        """Whether the agent keeps its PC from sleeping while it serves (#36); "" when it would
        but no master uses it now."""
        if not isinstance(keep_awake, Mapping):
            return ""
        if keep_awake.get("held"):
            return self.tr("Kept awake while serving")
        if not keep_awake.get("enabled"):
            return self.tr("May sleep while serving (keep_awake is off in its agent.toml)")
        if keep_awake.get("error"):
            return self.tr("Cannot keep this computer awake: %1").replace("%1", str(keep_awake["error"]))
        return ""

    def show_host(self, name: str, cpu: str, cores: int, ram_free: int, ram_total: int, engine: str) -> None:
        """Show the master itself (the host CPU of every plan)."""
        self.title.setText(f"<b>{escaped(name, longest_word=NAME_WORD)}</b> — " + self.tr("this computer (host)"))
        self.address.setText(self.tr("Runs llama-server; keeps the first layers and the token embeddings."))
        self.state.setText(self.tr("host"))
        self.hardware.setText(self.tr("CPU %1").replace("%1", f"{cpu} ×{cores}") + "\n"
                              + self.tr("RAM %1 free of %2").replace("%1", _gib(ram_free)).replace("%2", _gib(ram_total)))
        self.engine.setText(engine)

    def add_rtt(self, ms: float) -> None:
        """One more RTT sample for the sparkline."""
        self.sparkline.add(ms)
        self.rtt_label.setText(self.tr("RTT %1 ms").replace("%1", f"{ms:.2f}"))

    def set_warning(self, text: str) -> None:
        """Show (or hide, with "") a warning line."""
        self.warning.setText(text)
        self.warning.setVisible(bool(text))


class PinDialog(QDialog):
    """Asks for the PIN a node's agent shows (:data:`agent.protocol.PIN_DIGITS` digits, typed with
    or without the space ``herd-agent pin`` shows in the middle); OK only once all its digits are
    typed (the agent would refuse anything else with an HTTP 400 in its own words, #17).

    Attributes:
        edit: the PIN field. hint: what is still missing. ok_button: accepts.
    """

    def __init__(self, node_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Pair with node"))
        # the name is what an unpaired computer announced: text, never rich text (#32)
        label = PlainLabel(self.tr("Enter the PIN %1 shows (herd-agent pin on that computer):")
                           .replace("%1", shortened(node_name, longest_word=NAME_WORD)))
        self.edit = QLineEdit()
        self.edit.setMaxLength(PIN_DIGITS + 4)
        self.edit.setValidator(QRegularExpressionValidator(QRegularExpression(r"[\d -]*"), self.edit))
        self.edit.setPlaceholderText("12345 67890")
        self.hint = QLabel()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(label)
        lay.addWidget(self.edit)
        lay.addWidget(self.hint)
        lay.addWidget(buttons)
        self.edit.textChanged.connect(self._check)
        self._check("")

    def pin(self) -> str:
        """The PIN typed (its digits)."""
        return normalise_pin(self.edit.text())

    def _check(self, text: str) -> None:
        typed = len(normalise_pin(text))
        self.ok_button.setEnabled(typed == PIN_DIGITS)
        self.hint.setText("" if typed == PIN_DIGITS else
                          self.tr("The PIN has %1 digits (%2 typed).").replace("%1", str(PIN_DIGITS))
                          .replace("%2", str(typed)))

    def accept(self) -> None:  # noqa: D401 - Qt override
        if len(self.pin()) == PIN_DIGITS:  # Enter in the field must not send a short PIN either
            super().accept()


class NodesPanel(QWidget):
    """All nodes as cards.

    Signals:
        addRequested(str): the user typed an address to add.
        pairRequested(str, str): node id and the PIN the user typed.
        workerRequested(str, bool): start/stop a node's RPC worker.
        wakeRequested(str): send a sleeping node its Wake-on-LAN packet.
        demoRequested(): the user asked for a local demo cluster (shown when no node is found).

    Attributes:
        host_card: the master's card.
        cards: {node id: :class:`NodeCard`}; shown by name (then id), so they come back in the
            same order whatever order discovery finds them in.
    """

    addRequested = Signal(str)
    pairRequested = Signal(str, str)
    workerRequested = Signal(str, bool)
    wakeRequested = Signal(str)
    demoRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cards: dict[str, NodeCard] = {}
        self.add_button = QPushButton(self.tr("Add by address…"))
        self.demo_button = QPushButton(self.tr("Try a local demo"))
        self.demo_button.setToolTip(self.tr("Start two workers on this computer to see the whole loop"))
        self.empty_label = WrappingLabel(self.tr("No worker found yet. Start herd-agent on your other PCs, "
                                                 "or add one by address."))
        self.message = PlainLabel()
        self.message.setStyleSheet(f"color: {WARN};")
        self.message.hide()
        self.host_card = NodeCard(None)
        self._list = QVBoxLayout()
        self._list.addWidget(self.host_card)
        inner = QWidget()
        inner_lay = QVBoxLayout(inner)
        inner_lay.addLayout(self._list)
        inner_lay.addWidget(self.empty_label)
        # under the sentence that suggests it, not in the title row (which it made too wide)
        demo_row = QHBoxLayout()
        demo_row.addWidget(self.demo_button)
        demo_row.addStretch(1)
        inner_lay.addLayout(demo_row)
        inner_lay.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        # cards wrap their text to the panel's width rather than scroll sideways
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(inner)
        top = QHBoxLayout()
        top.addWidget(QLabel("<b>" + self.tr("Nodes") + "</b>"))
        top.addStretch(1)
        top.addWidget(self.add_button)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(scroll, 1)
        # below the cards: a message that comes and goes must not move them (and their
        # buttons) under the mouse (#17)
        lay.addWidget(self.message)
        self.add_button.clicked.connect(self._ask_address)
        self.demo_button.clicked.connect(self.demoRequested)

    def card(self, node_id: str) -> NodeCard:
        """The card of ``node_id`` (created on first use)."""
        c = self.cards.get(node_id)
        if c is None:
            c = NodeCard(node_id)
            c.pairRequested.connect(self.ask_pin)
            c.workerRequested.connect(self.workerRequested)
            c.wakeRequested.connect(self.wakeRequested)
            self.cards[node_id] = c
            self._list.addWidget(c)
            self.empty_label.hide()
        return c

    def ordered_cards(self) -> list[NodeCard]:
        """The worker cards from top to bottom."""
        return [c for c in (self._list.itemAt(i).widget() for i in range(self._list.count()))
                if isinstance(c, NodeCard) and c is not self.host_card]

    def _arrange(self) -> None:
        """Cards by name, each in its node's colour (both by name: the same after a restart)."""
        ordered = sorted(self.cards.values(), key=lambda c: (c.name.casefold(), c.name, c.node_id))
        if ordered != self.ordered_cards():
            for c in ordered:
                self._list.removeWidget(c)
            for c in ordered:
                self._list.addWidget(c)
        colors = node_colors({nid: c.name for nid, c in self.cards.items()})
        for nid, c in self.cards.items():
            c.set_color(colors[nid])

    def on_node_event(self, kind: str, node) -> None:
        """Apply a discovery event."""
        if kind == "removed":
            c = self.cards.pop(node.id, None)
            if c is not None:
                c.setParent(None)
                c.deleteLater()
            self.empty_label.setVisible(not self.cards)
            self._arrange()
            return
        self.card(node.id).show_node(node)
        self._arrange()

    def on_sample(self, sample) -> None:
        """Apply a telemetry sample (link RTT, node status)."""
        c = self.cards.get(sample.source)
        if c is None:
            return
        if sample.kind == "link" and sample.values.get("rtt_median_ms") is not None:
            c.add_rtt(sample.values["rtt_median_ms"])
        elif sample.kind == "node" and isinstance(sample.values.get("status"), Mapping):
            c.show_status(sample.values["status"])

    def show_message(self, text: str, error: bool = True) -> None:
        """A message under the list: a failed pairing or an unreachable address (``error``), or
        a confirmation (a node paired); "" hides it."""
        self.message.setText(text)
        self.message.setStyleSheet(f"color: {WARN};" if error else "")
        self.message.setVisible(bool(text))

    def _ask_address(self) -> None:
        dlg = QInputDialog(self)
        dlg.setWindowTitle(self.tr("Add a node"))
        dlg.setLabelText(self.tr("Address of the node's herd-agent (host or host:port):"))
        # an error about the address typed before ("the port must be a number…") is stale
        # once the person types again
        dlg.textValueChanged.connect(self._clear_error)
        accepted = dlg.exec() == QDialog.DialogCode.Accepted
        text = dlg.textValue().strip()
        dlg.deleteLater()
        if accepted and text:
            self.addRequested.emit(text)

    def _clear_error(self) -> None:
        """Hide an error message; a confirmation stays."""
        if self.message.isVisible() and self.message.styleSheet() == f"color: {WARN};":
            self.show_message("")

    def ask_pin(self, node_id: str) -> None:
        """Ask for the PIN of ``node_id`` (its card's *Pair…*, or another window's offer to
        pair with it) and emit ``pairRequested`` with it."""
        card = self.cards.get(node_id)
        name = getattr(card, "name", node_id) if card is not None else node_id
        dlg = PinDialog(name, self)
        accepted = dlg.exec() == QDialog.DialogCode.Accepted
        pin = dlg.pin()
        dlg.deleteLater()  # one dialog per question, not one more child of the panel each time
        if accepted:
            self.pairRequested.emit(node_id, pin)

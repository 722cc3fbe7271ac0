"""The launch panel: doctor's findings, Start/Stop, loading progress, the log, the endpoint.

It shows what it is told and asks for Start/Stop; the window checks the plan, runs the doctor
and the launcher. Failures are shown as sentences that say what to do, not as tracebacks.
"""

from __future__ import annotations

import re

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.launching.state import STARTING_UP, LaunchState
from gui.cluster.nodes.wake import waking_message
from gui.widgets.feedback import flash_copied
from gui.widgets.outside_text import PlainLabel, plain_tooltip, shortened
from gui.widgets.people_box import PeopleBox

WARN = "#d62728"
OK = "#2ca02c"
AMBER = "#e6a700"

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colour codes llama.cpp writes even to pipes
_DEBUG_RE = re.compile(r"^\d+\.\d+\.\d+\.\d+ D ")  # llama.cpp's debug level (-lv 5, only when asked for)
_LAYER_RE = re.compile(r"load_tensors: layer\s+\d+ assigned")  # one per slot, only at -lv 5
_OFFLOADED_RE = re.compile(r"load_tensors: offloaded \d+/\d+ layers")  # once the layer map is done
_BUFFER_RE = re.compile(r"(model buffer size|KV buffer size|compute buffer size)")
#: Routine lines that llama-server writes for every poll of /metrics and /slots (herd's own
#: telemetry, twice a second): shown only with "Show debug lines" (#17).
_ROUTINE_RE = re.compile(r"update_slots: all slots are idle\s*$|log_server_r: request: GET /(metrics|slots|health|props)\b")
#: Boilerplate llama-server prints at every start: its notice about a future default port (herd
#: always passes --port) and, over several lines, an example chat in the model's template.
_NOTICE_RE = re.compile(r"server default port will be changed")
_EXAMPLE_START = "chat template, example_format: '"
_TIMESTAMP_RE = re.compile(r"^\d+\.\d+\.\d+\.\d+ [A-Z] ")  # every new log entry starts so


class LaunchPanel(QWidget):
    """Start and watch the cluster.

    Signals:
        startRequested(): the user pressed Start.
        stopRequested(): the user pressed Stop.
        stateChanged(str): :meth:`show_state` showed a state (the window's next-step line follows it).
        templateChosen(str): the user chose a built-in chat template for a model without one.
        startWithoutRequested(list): the user chose to start without the nodes named (they did
            not answer at Start).

    The launch's state is not kept here (#33): :meth:`show_state` shows the state it is given,
    and :attr:`state` reads it where :meth:`show_states_of` says (the app: its session, which
    follows :class:`~gui.cluster.cluster_launch.ClusterLaunch`).
    """

    startRequested = Signal()
    stopRequested = Signal()
    stateChanged = Signal(str)
    templateChosen = Signal(str)
    startWithoutRequested = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._state_of: Callable[[], LaunchState] = lambda: LaunchState.STOPPED
        self._starting_up = False  # a start's progress is shown: the log and the bytes drive the bar
        self._build_status()
        self._build_transfer()
        self._build_offers()
        self._build_log()
        self._lay_out()
        self.start_button.clicked.connect(self.startRequested)
        self.stop_button.clicked.connect(self.stopRequested)
        self.copy_button.clicked.connect(lambda: (QGuiApplication.clipboard().setText(self.endpoint.text()),
                                                  flash_copied(self.copy_button)))
        self.debug_box.toggled.connect(self._refill_log)

    def _build_status(self) -> None:
        """Start and Stop, the status line, the placement check, the notes, the progress bar,
        the doctor's findings and the endpoint."""
        self._n_slots = 0
        self._layers_seen = 0
        self._buffers_seen = 0
        self.start_button = QPushButton(self.tr("Start"))
        self.stop_button = QPushButton(self.tr("Stop"))
        self.stop_button.setEnabled(False)
        # node names and llama-server's and the agents' words: plain text (#32)
        self.status = PlainLabel(self.tr("Not running."))
        self.verified = PlainLabel()
        self.notes = PlainLabel()  # what the launch had to do differently (e.g. --no-repack)
        self.notes.setStyleSheet(f"color: {WARN};")
        self.notes.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.hide()
        self.findings = QListWidget()
        self.findings.setMaximumHeight(110)
        self.endpoint = QLineEdit()
        self.endpoint.setReadOnly(True)
        self.endpoint.setPlaceholderText(self.tr("The OpenAI-compatible endpoint appears here once running"))
        self.copy_button = QPushButton(self.tr("Copy"))

    def _build_transfer(self) -> None:
        """One bar per worker while its slice of the weights travels (#16), from the bytes its
        agent's relay counted; the stall line names a worker that stopped receiving."""
        self.transfer_box = QWidget()
        self._transfer_lay = QVBoxLayout(self.transfer_box)
        self._transfer_lay.setContentsMargins(0, 0, 0, 0)
        self.transfer_bars: dict[str, QProgressBar] = {}
        self.stall = PlainLabel()
        self.stall.setStyleSheet(f"color: {WARN};")
        self.stall.hide()
        self._transfer_lay.addWidget(self.stall)
        self.transfer_box.hide()
        self._by_bytes = False

    def _build_log(self) -> None:
        """llama-server's log, and the box that shows its debug and routine lines too."""
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(5000)  # keeps appending cheap on long runs
        self.log.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        # The newest line stays in view unless the user scrolled back to read. The scroll range
        # grows only when the text is laid out, after an append returns: so it is followed on
        # the range's own signal, not right after appending (which left the last line hidden).
        self._follow_log = True
        log_bar = self.log.verticalScrollBar()
        log_bar.valueChanged.connect(self._log_scrolled)
        log_bar.rangeChanged.connect(self._log_range_changed)
        self.debug_box = QCheckBox(self.tr("Show debug lines"))
        self._lines: list[str] = []
        self._hidden: list[bool] = []  # per line of _lines: shown only with "Show debug lines"
        self._in_example = False  # inside llama-server's multi-line example chat

    def _lay_out(self) -> None:
        """The panel from top to bottom: buttons and status, progress, checks, endpoint, log."""
        row = QHBoxLayout()
        row.addWidget(self.start_button)
        row.addWidget(self.stop_button)
        row.addWidget(self.status, 1)
        row.addWidget(self.without_button)
        self.people = PeopleBox()  # llama-server's -np, chosen before Start (#34)
        row.addWidget(self.people)
        ep = QHBoxLayout()
        ep.addWidget(QLabel(self.tr("Endpoint")))
        ep.addWidget(self.endpoint, 1)
        ep.addWidget(self.copy_button)
        lay = QVBoxLayout(self)
        lay.addLayout(row)
        lay.addWidget(self.progress)
        lay.addWidget(self.transfer_box)
        lay.addWidget(self.verified)
        lay.addWidget(self.notes)
        lay.addWidget(self.template_box)
        lay.addWidget(QLabel(self.tr("Checks")))
        lay.addWidget(self.findings)
        lay.addLayout(ep)
        log_head = QHBoxLayout()
        log_head.addWidget(QLabel(self.tr("llama-server log")))
        log_head.addStretch(1)
        log_head.addWidget(self.debug_box)
        lay.addLayout(log_head)
        lay.addWidget(self.log, 1)

    def _build_offers(self) -> None:
        """What Start offers when it cannot go as asked (both hidden until then): to start without
        a worker that does not answer, and a chat template for a model without one."""
        # A worker that does not answer at Start is not a dead end (#37): start over the others,
        # as the failover does when one is lost while serving.
        self.without_button = QPushButton()
        self.without_button.hide()
        self._without: list[str] = []
        self.without_button.clicked.connect(lambda: self.startWithoutRequested.emit(list(self._without)))
        # A model without a chat template (#37): said, with llama-server's built-in templates
        # to choose from (hidden for a model that has its own).
        self.template_box = QWidget()
        self.template_note = QLabel(self.tr("This model has no chat template: llama-server would fall back to "
                                            "ChatML, and a model trained on another format answers with "
                                            "markers such as <|im_end|> in its words. Choose the template "
                                            "it was trained with:"))
        self.template_note.setTextFormat(Qt.TextFormat.PlainText)
        self.template_note.setWordWrap(True)
        self.template_note.setStyleSheet(f"color: {AMBER};")
        self.template_choice = QComboBox()
        template_row = QHBoxLayout(self.template_box)
        template_row.setContentsMargins(0, 0, 0, 0)
        template_row.addWidget(self.template_note, 1)
        template_row.addWidget(self.template_choice)
        self.template_box.hide()
        self.template_choice.activated.connect(
            lambda i: self.templateChosen.emit(self.template_choice.itemData(i)))

    # ------------------------------------------------------------ shown state

    def refuse(self, reasons: list[str]) -> None:
        """Start was refused: say why, in words."""
        self.set_status(self.tr("Not started: %1").replace("%1", " ".join(reasons)), WARN)

    def set_status(self, text: str, color: str | None = None) -> None:
        """One line of status."""
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {color};" if color else "")

    def show_waking(self, name: str, waited: float) -> None:
        """Start waits for the sleeping node ``name`` to wake (``waited`` seconds so far)."""
        self.set_status(waking_message(name, waited))

    def subject_text(self, finding) -> str:
        """Who a finding is about, as the user reads it: this PC, or the node's name."""
        return self.tr("this PC") if finding.subject == "master" else finding.subject

    def show_findings(self, findings) -> None:
        """The doctor's findings (``Finding`` objects), errors first."""
        self.findings.clear()
        order = {"error": 0, "warning": 1, "ok": 2}
        marks = {"error": "✖", "warning": "⚠", "ok": "✔"}
        colors = {"error": WARN, "warning": AMBER, "ok": OK}
        for f in sorted(findings, key=lambda f: order.get(f.severity, 3)):
            item = QListWidgetItem(shortened(f"{marks.get(f.severity, '•')} {self.subject_text(f)}: {f.message}"))
            item.setForeground(QGuiApplication.palette().text() if f.severity == "ok" else _brush(colors[f.severity]))
            self.findings.addItem(item)

    def begin(self, n_slots: int) -> None:
        """A launch began: reset progress and log."""
        self._n_slots = max(1, n_slots)
        self._layers_seen = 0
        self._buffers_seen = 0
        self.log.clear()
        self._follow_log = True
        self._lines = []
        self._hidden = []
        self._in_example = False
        self.verified.clear()
        self.notes.clear()
        self.notes.hide()
        self.endpoint.clear()
        self.progress.setValue(0)
        self.progress.show()
        self._clear_transfer()
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.set_status(self.tr("Checking the nodes…"))

    def append_log(self, lines: list[str]) -> None:
        """New llama-server log lines; they also drive the progress estimate."""
        if not lines:
            return
        lines = [_ANSI_RE.sub("", line) for line in lines]
        hidden = [self._quiet(line) for line in lines]
        self._lines.extend(lines)
        self._hidden.extend(hidden)
        del self._lines[:-20000]
        del self._hidden[:-20000]
        shown = lines if self.debug_box.isChecked() else [x for x, h in zip(lines, hidden) if not h]
        if shown:
            if self._starting_up:
                self._follow_log = True
            self.log.appendPlainText("\n".join(shown))
            self._log_range_changed(0, self.log.verticalScrollBar().maximum())
        for line in lines:
            if _LAYER_RE.search(line):
                self._layers_seen += 1
            elif _OFFLOADED_RE.search(line):
                self._layers_seen = self._n_slots
            elif _BUFFER_RE.search(line):
                self._buffers_seen += 1
        if self._starting_up and not self._by_bytes:
            # Without workers (nothing travels) the log is all there is to go by:
            # the layer map comes first (≈ 40 %), then weights, KV cache and compute buffers.
            frac = 0.4 * min(1.0, self._layers_seen / self._n_slots) + 0.5 * min(1.0, self._buffers_seen / 6)
            self.progress.setValue(int(100 * min(frac, 0.95)))

    def show_transfer(self, event) -> None:
        """Each worker's slice of the weights as it arrives (a
        :class:`~gui.cluster.launching.transfer.TransferEvent`): a bar per worker with its bytes, rate,
        ETA and "from cache"; the overall bar follows the bytes; a stall is named."""
        if not self._starting_up:
            return
        self._by_bytes = True
        for w in event.workers:
            bar = self.transfer_bars.get(w.endpoint)
            if bar is None:
                bar = QProgressBar()
                bar.setRange(0, 1000)
                bar.setTextVisible(True)
                self.transfer_bars[w.endpoint] = bar
                self._transfer_lay.insertWidget(self._transfer_lay.count() - 1, bar)
            bar.setValue(int(1000 * w.fraction))
            bar.setFormat(shortened(w.describe()))
            bar.setToolTip(plain_tooltip(w.describe()))
        self.stall.setText(("⚠ " + event.stall) if event.stall else "")
        self.stall.setVisible(bool(event.stall))
        self.transfer_box.setVisible(bool(self.transfer_bars))
        # the weights are most of a start-up; the rest (KV cache, warm-up) is the last 5 %
        self.progress.setValue(int(95 * event.fraction))

    def _clear_transfer(self) -> None:
        for bar in self.transfer_bars.values():
            self._transfer_lay.removeWidget(bar)
            bar.deleteLater()
        self.transfer_bars = {}
        self.stall.clear()
        self.stall.hide()
        self.transfer_box.hide()
        self._by_bytes = False

    def _quiet(self, line: str) -> bool:
        """A debug line, routine noise or start-up boilerplate (the example chat, line after
        line, and the port notice): hidden unless "Show debug lines" is ticked. Called once per
        line in order; herd's own log file keeps every line."""
        text = line.rstrip()
        if self._in_example:
            if not _TIMESTAMP_RE.match(text):  # the example goes on until its closing quote
                self._in_example = not text.endswith("'")
                return True
            self._in_example = False  # a new entry: the example ended without its quote
        if _EXAMPLE_START in text:
            self._in_example = not text.split(_EXAMPLE_START, 1)[1].endswith("'")
            return True
        return bool(_DEBUG_RE.match(text) or _ROUTINE_RE.search(text) or _NOTICE_RE.search(text))

    def _refill_log(self) -> None:
        lines = self._lines if self.debug_box.isChecked() else [x for x, h in zip(self._lines, self._hidden) if not h]
        self.log.setPlainText("\n".join(lines))  # (which scrolls to the top)
        self._follow_log = True
        self._log_range_changed(0, self.log.verticalScrollBar().maximum())

    def _log_scrolled(self, value: int) -> None:
        self._follow_log = value >= self.log.verticalScrollBar().maximum() - 2

    def _log_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow_log:
            self.log.verticalScrollBar().setValue(maximum)

    def hold_for_recovery(self) -> None:
        """The failover supervisor has the cluster (it relaunches, or waits for a node or the
        user): Start is off, Stop stays the way out."""
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)

    def offer_start_without(self, names: list[str]) -> None:
        """Offer to start without the nodes ``names`` (their layers re-planned over the others);
        an empty list withdraws the offer."""
        self._without = list(names)
        self.without_button.setText(self.tr("Start without %1").replace("%1", ", ".join(names)))
        self.without_button.setToolTip(self.tr("Split the model over the other devices by their free memory, "
                                               "as when a node is lost while serving, and start."))
        self.without_button.setVisible(bool(names))

    def offer_templates(self, names: list[str] | tuple[str, ...], chosen: str) -> None:
        """The open model has no chat template: say so, and offer ``names`` (``chosen`` selected,
        "" for none yet); an empty ``names`` hides the offer (the model has its own)."""
        self.template_choice.blockSignals(True)
        self.template_choice.clear()
        self.template_choice.addItem(self.tr("ChatML (llama-server's fallback)"), "")
        for name in names:
            self.template_choice.addItem(name, name)
        self.template_choice.setCurrentIndex(max(0, self.template_choice.findData(chosen)))
        self.template_choice.blockSignals(False)
        self.template_box.setVisible(bool(names))

    def set_start_hint(self, text: str) -> None:
        """What hovering Start says ("" for nothing)."""
        self.start_button.setToolTip(plain_tooltip(text))  # it may name nodes (#32)

    def show_states_of(self, state_of: Callable[[], LaunchState]) -> None:
        """Where :attr:`state` reads the launch's state (the app: its session's)."""
        self._state_of = state_of

    @property
    def state(self) -> LaunchState:
        """The launch's state, read where :meth:`show_states_of` says (the panel keeps none)."""
        return self._state_of()

    def show_state(self, state: LaunchState | str, error: str = "") -> None:
        """Show the launch's state (a :class:`~gui.cluster.launching.state.LaunchState`) and,
        when it failed, why."""
        state = LaunchState(state)
        self._starting_up = state in STARTING_UP
        if state != LaunchState.STOPPED:
            self.offer_start_without([])
        if state == LaunchState.STARTING:
            self.set_status(self.tr("Starting the workers and llama-server…"))
        elif state == LaunchState.LOADING:
            self.set_status(self.tr("Loading the model onto the devices…"))
        elif state == LaunchState.READY:
            self.progress.setValue(100)
            self.progress.hide()
            self._clear_transfer()
            self.set_status(self.tr("Running."), OK)
            self.start_button.setEnabled(False)
            self.stop_button.setEnabled(True)
        elif state in (LaunchState.STOPPED, LaunchState.FAILED):
            self._show_ended(state, error)
        elif state == LaunchState.RELAUNCHING:
            # the failover supervisor has the cluster: Start is off, Stop stays the way out
            self.progress.hide()
            self.set_status(self.tr("Relaunching llama-server…"))
            self.hold_for_recovery()
        elif state == LaunchState.STOPPING:
            self.set_status(self.tr("Stopping…"))
        self.stateChanged.emit(str(state))

    def _show_ended(self, state: LaunchState, error: str) -> None:
        """Stopped, or failed (and why): Start is on again."""
        self.progress.hide()
        self.transfer_box.setVisible(state == LaunchState.FAILED and bool(self.transfer_bars))  # where it stopped
        self.start_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.endpoint.clear()
        if state == LaunchState.FAILED:
            self.set_status(self.tr("Failed: %1").replace("%1", error or self.tr("llama-server stopped.")), WARN)
        else:
            self.set_status(self.tr("Stopped."))

    def show_placement(self, check, notes: list[str] | tuple[str, ...] = ()) -> None:
        """After launch: placement verified, or the difference; then ``notes`` (translated
        sentences from the core, e.g. that llama-server was restarted with --no-repack)."""
        self.notes.setText("\n".join(f"⚠ {n}" for n in notes))
        self.notes.setVisible(bool(notes))
        if check.ok:
            self.verified.setText("✔ " + self.tr("Placement verified: llama-server put every layer where the plan said."))
            self.verified.setStyleSheet(f"color: {OK};")
        else:
            self.verified.setText("✖ " + self.tr("Placement differs from the plan: %1").replace("%1", "; ".join(check.problems)))
            self.verified.setStyleSheet(f"color: {WARN};")

    def set_endpoint(self, url: str | None) -> None:
        """The OpenAI-compatible base URL for other apps (None: nothing serves, nothing shown)."""
        self.endpoint.setText(url.rstrip("/") + "/v1" if url else "")


def _brush(color: str):
    from PySide6.QtGui import QBrush, QColor
    return QBrush(QColor(color))
